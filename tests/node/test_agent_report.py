"""What the node reports: crash and adoption detection, residency rows, external memory."""

from __future__ import annotations

import json

import pytest

from grid.fleet.models import ResidencyState
from grid.fleet.wire import wire_json
from grid.node.agent.report import (
    MemoryReading,
    engine_observations,
    external_mb,
    residency_rows,
)
from grid.node.agent.state import ResidencyRecord
from grid.node.engines.base import EngineState, EngineStatus
from tests.node.agent_helpers import node_config

pytestmark = pytest.mark.unit


def _record(state: ResidencyState, **extra: object) -> ResidencyRecord:
    return ResidencyRecord(model_id="m1", state=state, memory_mb=300, **extra)  # type: ignore[arg-type]


def _status(state: EngineState, *, proven: bool = True, pid: int | None = 77) -> EngineStatus:
    return EngineStatus("m1", state, pid=pid, port=39100, proven=proven)


@pytest.mark.parametrize("state", [ResidencyState.READY, ResidencyState.DRAINING])
def test_a_vanished_or_unprovable_engine_becomes_failed(state: ResidencyState) -> None:
    records = {"m1": _record(state)}
    gone = engine_observations(records, {}, busy_model=None)
    assert [(c.model_id, c.state) for c in gone] == [("m1", ResidencyState.FAILED)]
    crashed = {"m1": _status(EngineState.FAILED, proven=True, pid=None)}
    assert engine_observations(records, crashed, None)[0].state is ResidencyState.FAILED
    unproven = {"m1": _status(EngineState.FAILED, proven=False)}
    assert engine_observations(records, unproven, None)[0].state is ResidencyState.FAILED


def test_the_model_the_worker_acts_on_is_left_to_the_worker() -> None:
    assert engine_observations({"m1": _record(ResidencyState.WARMING)}, {}, busy_model="m1") == []


def test_healthy_and_cached_residencies_do_not_change() -> None:
    records = {"m1": _record(ResidencyState.READY)}
    assert engine_observations(records, {"m1": _status(EngineState.READY)}, None) == []
    assert engine_observations({"m1": _record(ResidencyState.CACHED)}, {}, None) == []


def test_an_adopted_engine_returns_to_ready() -> None:
    warming = {"m1": _record(ResidencyState.WARMING)}
    assert engine_observations(warming, {"m1": _status(EngineState.READY)}, None)[0].state is (
        ResidencyState.READY
    )
    fenced = {"m1": _record(ResidencyState.FAILED, loaded_at=5.0)}
    assert engine_observations(fenced, {"m1": _status(EngineState.READY)}, None)[0].state is (
        ResidencyState.READY
    )
    never_ready = {"m1": _record(ResidencyState.FAILED)}
    assert engine_observations(never_ready, {"m1": _status(EngineState.READY)}, None) == []


def test_rows_carry_ages_not_clocks_and_cached_rows_claim_no_memory() -> None:
    records = {
        "m1": _record(ResidencyState.READY, loaded_at=100.0, artifact_sha256="ab" * 32),
        "m2": ResidencyRecord(model_id="m2", state=ResidencyState.CACHED, memory_mb=500),
    }
    rows = residency_rows(records, {"m1": None}, {"m1": 1785.0}, now=130.0)
    assert wire_json(rows[0]) == {  # exactly what travels: no unset field appears
        "model_id": "m1",
        "memory_mb": 300,
        "state": "ready",
        "managed": True,
        "runtime": "llama.cpp",
        "active_requests": None,  # unknown activity is reported as unknown
        "artifact_sha256": "ab" * 32,
        "loaded_age_s": 30.0,
        "last_used_at": 1785.0,
    }
    assert rows[1].memory_mb == 0 and "loaded_age_s" not in wire_json(rows[1])
    assert "key" not in json.dumps([wire_json(r) for r in rows])


def test_external_memory_excludes_own_children_and_is_capped(tmp_path: object) -> None:
    config = node_config(tmp_path, capacity_mb=4000, external_memory="measured")  # type: ignore[arg-type]
    reading = MemoryReading(total_mb=16000, available_mb=10000, children_rss_mb=1500)
    assert external_mb(config, reading) == 4000  # 6000 used less 1500 own, capped at capacity
    roomy = MemoryReading(total_mb=16000, available_mb=14000, children_rss_mb=1500)
    assert external_mb(config, roomy) == 500
    logical = config.model_copy(update={"external_memory": "none"})
    assert external_mb(logical, reading) == 0
