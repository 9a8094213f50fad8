"""Addressing on a real controller process (DESIGN "Addressing", docs/addressing.md): the router
dials the address a node advertises, never a guessed 127.0.0.1; status shows the address; a node
advertising an address where its engine does not answer is unhealthy with the reason and never
dialled. Engines are fake HTTP engines on 127.0.0.x (a second one on 127.0.0.1 at the same port
catches a router that still dials loopback). Issue 22: the probe runs in the background (the
host turns unhealthy at its next report), and which port failed is shown to operators only."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from grid.fleet.wire import NodeUpdate
from tests.router.fake_engine import FakeEngine
from tests.router.test_proxy_service import grant
from tests.service.harness import ControllerProcess, mint, node_client

pytestmark = pytest.mark.service

ENGINE_KEY = "engine-key-addressing-0123456789abcdef0123"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    process = ControllerProcess(Path(tmp_path_factory.mktemp("addressing")) / "ctl")
    process.start()
    try:
        yield process
    finally:
        process.stop()


def register(server: ControllerProcess, host_id: str, model: str, port: int, address: str) -> None:
    body: dict[str, Any] = {
        "role": "allocator",
        "host_id": host_id,
        "resources": {"capacity_mb": 16384},
        "allocator": {
            "schema_version": 1,
            "state": "accepting",
            "residencies": [{"model_id": model, "memory_mb": 200, "state": "ready"}],
            "routes": [{"model_id": model, "port": port, "grant": grant(server, host_id, model)}],
            "engine_key": ENGINE_KEY,
            "advertise_address": address,
        },
        "request_commands": False,
    }
    with node_client(server.url, mint(server, host_id)) as node:
        node.put_node(f"{host_id}.allocator", NodeUpdate.model_validate(body))
    with server.admin() as admin:
        admin.put_model(model, {"memory_mb": 200, "max_replicas": 2})


def chat(server: ControllerProcess, model: str) -> httpx.Response:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    return httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=10)


def host_doc(server: ControllerProcess, host_id: str, *, public: bool = False) -> dict[str, Any]:
    with server.public() if public else server.admin() as client:
        hosts = client.status().model_dump(mode="json")["hosts"]
    return next(h for h in hosts if h["host_id"] == host_id)


def report_until(server: ControllerProcess, host_id: str, state: str, *args: Any) -> None:
    """Report (as the node's heartbeats do) until the background probe's verdict shows."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        register(server, host_id, *args)
        if host_doc(server, host_id)["state"] == state:
            return
        time.sleep(0.2)
    raise AssertionError(f"{host_id} never became {state}: {host_doc(server, host_id)}")


def test_router_dials_the_advertised_address(server: ControllerProcess) -> None:
    advertised = FakeEngine(ENGINE_KEY, "advertised", host="127.0.0.2").start()
    decoy = FakeEngine(ENGINE_KEY, "decoy", host="127.0.0.1", port=advertised.port).start()
    try:
        register(server, "host-b", "beta", advertised.port, "127.0.0.2")
        doc = host_doc(server, "host-b")
        assert doc["address"] == "127.0.0.2"
        assert doc["state"] == "accepting", doc["problems"]
        reply = chat(server, "beta")
        assert reply.status_code == 200, reply.text
        assert len(advertised.requests) == 1
        assert advertised.requests[0]["headers"]["Authorization"] == f"Bearer {ENGINE_KEY}"
        assert decoy.requests == []  # the old loopback guess would have landed here
    finally:
        advertised.stop()
        decoy.stop()


def test_unreachable_advertised_address_is_unhealthy_and_never_dialled(
    server: ControllerProcess,
) -> None:
    # Something listens on 127.0.0.1 at the port, nothing on the advertised 127.0.0.9.
    decoy = FakeEngine(ENGINE_KEY, "decoy").start()
    try:
        report_until(server, "host-u", "unhealthy", "upsilon", decoy.port, "127.0.0.9")
        doc = host_doc(server, "host-u")
        assert doc["address"] == "127.0.0.9"
        [problem] = doc["reachability"]  # the operator's view names the port
        assert f"127.0.0.9:{decoy.port}" in problem and "--advertise-address" in problem
        public = host_doc(server, "host-u", public=True)  # everyone else's does not
        assert "reachability" not in public and str(decoy.port) not in str(public["problems"])
        assert any(p.startswith("address_unreachable") for p in public["problems"])
        reply = chat(server, "upsilon")
        assert reply.status_code >= 400
        assert decoy.requests == []
        models = httpx.get(f"{server.url}/v1/models", timeout=5).json()
        assert "upsilon" not in [m["id"] for m in models["data"]]
        # The engine comes up at the advertised address: the next report probes clean.
        engine = FakeEngine(ENGINE_KEY, "late", host="127.0.0.9", port=decoy.port).start()
        try:
            time.sleep(3.2)  # the failure is cached for 3 s
            report_until(server, "host-u", "accepting", "upsilon", decoy.port, "127.0.0.9")
            assert chat(server, "upsilon").status_code == 200
            assert len(engine.requests) == 1 and decoy.requests == []
        finally:
            engine.stop()
    finally:
        decoy.stop()
