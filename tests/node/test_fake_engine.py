"""The fake supervisor follows the real one's safety rules, so callers' tests stay honest."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid.fleet.errors import GridError
from grid.node.engines import Activity, ActivityState, EngineState
from tests.support.fake_engine import FakeEngineSupervisor

pytestmark = pytest.mark.unit

GGUF = Path("/models/m.gguf")


def test_warm_then_idle_stop_signals_once() -> None:
    fake = FakeEngineSupervisor()
    status = fake.warm("m", GGUF)
    assert status.state is EngineState.READY and status.proven
    result = fake.stop("m")
    assert result.stopped and result.pid == status.pid
    assert fake.calls == [("warm", "m"), ("stop", "m"), ("signal", "m", "SIGTERM")]
    assert fake.status("m") is None
    assert not fake.stop("m").stopped  # idempotent: nothing left to stop


def test_crash_is_reported_failed_and_a_new_warm_recovers() -> None:
    fake = FakeEngineSupervisor()
    first = fake.warm("m", GGUF)
    fake.crash("m")
    crashed = fake.poll()["m"]
    assert crashed.state is EngineState.FAILED and crashed.pid is None
    again = fake.warm("m", GGUF)
    assert again.state is EngineState.READY and again.pid != first.pid


@pytest.mark.parametrize(
    ("activity", "code"),
    [
        (Activity(ActivityState.BUSY, processing=1, slots=1), "engine_busy"),
        (Activity(ActivityState.UNKNOWN, reason="no answer"), "engine_activity_unknown"),
    ],
)
def test_stop_refuses_busy_or_unknown_unless_forced(activity: Activity, code: str) -> None:
    fake = FakeEngineSupervisor()
    fake.warm("m", GGUF)
    fake.set_activity("m", activity)
    with pytest.raises(GridError) as failure:
        fake.stop("m")
    assert failure.value.code == code
    assert fake.status("m") is not None
    assert fake.stop("m", force=True).forced


def test_unproven_engine_is_neither_stopped_nor_started_twice() -> None:
    fake = FakeEngineSupervisor()
    fake.set_unproven("m")
    for attempt in (lambda: fake.warm("m", GGUF), lambda: fake.stop("m", force=True)):
        with pytest.raises(GridError) as failure:
            attempt()
        assert failure.value.code == "engine_unproven_process"
    assert not [c for c in fake.calls if c[0] == "signal"]
    assert fake.poll()["m"].state is EngineState.FAILED


def test_not_ready_warm_fails_and_leaves_nothing_running() -> None:
    fake = FakeEngineSupervisor()
    fake.set_ready("m", False)
    with pytest.raises(GridError) as failure:
        fake.warm("m", GGUF)
    assert failure.value.code == "engine_not_ready"
    assert fake.poll()["m"].state is EngineState.FAILED
    fake.set_ready("m", True)
    assert fake.warm("m", GGUF).state is EngineState.READY
