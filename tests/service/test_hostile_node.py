"""Issue 22 on a real controller process (fake engines and fake nodes over real HTTP): what one
node credential can no longer do. Each test is the regression test of one finding.

- term poisoning through an enrollment credential (finding 1);
- route hijack: 30 user requests, none to the hijacker's engine (finding 2);
- reachability probes never on the request path, however many black-holed ports (finding 3);
- probe results for operators only (finding 4);
- a heartbeat flood is refused past the host's budget, named, and costs the others nothing;
- node credentials listed and revoked, effective at the next heartbeat (finding 7);
- 405 outside /v1 names the allowed methods (finding 7).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from grid.fleet.errors import GridError
from grid.fleet.wire import NodeUpdate
from grid.wire import AllocatorClient
from tests.chaos.rogue import BlackHoles
from tests.router.fake_engine import FakeEngine
from tests.router.test_proxy_service import ENGINE_KEY, chat, configure, grant
from tests.service.harness import REPLY_KEYS, ControllerProcess, mint, node_client

pytestmark = pytest.mark.service


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    process = ControllerProcess(Path(tmp_path_factory.mktemp("hostile")) / "ctl")
    process.start()
    try:
        yield process
    finally:
        process.stop()


def body(host_id: str, model: str | None, port: int | None, **allocator: Any) -> dict[str, Any]:
    routes = [] if model is None or port is None else [{"model_id": model, "port": port}]
    return {
        "role": "allocator",
        "host_id": host_id,
        "resources": {"capacity_mb": 16384},
        "allocator": {
            "schema_version": 1,
            "state": "accepting",
            "residencies": [{"model_id": model, "memory_mb": 200, "state": "ready"}]
            if model
            else [],
            "routes": routes,
            "engine_key": ENGINE_KEY,
            **allocator,
        },
        "request_commands": False,
    }


def put(server: ControllerProcess, token: str, doc: dict[str, Any], **client: Any) -> None:
    with node_client(server.url, token, **client) as node:
        node.put_node(f"{doc['host_id']}.allocator", NodeUpdate.model_validate(doc))


def status(server: ControllerProcess, *, operator: bool = True) -> dict[str, Any]:
    with server.admin() if operator else server.public() as client:
        return client.status(history=0).model_dump(mode="json")


def row(doc: dict[str, Any], host_id: str) -> dict[str, Any]:
    return next(h for h in doc["hosts"] if h["host_id"] == host_id)


def enrolled(server: ControllerProcess, host_id: str) -> str:
    """A credential got the way a new laptop gets one: a one-time enrollment token."""
    with server.admin() as admin:
        issued = admin.create_enrollment(host_id)
    with AllocatorClient(server.url) as anyone:
        minted = anyone.enroll(issued.token)
    REPLY_KEYS[minted.token] = minted.reply_key
    token: str = minted.token
    return token


def test_an_enrolled_laptop_cannot_poison_the_controller_term(server: ControllerProcess) -> None:
    with server.admin() as admin:
        admin.put_model("tau", {"memory_mb": 200, "max_replicas": 1})
        admin.set_mode("automatic")
        term = admin.status(history=0).model_dump(mode="json")["lease"]["term"]
    token = enrolled(server, "laptop-t")
    poisoned = body("laptop-t", None, None, highest_term=10**15, controller_id="x")
    for proof in (None, "A" * 43):
        doc = dict(poisoned)
        doc["allocator"] = {**poisoned["allocator"], "term_proof": proof}
        put(server, token, doc)
    time.sleep(0.5)  # a lease renewal pass
    doc = status(server)
    assert doc["lease"]["term"] == term and doc["lease"]["max_term"] < 10**15
    warnings = {w["code"]: w["message"] for w in doc["warnings"]}
    assert "fleet_term_ahead" not in warnings
    assert "host laptop-t" in warnings["suspicious_node"]
    assert "term_unproven" in {s["code"] for s in row(doc, "laptop-t")["suspicions"]}
    with server.admin() as admin:
        admin.set_mode("recommend")


def test_a_hijacked_route_serves_no_request(server: ControllerProcess) -> None:
    honest = FakeEngine(ENGINE_KEY, "honest").start()
    fake = FakeEngine(ENGINE_KEY, "hijacker").start()
    try:
        configure(server, "gamma")
        real = body("host-g", "gamma", honest.port)
        real["allocator"]["routes"][0]["grant"] = grant(server, "host-g", "gamma")  # commanded
        put(server, mint(server, "host-g"), real)
        put(server, enrolled(server, "laptop-g"), body("laptop-g", "gamma", fake.port))
        replies = [chat(server, "gamma") for _ in range(30)]
        assert [r.status_code for r in replies] == [200] * 30
        assert len(honest.requests) == 30 and fake.requests == []
        doc = status(server)
        assert row(doc, "laptop-g")["refused_routes"] == {"gamma": "route_not_commanded"}
        assert [r["state"] for r in row(doc, "laptop-g")["residencies"]] == ["warming"]
        listed = httpx.get(f"{server.url}/v1/models", timeout=5).json()["data"]
        assert [m["id"] for m in listed if m["id"] == "gamma"] == ["gamma"]  # the honest one
    finally:
        honest.stop()
        fake.stop()


def test_black_holed_ports_never_hold_a_heartbeat_or_the_health_check(
    server: ControllerProcess,
) -> None:
    """Finding 3: probes ran inside PUT /nodes, 1 s per black-holed port, so 45 heartbeats with
    64 ports held /healthz, status and /v1/models for 64 s. Here the host even holds grants
    for all 64 routes (the worst case: every route accepted and due for a probe)."""
    holes = BlackHoles(64)
    token = mint(server, "host-bh")
    models = [f"bh{i}" for i in range(64)]
    doc = body("host-bh", None, None, advertise_address="127.0.0.1")
    doc["allocator"]["residencies"] = [
        {"model_id": m, "memory_mb": 1, "state": "ready"} for m in models
    ]
    doc["allocator"]["routes"] = [
        {"model_id": m, "port": p, "grant": grant(server, "host-bh", m)}
        for m, p in zip(models, holes.ports, strict=True)
    ]
    try:
        with ThreadPoolExecutor(4) as pool:
            beats = [pool.submit(put, server, token, doc, timeout_s=5.0) for _ in range(12)]
            health = []
            for _ in range(20):
                started = time.monotonic()
                assert httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200
                health.append(time.monotonic() - started)
                time.sleep(0.05)
            for beat in beats:
                beat.result()  # none timed out (a probe per port would take 64 s)
        assert max(health) < 5.0
    finally:
        holes.close()


def test_which_port_failed_is_for_operators_only(server: ControllerProcess) -> None:
    holes = BlackHoles(1)
    try:
        token = mint(server, "host-p")
        doc = body("host-p", "pi", holes.ports[0], advertise_address="127.0.0.1")
        doc["allocator"]["routes"][0]["grant"] = grant(server, "host-p", "pi")
        deadline = time.monotonic() + 15
        put(server, token, doc)  # the first report queues the probe; a later one shows it
        while time.monotonic() < deadline and row(status(server), "host-p")["state"] != "unhealthy":
            time.sleep(0.5)
            put(server, token, doc)
        operator, public = (
            row(status(server), "host-p"),
            row(status(server, operator=False), "host-p"),
        )
        assert operator["state"] == "unhealthy"
        assert any(f"127.0.0.1:{holes.ports[0]}" in r for r in operator["reachability"])
        assert "reachability" not in public
        assert str(holes.ports[0]) not in str(public)
        assert any(p.startswith("address_unreachable") for p in public["problems"])
    finally:
        holes.close()


def test_a_heartbeat_flood_is_refused_past_the_budget_and_named(server: ControllerProcess) -> None:
    token = enrolled(server, "laptop-f")
    update = body("laptop-f", None, None)
    with httpx.Client(base_url=server.url, timeout=30, trust_env=False) as http:
        headers = {"X-Grid-Allocator-Node-Token": token}

        def one(_index: int) -> int:
            return http.put("/nodes/laptop-f.allocator", json=update, headers=headers).status_code

        with ThreadPoolExecutor(16) as pool:  # far above 10 a second, whatever the load
            answers = list(pool.map(one, range(200)))
        limited = [a for a in answers if a == 429]
        assert limited and set(answers) == {200, 429}
        refused = http.put("/nodes/laptop-f.allocator", json=update, headers=headers)
    if refused.status_code == 429:
        assert refused.headers["Retry-After"] == "1"
        assert refused.json()["error"]["code"] == "heartbeat_rate_limited"
    # Another host is not slowed or refused by the flood's budget.
    other = mint(server, "host-o")
    put(server, other, body("host-o", None, None))
    doc = status(server)
    assert "heartbeat_flood" in {s["code"] for s in row(doc, "laptop-f")["suspicions"]}
    assert row(doc, "host-o")["suspicions"] == []


def test_node_credentials_are_listed_and_revoked_at_the_next_heartbeat(
    server: ControllerProcess,
) -> None:
    engine = FakeEngine(ENGINE_KEY, "revoked").start()
    try:
        configure(server, "rho")
        token = mint(server, "host-r")
        doc = body("host-r", "rho", engine.port)
        doc["allocator"]["routes"][0]["grant"] = grant(server, "host-r", "rho")
        put(server, token, doc)
        assert chat(server, "rho").status_code == 200
        with server.admin() as admin:
            rows = admin.node_credentials("host-r")
            assert [(r.host_id, r.state, r.source) for r in rows] == [
                ("host-r", "valid", "token_write")
            ]
            listed = rows[0].model_dump(mode="json")
            assert "token" not in listed and "reply_key" not in listed
            result = admin.revoke_node_credentials(credential_id=rows[0].credential_id)
            assert result.model_dump(mode="json") == {
                "revoked": [rows[0].credential_id],
                "hosts": ["host-r"],
                "tunnels_closed": [],
            }
            assert admin.node_credentials("host-r")[0].state == "revoked"
        with pytest.raises(GridError) as refused:
            put(server, token, doc)
        assert refused.value.code == "revoked_node_credential"
        assert refused.value.details["http_status"] == 403
        assert chat(server, "rho").status_code >= 400  # its routes went at once
        assert len(engine.requests) == 1
        # A fresh credential for the host works again.
        put(server, mint(server, "host-r"), doc)
        assert chat(server, "rho").status_code == 200
    finally:
        engine.stop()


def test_405_outside_v1_names_the_allowed_methods(server: ControllerProcess) -> None:
    reply = httpx.delete(f"{server.url}/allocator/status", timeout=5)
    assert reply.status_code == 405
    assert reply.headers["Allow"] == "GET"
    assert reply.json()["error"]["code"] == "method_not_allowed"
