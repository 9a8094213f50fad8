"""The OpenAI proxy on a real controller process, with fake engines on loopback."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from grid.fleet.wire import NodeUpdate
from grid.runtime.controller import Attestor
from tests.router.fake_engine import FakeEngine
from tests.service.harness import ControllerProcess, mint, node_client

pytestmark = pytest.mark.service

ENGINE_KEY = "engine-key-0123456789abcdef0123456789abcdef"
CLIENT_SECRET = "client-secret-never-forwarded"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    process = ControllerProcess(Path(tmp_path_factory.mktemp("proxy")) / "ctl")
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def engines() -> Iterator[list[FakeEngine]]:
    started: list[FakeEngine] = []
    yield started
    for engine in started:
        engine.stop()


def engine(engines: list[FakeEngine], name: str) -> FakeEngine:
    fake = FakeEngine(ENGINE_KEY, name).start()
    engines.append(fake)
    return fake


def grant(server: ControllerProcess, host_id: str, model_id: str) -> str:
    """The route grant the controller gives a host with its WARM of `model_id`."""
    return Attestor.derived(server.settings.credentials.node_signing_key).grant(host_id, model_id)


def register(
    server: ControllerProcess,
    host_id: str,
    routes: dict[str, FakeEngine],
    *,
    state: str = "accepting",
    residency_state: str = "ready",
) -> None:
    body: dict[str, Any] = {
        "role": "allocator",
        "host_id": host_id,
        "resources": {"capacity_mb": 16384},
        "allocator": {
            "schema_version": 1,
            "state": state,
            "residencies": [
                {"model_id": m, "memory_mb": 200, "state": residency_state, "managed": True}
                for m in sorted(routes)
            ],
            # As a commanded node reports them: each with the controller's grant (trust.py).
            "routes": [
                {"model_id": m, "port": e.port, "grant": grant(server, host_id, m)}
                for m, e in sorted(routes.items())
            ],
            "engine_key": ENGINE_KEY,
        },
        "request_commands": False,
    }
    with node_client(server.url, mint(server, host_id)) as node:
        node.put_node(f"node-{host_id}", NodeUpdate.model_validate(body))


def configure(server: ControllerProcess, model_id: str) -> None:
    with server.admin() as admin:
        admin.put_model(model_id, {"memory_mb": 200, "max_replicas": 2})


def chat(server: ControllerProcess, model: str, **extra: Any) -> httpx.Response:
    headers = extra.pop("headers", {})
    body = {"model": model, "messages": [{"role": "user", "content": "Reply with OK"}], **extra}
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, headers=headers, timeout=10)


def test_chat_reaches_the_engine_with_its_key_and_none_of_the_clients_headers(
    server: ControllerProcess, engines: list[FakeEngine]
) -> None:
    configure(server, "alpha")
    fake = engine(engines, "alpha-engine")
    register(server, "host-alpha", {"alpha": fake})
    models = httpx.get(f"{server.url}/v1/models", timeout=5).json()
    assert "alpha" in [m["id"] for m in models["data"]]

    reply = chat(
        server,
        "alpha",
        headers={"Authorization": f"Bearer {CLIENT_SECRET}", "X-Grid-Affinity-Key": "sess-1"},
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] == "OK"
    seen = fake.requests[-1]
    assert seen["path"] == "/v1/chat/completions"
    assert seen["headers"]["Authorization"] == f"Bearer {ENGINE_KEY}"
    sent_headers = json.dumps(seen["headers"]).lower()
    assert CLIENT_SECRET not in sent_headers and "sess-1" not in sent_headers
    assert "x-grid-affinity-key" not in sent_headers
    assert json.loads(seen["body"])["model"] == "alpha"  # the body is forwarded unchanged

    # The request is demand for the model, and no key shows anywhere a client can read.
    deadline = time.monotonic() + 10
    while True:
        with server.admin() as admin:
            status = admin.status().model_dump(mode="json")
        if status["counters"]["observations_accepted"] >= 1 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert status["forecasts"]["alpha"]["rpm"] > 0
    for text in (reply.text, json.dumps(status), json.dumps(models)):
        assert ENGINE_KEY not in text
    assert ENGINE_KEY not in server.log_path.read_text()

    # A header value the upstream hop cannot carry (non-ASCII) is replaced, not a server error.
    odd = chat(server, "alpha", headers={"Accept": "text/plain; q=\xe9".encode("latin-1")})
    assert odd.status_code == 200, odd.text
    assert fake.requests[-1]["headers"]["Accept"] == "application/json"


def test_streams_pass_through_and_count_as_demand(
    server: ControllerProcess, engines: list[FakeEngine]
) -> None:
    configure(server, "beta")
    fake = engine(engines, "beta-engine")
    fake.mode = "sse"
    register(server, "host-beta", {"beta": fake})
    with (
        httpx.Client(timeout=10) as client,
        client.stream(
            "POST",
            f"{server.url}/v1/chat/completions",
            json={"model": "beta", "stream": True, "messages": []},
        ) as reply,
    ):
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in reply.iter_lines() if line.startswith("data:")]
    assert lines[-1] == "data: [DONE]"
    deltas = [json.loads(line[5:])["choices"] for line in lines[:-1]]
    assert "".join(c[0]["delta"]["content"] for c in deltas if c) == "OK"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with server.admin() as admin:
            forecast = admin.status().model_dump(mode="json")["forecasts"].get("beta", {})
        if forecast.get("rpm", 0) > 0:
            break
        time.sleep(0.1)
    assert forecast["rpm"] > 0


def test_refusals_are_openai_errors_with_a_code(
    server: ControllerProcess, engines: list[FakeEngine]
) -> None:
    unknown = chat(server, "never-configured")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "model_not_found"
    configure(server, "gamma")
    idle = chat(server, "gamma")  # configured, nothing serves it yet
    assert idle.status_code == 503
    assert idle.json()["error"]["code"] == "model_unavailable"
    assert idle.json()["error"]["message"]
    bad = httpx.post(f"{server.url}/v1/chat/completions", content=b"{not json", timeout=5)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"
    long_key = chat(server, "gamma", headers={"X-Grid-Affinity-Key": "k" * 300})
    assert long_key.status_code == 400
    assert long_key.json()["error"]["code"] == "invalid_affinity_key"
    # A draining host's child keeps its identity but takes no new request.
    fake = engine(engines, "gamma-engine")
    register(server, "host-gamma", {"gamma": fake}, state="draining")
    models = [m["id"] for m in httpx.get(f"{server.url}/v1/models", timeout=5).json()["data"]]
    assert "gamma" not in models
    assert chat(server, "gamma").status_code == 503
    assert fake.requests == []
    register(server, "host-gamma-2", {"gamma": fake}, residency_state="warming")
    assert chat(server, "gamma").status_code == 503 and fake.requests == []


def test_circuit_breaker_redirects_later_requests_and_never_replays(
    server: ControllerProcess, engines: list[FakeEngine]
) -> None:
    configure(server, "delta")
    first, second = engine(engines, "first"), engine(engines, "second")
    # The first engine is preferred: the freshest lease among equals, then measurably faster.
    second.delay_s = 0.3
    register(server, "b-delta", {"delta": second})
    register(server, "a-delta", {"delta": first})
    assert chat(server, "delta").json()["served_by"] == "first"

    first.mode = "500"
    for _ in range(2):
        opened_before = time.monotonic()  # the circuit opens, for one second, after this
        failed = chat(server, "delta")
        assert failed.status_code == 500  # the engine's answer, passed through, not retried
    opened_by = time.monotonic()  # ... and before this
    assert len(second.requests) == 0
    # Sent together, so that the slow second engine answers all three well inside the open
    # second (one after the other they would take most of it).
    with ThreadPoolExecutor(max_workers=3) as pool:
        redirected = list(pool.map(lambda _: chat(server, "delta"), range(3)))
    took = time.monotonic() - opened_before
    served = [r.json().get("served_by") for r in redirected]
    assert served == ["second"] * 3, f"{served}, {took:.2f} s after the circuit opened"
    assert len(first.requests) == 3  # one success, two failures; nothing while open

    first.mode = "ok"
    time.sleep(max(0.0, opened_by + 1.1 - time.monotonic()))  # one half-open probe may go
    assert chat(server, "delta").json()["served_by"] == "first"
    assert chat(server, "delta").json()["served_by"] == "first"  # the probe closed it

    first.mode = "429"
    assert chat(server, "delta").status_code == 429
    cooling_by = time.monotonic()  # the one-second cooldown began before this
    assert chat(server, "delta").json()["served_by"] == "second"  # cooling down for 1 s
    time.sleep(max(0.0, cooling_by + 1.1 - time.monotonic()))
    first.mode = "400"
    for _ in range(3):
        assert chat(server, "delta").status_code == 400  # caller errors do not poison it
    first.mode = "ok"
    assert chat(server, "delta").json()["served_by"] == "first"

    first.mode = "drop"
    dropped = chat(server, "delta")
    assert dropped.status_code == 502
    assert dropped.json()["error"]["code"] == "upstream_unreachable"
    assert "Traceback" not in dropped.text


def test_unroutable_requests_are_demand_without_an_error_rate(server: ControllerProcess) -> None:
    # Issue 8 defect 6: a 503 "no ready route" is an arrival, never an engine error.
    configure(server, "epsilon")
    for _ in range(4):
        reply = chat(server, "epsilon")
        assert reply.status_code == 503
        assert reply.json()["error"]["code"] == "model_unavailable"
    deadline = time.monotonic() + 10
    while True:
        with server.admin() as admin:
            forecast = admin.status().model_dump(mode="json")["forecasts"].get("epsilon", {})
        if forecast.get("rpm", 0) > 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert forecast["rpm"] > 0  # the refused requests still count as demand
    assert forecast["error_rate"] == 0.0  # but no engine failed
