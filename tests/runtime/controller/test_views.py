"""The views the controller publishes (grid/runtime/controller/views.py): a heartbeat, a
reachability verdict, a revoked credential, an external endpoint and a tick each replace them,
and a reader holding an old view keeps the facts it was published with.

The expected routes are written out by hand from the reports sent; nothing here reads the
registry to compute what the view should say."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from grid.fleet.errors import GridError
from grid.fleet.externals import ExternalEndpoint, ExternalHealth
from grid.fleet.models import HostState, ResidencyState
from grid.runtime.controller.core import Controller
from grid.runtime.controller.store import MemoryStore
from grid.runtime.controller.wire import NodeUpdate
from tests.runtime.controller.harness import FAST, T0, profile

pytestmark = pytest.mark.unit

KEY = "engine-key-" + "v" * 32


def _report(port: int, state: str = "ready", *, relay: bool = False) -> NodeUpdate:
    allocator: dict[str, Any] = {
        "state": "accepting",
        "residencies": [{"model_id": "m", "memory_mb": 100, "state": state}],
        "routes": [{"model_id": "m", "port": port, "concurrency": 2}],
    }
    if relay:
        allocator["relay"] = True
    else:
        allocator["engine_key"] = KEY
    return NodeUpdate.model_validate(
        {"host_id": "h", "resources": {"capacity_mb": 8192}, "allocator": allocator}
    )


def _controller() -> Controller:
    ctl = Controller(MemoryStore(), now=T0, config=FAST)
    ctl.put_profile("m", profile(memory_mb=100, pinned_hosts=["h"]), T0)  # vouches for h's route
    return ctl


def _only(ctl_or_routes: Any) -> Any:
    routes = ctl_or_routes.routes("m")
    assert len(routes) == 1
    return routes[0]


def test_a_heartbeat_publishes_its_route_and_an_old_view_keeps_its_own() -> None:
    ctl = _controller()
    assert ctl.routing.routes() == []
    ctl.node_update("h.allocator", "h", _report(39100), T0)
    first = ctl.routing
    route = _only(first)
    assert (route.host_id, route.port, route.lease_at) == ("h", 39100, T0)
    assert route.residency_state is ResidencyState.READY and route.transport == "http"
    assert route.concurrency == 2 and first.engine_key("h") == KEY
    assert KEY not in repr(first)

    ctl.node_update("h.allocator", "h", _report(39101, "loading"), T0 + 5)
    second = ctl.routing
    assert second.version > first.version
    moved = _only(second)
    assert (moved.port, moved.lease_at, moved.residency_state) == (
        39101,
        T0 + 5,
        ResidencyState.LOADING,
    )
    # The reader that took the first view still sees exactly what it was published with.
    assert (_only(first).port, _only(first).lease_at) == (39100, T0)
    assert _only(first).residency_state is ResidencyState.READY
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.version = 99  # type: ignore[misc]
    with pytest.raises(TypeError):
        first.hosts["h"] = first.hosts["h"]  # type: ignore[index]


def test_a_verdict_or_a_revoked_credential_republishes_the_host() -> None:
    ctl = _controller()
    ctl.node_update("h.allocator", "h", _report(39100), T0)
    before = ctl.routing
    ctl.set_unreachable("h", ["127.0.0.1:39100 refused the connection"])
    assert _only(ctl.routing).host_state is HostState.UNHEALTHY
    assert _only(before).host_state is HostState.ACCEPTING
    assert ctl.forget_routes("h")
    assert ctl.routing.routes() == [] and ctl.routing.engine_key("h") is None
    assert before.engine_key("h") == KEY


def test_a_relay_route_is_connected_by_its_reader_not_in_the_view() -> None:
    ctl = _controller()
    ctl.node_update("h.allocator", "h", _report(39100, relay=True), T0)
    table = ctl.routing
    assert table.engine_key("h") is None  # a relay host sends no key
    assert _only(table).transport == "relay" and not _only(table).relay_connected
    connected = table.routes("m", connected=lambda host: host == "h")
    assert [r.relay_connected for r in connected] == [True]
    assert not _only(table).relay_connected  # the view itself is unchanged


def test_an_external_endpoint_is_routed_once_healthy_and_its_name_is_guarded() -> None:
    ctl = _controller()
    endpoint = ExternalEndpoint(
        name="vendor", url="https://api.example.test:8443/openai", models=["m", "n"]
    )
    ctl.put_external(endpoint, T0)
    assert ctl.routing.routes() == []  # not probed yet: nothing is routed
    healthy = ExternalHealth(healthy=True, code="ok", reason="ok", probed_at=T0, served=["m"])
    assert ctl.record_external_health("vendor", healthy)
    route = _only(ctl.routing)
    assert (route.host_id, route.port, route.transport, route.prefix) == (
        "vendor",
        8443,
        "https",
        "/openai",
    )
    assert route.external and route.lease_at == T0
    assert ctl.external_rows()[0].serving == ["m"]
    ctl.node_update("h.allocator", "h", _report(39100), T0)
    with pytest.raises(GridError) as refused:
        ctl.put_external(endpoint.model_copy(update={"name": "h"}), T0)
    assert refused.value.code == "external_name_taken"
    ctl.remove_external("vendor", T0 + 1)
    assert [r.host_id for r in ctl.routing.routes()] == ["h"]


def test_a_tick_publishes_the_plan_view() -> None:
    ctl = _controller()
    assert ctl.plan_view.generation == "" and ctl.plan_view.portfolio is None
    ctl.node_update("h.allocator", "h", _report(39100), T0)
    report = ctl.tick(T0 + 1)
    assert report.ok
    assert ctl.plan_view.generation == report.generation != ""
    assert ctl.plan_view.unmet_replicas == 0  # m is pinned to h and resident there


def test_readers_without_the_lock_never_see_a_torn_view() -> None:
    # Heartbeat i reports port 39100 + i at T0 + i: any view a reader takes pairs them.
    ctl = _controller()
    ctl.node_update("h.allocator", "h", _report(39100), T0)
    seen: list[tuple[int, float]] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            table = ctl.routing
            for route in table.routes("m"):
                seen.append((route.port - 39100, route.lease_at - T0))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(1, 200):
            ctl.node_update("h.allocator", "h", _report(39100 + i), T0 + i)
    finally:
        stop.set()
        reader.join()
    assert seen and all(port == lease for port, lease in seen)
    assert _only(ctl.routing).port == 39100 + 199
