"""The additive node wire contract: the node reports its READY children's loopback routes and
the engine key; the controller keeps the key in memory only."""

from __future__ import annotations

import json

import pytest

from grid.fleet.models import ResidencyState
from grid.fleet.wire import WireRoute, wire_json
from grid.node.agent.report import child_routes, envelope
from grid.node.agent.state import ResidencyRecord
from grid.node.engines.base import EngineState, EngineStatus
from grid.runtime.controller import Attestor, RouteJudge
from grid.runtime.controller.registry import Registry
from grid.runtime.controller.wire import NodeUpdate

pytestmark = pytest.mark.unit

KEY = "k" * 40


def _record(model_id: str, state: ResidencyState) -> ResidencyRecord:
    return ResidencyRecord(model_id=model_id, state=state, memory_mb=100)


def test_only_ready_residencies_with_a_proven_ready_child_are_routes() -> None:
    records = {
        "ready": _record("ready", ResidencyState.READY),
        "draining": _record("draining", ResidencyState.DRAINING),
        "unproven": _record("unproven", ResidencyState.READY),
        "starting": _record("starting", ResidencyState.READY),
    }
    statuses = {
        "ready": EngineStatus("ready", EngineState.READY, pid=1, port=39101, proven=True),
        "draining": EngineStatus("draining", EngineState.READY, pid=2, port=39102, proven=True),
        "unproven": EngineStatus("unproven", EngineState.READY, pid=3, port=39103),
        "starting": EngineStatus("starting", EngineState.STARTING, pid=4, port=39104, proven=True),
    }
    assert [wire_json(r) for r in child_routes(records, statuses)] == [
        {"model_id": "ready", "port": 39101}
    ]


def test_the_envelope_carries_the_key_only_beside_routes() -> None:
    common = {"lifecycle": "accepting", "throttle_fraction": 1.0, "cached_models": [], "rows": []}
    bare = envelope(**common, disk_free=None, routes=[], engine_key=KEY)  # type: ignore[arg-type]
    without = wire_json(bare)
    assert "engine_key" not in without and "routes" not in without
    routes = [WireRoute(model_id="m", port=39100)]
    block = wire_json(envelope(**common, disk_free=None, routes=routes, engine_key=KEY))  # type: ignore[arg-type]
    assert block["routes"] == [{"model_id": "m", "port": 39100}] and block["engine_key"] == KEY


def _update(with_key: bool) -> NodeUpdate:
    allocator: dict[str, object] = {
        "residencies": [{"model_id": "m", "memory_mb": 100, "state": "ready"}],
        "routes": [{"model_id": "m", "port": 39100}],
    }
    if with_key:
        allocator["engine_key"] = KEY
    return NodeUpdate.model_validate(
        {"host_id": "h", "resources": {"capacity_mb": 4096}, "allocator": allocator}
    )


def test_the_registry_keeps_the_key_apart_from_everything_it_shows() -> None:
    registry = Registry()
    judge = RouteJudge(Attestor.ephemeral(), {}, frozenset({"m"}))  # an operator's pin
    update = _update(with_key=True)
    assert KEY not in repr(update)
    registry.apply("node-h", "h", update, now=100.0, judge=judge)
    entry = registry.hosts["h"]
    assert entry.engine_key == KEY
    assert [(r.model_id, r.port) for r in entry.routes] == [("m", 39100)]
    assert entry.allocator is not None and entry.allocator.engine_key is None
    assert KEY not in repr(entry)
    assert KEY not in json.dumps(entry.allocator.model_dump(mode="json"))
    assert KEY not in json.dumps([h.model_dump(mode="json") for h in registry.snapshot_hosts()])
    # A heartbeat without the envelope keeps what was known; a new envelope replaces it.
    registry.apply("node-h", "h", NodeUpdate.model_validate({}), now=101.0)
    assert registry.hosts["h"].engine_key == KEY
    registry.apply("node-h", "h", _update(with_key=False), now=102.0, judge=judge)
    assert registry.hosts["h"].engine_key is None
