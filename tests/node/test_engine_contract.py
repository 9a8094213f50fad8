"""One contract, two engine supervisors: the fake the agent's unit tests use, and the real
llama.cpp one (real llama-server children, the real SmolLM2-135M weights).

If the fake drifts from the real supervisor, the agent's unit tests stop meaning anything; this
suite runs the same scenarios against both: start and readiness, health (slot activity), stop,
crash detection and recovery, and adoption by a restarted supervisor. The real one is marked
`engine` and is skipped, with the reason, where llama-server or the weights are absent.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from grid.node.engines import ActivityState, EngineState, EngineStatus, EngineSupervisor
from grid.node.engines.proc import is_alive
from tests.node.processes import wait_until
from tests.support.fake_engine import FakeEngineSupervisor

MODEL = "smollm2-135m"


@dataclass
class EngineRig:
    """A supervisor under test and how the outside world acts on it."""

    name: str
    first: EngineSupervisor
    restart: Callable[[], EngineSupervisor]  # a new supervisor over the same machine and state
    kill: Callable[[EngineSupervisor, EngineStatus], None]  # the child dies (SIGKILL)
    weights: Path
    real: bool


def _fake_rig(tmp_path: Path) -> EngineRig:
    fake = FakeEngineSupervisor()
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"GGUF" + bytes(60))

    def kill(supervisor: EngineSupervisor, status: EngineStatus) -> None:
        assert isinstance(supervisor, FakeEngineSupervisor)
        supervisor.crash(status.model_id)

    return EngineRig("fake", fake, fake.restarted, kill, weights, real=False)


def _real_rig(request: pytest.FixtureRequest, tmp_path: Path) -> EngineRig:
    weights: Path = request.getfixturevalue("smollm2")  # skips with the reason when absent
    make = request.getfixturevalue("make_supervisor")  # skips when llama-server is absent
    state_dir = tmp_path / "engines"

    def kill(_supervisor: EngineSupervisor, status: EngineStatus) -> None:
        assert status.pid is not None
        os.kill(status.pid, signal.SIGKILL)

    return EngineRig("llama.cpp", make(state_dir), lambda: make(state_dir), kill, weights, True)


@pytest.fixture(
    params=[
        pytest.param("fake", marks=pytest.mark.unit),
        pytest.param("llama.cpp", marks=pytest.mark.engine),
    ]
)
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> EngineRig:
    if request.param == "fake":
        return _fake_rig(tmp_path)
    return _real_rig(request, tmp_path)


def _ready(status: EngineStatus | None) -> bool:
    return status is not None and status.state is EngineState.READY and status.proven


def test_warm_starts_one_proven_ready_child_on_its_own_port(rig: EngineRig) -> None:
    supervisor = rig.first
    status = supervisor.warm(MODEL, rig.weights)
    assert _ready(status)
    assert status.model_id == MODEL
    assert status.pid is not None and status.port is not None and 1 <= status.port <= 65535
    assert supervisor.status(MODEL) == status
    assert supervisor.poll()[MODEL] == status
    assert supervisor.engine_key  # the private key the router uses on the loopback hop
    # Warming again joins the running child instead of starting a second one.
    again = supervisor.warm(MODEL, rig.weights)
    assert (again.pid, again.port) == (status.pid, status.port)
    assert supervisor.stop(MODEL).stopped


def test_a_ready_idle_child_reports_its_slots(rig: EngineRig) -> None:
    supervisor = rig.first
    supervisor.warm(MODEL, rig.weights)
    health = supervisor.activity(MODEL)
    assert health.state is ActivityState.IDLE
    assert health.slots >= 1 and health.processing == 0
    assert supervisor.stop(MODEL).stopped


def test_an_unknown_model_has_no_status_and_unknown_activity(rig: EngineRig) -> None:
    supervisor = rig.first
    assert supervisor.status("absent") is None
    assert "absent" not in supervisor.poll()
    assert supervisor.activity("absent").state is ActivityState.UNKNOWN
    result = supervisor.stop("absent")
    assert not result.stopped and result.pid is None


def test_stop_ends_the_child_and_forgets_it(rig: EngineRig) -> None:
    supervisor = rig.first
    status = supervisor.warm(MODEL, rig.weights)
    result = supervisor.stop(MODEL)
    assert result.stopped and result.pid == status.pid
    assert not result.killed and not result.forced  # an idle child honours the polite signal
    assert supervisor.status(MODEL) is None
    assert MODEL not in supervisor.poll()
    assert not supervisor.stop(MODEL).stopped  # idempotent: nothing is left to stop
    pid = status.pid
    if rig.real:
        assert pid is not None and wait_until(lambda: not is_alive(pid), timeout_s=10)


def test_a_killed_child_is_detected_failed_and_a_new_warm_recovers(rig: EngineRig) -> None:
    supervisor = rig.first
    first = supervisor.warm(MODEL, rig.weights)
    rig.kill(supervisor, first)
    assert wait_until(lambda: supervisor.poll()[MODEL].state is EngineState.FAILED, timeout_s=10)
    failed = supervisor.status(MODEL)
    assert failed is not None and failed.pid is None
    assert "signal 9" in failed.reason
    second = supervisor.warm(MODEL, rig.weights)
    assert _ready(second)
    assert second.pid not in (None, first.pid)
    assert supervisor.stop(MODEL).stopped


def test_a_restarted_supervisor_adopts_the_live_child_and_can_stop_it(rig: EngineRig) -> None:
    status = rig.first.warm(MODEL, rig.weights)
    rig.first.close()  # the agent goes away; its child keeps running

    adopted = rig.restart()
    seen = adopted.status(MODEL)
    assert _ready(seen)
    assert seen is not None and (seen.pid, seen.port) == (status.pid, status.port)
    assert adopted.engine_key == rig.first.engine_key  # the durable key is reused
    assert adopted.warm(MODEL, rig.weights).pid == status.pid  # joins, never duplicates
    result = adopted.stop(MODEL)
    assert result.stopped and result.pid == status.pid
    assert adopted.status(MODEL) is None
