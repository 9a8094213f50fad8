"""The relay on a real controller process: a real node-side tunnel (`RelayTunnel`, a real
WebSocket) and fake engines on loopback (the engine is an outside thing for the relay).

The host registers as a relay host (no engine key, no address the controller could dial), its
tunnel dials out, and the router's requests reach the engine only through it: the engine key is
added on the node's side, streaming and cancellation pass through, a dropped tunnel closes the
host's routes at once and the tunnel comes back by itself. Handshakes without a valid credential,
or for another host, are refused and nothing is routed."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from grid.api.settings import write_settings
from grid.api.tls import generate_ca_and_server
from grid.fleet.wire import NODE_HEADER, NodeUpdate
from grid.node.agent.tunnel import Backoff, RelayTunnel
from tests.e2e.fleet_helpers import wait_for
from tests.router.fake_engine import FakeEngine
from tests.router.test_proxy_service import grant
from tests.service.harness import ControllerProcess, mint, node_client

pytestmark = pytest.mark.service

ENGINE_KEY = "engine-key-relay-0123456789abcdef0123456789"
MODEL = "relayed"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    process = ControllerProcess(Path(tmp_path_factory.mktemp("relay")) / "ctl")
    process.start()
    with process.admin() as admin:
        admin.put_model(MODEL, {"memory_mb": 200, "max_replicas": 2})
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def fake() -> Iterator[FakeEngine]:
    engine = FakeEngine(ENGINE_KEY, "tunnelled").start()
    try:
        yield engine
    finally:
        engine.stop()


def register(server: ControllerProcess, host_id: str, port: int, token: str) -> None:
    body: dict[str, Any] = {
        "role": "allocator",
        "host_id": host_id,
        "resources": {"capacity_mb": 16384},
        "allocator": {
            "schema_version": 1,
            "state": "accepting",
            "residencies": [{"model_id": MODEL, "memory_mb": 200, "state": "ready"}],
            # As a commanded node reports it: with the controller's grant (trust.py).
            "routes": [{"model_id": MODEL, "port": port, "grant": grant(server, host_id, MODEL)}],
            "relay": True,
        },
        "request_commands": False,
    }
    with node_client(server.url, token) as node:
        node.put_node(f"{host_id}.allocator", NodeUpdate.model_validate(body))


def tunnel_for(
    server: ControllerProcess, host_id: str, engine: FakeEngine, token: str
) -> RelayTunnel:
    base = f"http://127.0.0.1:{engine.port}"

    def resolve(model_id: str, port: int) -> str | None:
        return base if (model_id, port) == (MODEL, engine.port) else None

    return RelayTunnel(
        grid_url=server.url,
        host_id=host_id,
        token=token,
        resolve=resolve,
        engine_key=lambda: ENGINE_KEY,
        backoff=Backoff(first_s=0.1, max_s=0.5),
    )


def chat(server: ControllerProcess, **extra: Any) -> httpx.Response:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "secret prompt"}], **extra}
    return httpx.post(
        f"{server.url}/v1/chat/completions",
        json=body,
        headers={"Authorization": "Bearer client-secret-not-forwarded"},
        timeout=20,
        trust_env=False,
    )


def sticky_chat(server: ControllerProcess) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "a"}]},
        headers={"X-Grid-Affinity-Key": "conversation-17"},
        timeout=20,
        trust_env=False,
    )


def relay_rows(server: ControllerProcess) -> dict[str, dict[str, Any]]:
    with server.public() as client:
        return {r["host_id"]: r for r in client.status(history=0).model_dump(mode="json")["relay"]}


def listed(server: ControllerProcess) -> list[str]:
    data = httpx.get(f"{server.url}/v1/models", timeout=5, trust_env=False).json()
    return [m["id"] for m in data["data"]]


def test_requests_reach_the_engine_only_through_the_tunnel(
    server: ControllerProcess, fake: FakeEngine
) -> None:
    token = mint(server, "relay-a")
    register(server, "relay-a", fake.port, token)
    # Registered, but no tunnel yet: the route exists and is closed, nothing is dialled.
    refused = chat(server)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "relay_disconnected"
    assert fake.requests == []
    assert MODEL not in listed(server)

    tunnel = tunnel_for(server, "relay-a", fake, token)
    tunnel.start()
    try:
        wait_for(lambda: relay_rows(server).get("relay-a", {}).get("connected"), 10, "tunnel")
        reply = chat(server)
        assert reply.status_code == 200, reply.text
        assert reply.json()["served_by"] == "tunnelled"
        assert reply.headers["x-grid-served-by"] == "relay-a"
        [seen] = fake.requests
        # The node added the engine key; the client's own credential never left the router.
        assert seen["headers"]["Authorization"] == f"Bearer {ENGINE_KEY}"
        assert json.loads(seen["body"])["messages"][0]["content"] == "secret prompt"
        assert MODEL in listed(server)

        fake.mode = "sse"
        with httpx.stream(
            "POST", f"{server.url}/v1/chat/completions", timeout=20, trust_env=False,
            json={"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": True},
        ) as streamed:  # fmt: skip
            assert streamed.status_code == 200
            assert streamed.headers["content-type"].startswith("text/event-stream")
            text = b"".join(streamed.iter_raw()).decode()
        assert '"content": "O"' in text and text.rstrip().endswith("data: [DONE]")

        fake.mode = "500"  # an engine error keeps its status through the tunnel
        failed = chat(server)
        assert failed.status_code == 500
        assert failed.json()["error"]["code"] == "engine_error"
        assert relay_rows(server)["relay-a"]["requests"] == 3  # chat, stream, 500
    finally:
        tunnel.stop()
    # The tunnel is gone: the host's routes close at once, before any heartbeat says anything.
    wait_for(lambda: "relay-a" not in relay_rows(server), 5, "the tunnel to be forgotten")
    fake.mode = "ok"
    after = chat(server)
    assert after.status_code == 503 and after.json()["error"]["code"] == "relay_disconnected"
    assert MODEL not in listed(server)


def test_a_client_that_leaves_cancels_the_engine_request(
    server: ControllerProcess, fake: FakeEngine
) -> None:
    token = mint(server, "relay-c")
    register(server, "relay-c", fake.port, token)
    tunnel = tunnel_for(server, "relay-c", fake, token)
    tunnel.start()
    try:
        wait_for(lambda: relay_rows(server).get("relay-c", {}).get("connected"), 10, "tunnel")
        fake.mode, fake.delay_s = "slow_sse", 0.05  # 400 events: 20 s unless cancelled
        body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "stream": True}
        with httpx.Client(timeout=20, trust_env=False) as client, client.stream(
            "POST", f"{server.url}/v1/chat/completions", json=body
        ) as streamed:  # fmt: skip
            assert streamed.status_code == 200
            first = next(streamed.iter_raw())
            assert b"data:" in first
        # The client closed its connection: the router cancels the stream, the node closes its
        # engine connection, and the engine's next write fails.
        assert fake.aborted.wait(8.0), "the engine kept streaming to nobody"
        # The route was freed (no request counted in flight): the next request is served.
        fake.mode = "ok"
        assert chat(server).status_code == 200
        # Not streaming: a client that gives up also closes the node's engine connection.
        fake.aborted.clear()
        fake.mode, fake.delay_s = "slow_json", 20.0
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(
                f"{server.url}/v1/chat/completions",
                json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]},
                timeout=1.5,
                trust_env=False,
            )
        assert fake.aborted.wait(8.0), "the engine request outlived its client"
        fake.mode, fake.delay_s = "ok", 0.0
        assert chat(server).status_code == 200
    finally:
        tunnel.stop()


def test_a_dropped_tunnel_reconnects_with_backoff(
    server: ControllerProcess, fake: FakeEngine
) -> None:
    token = mint(server, "relay-d")
    register(server, "relay-d", fake.port, token)
    tunnel = tunnel_for(server, "relay-d", fake, token)
    tunnel.start()
    try:
        wait_for(lambda: tunnel.connected, 10, "the tunnel")
        assert chat(server).status_code == 200
        # The controller restarts: every tunnel drops with it, and the node dials again.
        server.stop()
        wait_for(lambda: not tunnel.connected, 10, "the tunnel to notice the drop")
        server.start()
        register(server, "relay-d", fake.port, token)
        with server.admin() as admin:
            admin.put_model(MODEL, {"memory_mb": 200, "max_replicas": 2})
        wait_for(lambda: relay_rows(server).get("relay-d", {}).get("connected"), 15, "reconnect")
        assert tunnel.connects >= 2
        reply = wait_for(lambda: (r := chat(server)).status_code == 200 and r, 15, "a chat")
        assert reply.headers["x-grid-served-by"] == "relay-d"
    finally:
        tunnel.stop()


def _handshake(server: ControllerProcess, host_id: str, token: str | None) -> InvalidStatus:
    headers = {NODE_HEADER: token} if token else {}
    url = server.url.replace("http://", "ws://") + f"/relay/{host_id}"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, additional_headers=headers, open_timeout=5, proxy=None).close()
    return refused.value


def test_a_tunnel_without_a_valid_credential_or_for_another_host_is_refused(
    server: ControllerProcess, fake: FakeEngine
) -> None:
    token = mint(server, "relay-e")
    register(server, "relay-e", fake.port, token)
    cases = {
        "no credential": (None, 401, "unauthorized"),
        "forged": (token[:-4] + "AAAA", 403, "invalid_node_credential"),
        "another host": (mint(server, "relay-other"), 403, "wrong_host"),
    }
    for label, (presented, status, code) in cases.items():
        refusal = _handshake(server, "relay-e", presented)
        assert refusal.response.status_code == status, label
        assert json.loads(refusal.response.body)["error"]["code"] == code, label
    # A tunnel the node credential of another host opened for itself routes nothing here.
    other = tunnel_for(server, "relay-other", fake, mint(server, "relay-other"))
    other.start()
    try:
        wait_for(lambda: other.connected, 10, "the other host's own tunnel")
        reply = chat(server)
        assert reply.status_code == 503 and reply.json()["error"]["code"] == "relay_disconnected"
        assert fake.requests == []
        assert "relay-e" not in relay_rows(server)
    finally:
        other.stop()


def test_a_node_that_presents_a_bad_credential_keeps_retrying_and_routes_nothing(
    server: ControllerProcess, fake: FakeEngine
) -> None:
    token = mint(server, "relay-f")
    register(server, "relay-f", fake.port, token)
    tunnel = tunnel_for(server, "relay-f", fake, mint(server, "relay-g"))  # another host's
    tunnel.start()
    try:
        wait_for(lambda: "wrong_host" in tunnel.last_error, 10, "the refusal")
        time.sleep(0.5)
        assert not tunnel.connected
        assert tunnel.backoff.attempt >= 2  # it retries, each time later
        assert chat(server).json()["error"]["code"] == "relay_disconnected"
        assert fake.requests == []
    finally:
        tunnel.stop()


def test_breaker_affinity_and_observations_work_through_the_tunnel(
    server: ControllerProcess,
) -> None:
    engines = [FakeEngine(ENGINE_KEY, f"engine-{i}").start() for i in range(2)]
    tunnels = []
    try:
        for index, engine in enumerate(engines):
            host = f"relay-h{index}"
            token = mint(server, host)
            register(server, host, engine.port, token)
            tunnels.append(tunnel_for(server, host, engine, token))
            tunnels[-1].start()
        wait_for(lambda: all(t.connected for t in tunnels), 10, "both tunnels")
        wait_for(lambda: {"relay-h0", "relay-h1"} <= set(relay_rows(server)), 10, "both at the hub")
        # Affinity: one key keeps landing on one engine (rendezvous over equal estimates).
        served = set()
        for _ in range(6):
            reply = sticky_chat(server)
            assert reply.status_code == 200
            served.add(reply.headers["x-grid-served-by"])
        assert len(served) == 1
        # The breaker: the sticky engine fails twice (failures_to_open 2) and its circuit opens;
        # the next request goes to the other host's tunnel.
        [sticky] = served
        failing = engines[int(sticky[-1])]
        failing.mode = "500"
        assert [sticky_chat(server).status_code for _ in range(2)] == [500, 500]
        after = chat(server)
        assert after.status_code == 200 and after.headers["x-grid-served-by"] != sticky

        # Observations: the relayed requests are demand for the model.
        def rpm() -> float:
            with server.public() as client:
                forecast = (
                    client.status(history=0).model_dump(mode="json")["forecasts"].get(MODEL, {})
                )
            return float(forecast.get("rpm", 0))

        wait_for(lambda: rpm() > 0, 10, "the relayed requests as demand", 0.1)
    finally:
        for tunnel in tunnels:
            tunnel.stop()
        for engine in engines:
            engine.stop()


def test_a_tunnel_to_a_tls_controller_verifies_it_and_never_goes_plain(tmp_path: Path) -> None:
    good = generate_ca_and_server(tmp_path / "pki", ["127.0.0.1"])
    other = generate_ca_and_server(tmp_path / "other", ["127.0.0.1"], common_name="Other CA")
    process = ControllerProcess(tmp_path / "ctl")
    process.settings = replace(
        process.settings,
        tls_cert=str(good.cert_file),
        tls_key=str(good.key_file),
        ca_file=str(good.ca_file),
    )
    write_settings(process.state_dir, process.settings)
    env_ca = os.environ.get("GRID_CA_FILE")
    os.environ["GRID_CA_FILE"] = str(good.ca_file)  # the harness's own clients verify it too
    process.start()
    try:
        assert process.url.startswith("https://")
        token = mint(process, "relay-tls")

        def tunnel(ca: Path) -> RelayTunnel:
            return RelayTunnel(
                grid_url=process.url,
                host_id="relay-tls",
                token=token,
                resolve=lambda _m, _p: None,
                engine_key=lambda: ENGINE_KEY,
                ca_file=str(ca),
                backoff=Backoff(first_s=0.1, max_s=0.5),
            )

        wrong = tunnel(other.ca_file)
        assert wrong.url.startswith("wss://")
        wrong.start()
        try:
            wait_for(lambda: "CERTIFICATE_VERIFY_FAILED" in wrong.last_error, 10, "a refusal")
            assert wrong.connects == 0 and not wrong.connected
        finally:
            wrong.stop()
        right = tunnel(good.ca_file)
        right.start()
        try:
            wait_for(lambda: right.connected, 10, "the verified tunnel")
        finally:
            right.stop()
    finally:
        process.stop()
        if env_ca is None:
            os.environ.pop("GRID_CA_FILE", None)
        else:
            os.environ["GRID_CA_FILE"] = env_ca
