"""Safety invariants of planner + reconciler on the simulator, over generated scenarios.

Every tick the simulator checks: declared memory never overcommitted; constructive work only on
eligible hosts; a required model's ready replicas never taken below its floor by a drain that is
not an explicit preemption; nothing unloaded before it drained or with requests in flight (or
unknown activity); external, manual and pinned residencies never actuated; governors respected;
retries idempotent (no reused id, no duplicate open action, no retry before its backoff). After
the disturbances end, the fleet converges to the plan and stays there.

1,000 scenarios in total (500 + 300 + 200), derandomized, with the heuristic engine on small
fleets. Two convergence gaps are accepted, both replicas the reconciler keeps on purpose: a
managed baseline replica that the plan would leave to an external replica alone
(`managed_baseline_floor`: the spec forbids that hand-over), and the last serving replica of a
model the plan still wants but cannot place anywhere (`last_replica_floor`: a healthy last
replica is never taken away by cleanup).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.fleet.models import FleetSnapshot
from grid.lab.simulator import FleetSimulator, SimConfig, TickReport
from tests.lab.sim_scenarios import Scenario, apply_event, calm_down, fleets, scenarios

pytestmark = pytest.mark.property

DISTURBED_TICKS = 10
QUIET_TICKS = 60
SETTINGS = {
    "derandomize": True,
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}


def _held(report: TickReport) -> set[tuple[str, str]]:
    return {
        (d.model_id, d.host_id)
        for d in report.result.deferred
        if d.code in {"managed_baseline_floor", "last_replica_floor"}
    }


def settle(sim: FleetSimulator) -> TickReport:
    """Run quiet ticks until two in a row have no action and no gap; fail if it never does."""
    calm = 0
    report = sim.step()
    for _ in range(QUIET_TICKS):
        gaps = sim.convergence_gaps(report.plan, held=_held(report))
        calm = calm + 1 if not report.result.actions and not gaps else 0
        if calm >= 2:
            return report
        report = sim.step()
    gaps = sim.convergence_gaps(report.plan, held=_held(report))
    raise AssertionError(f"no convergence: {gaps}\n{sim.story()}")


def assert_clean(sim: FleetSimulator) -> None:
    assert not sim.violations, f"{sim.violations[:5]}\n{sim.story()}"


def assert_stable(sim: FleetSimulator, report: TickReport) -> None:
    """Once converged, nothing changes: the same plan, no action, no withdrawal."""
    again = sim.step()
    assert again.result.actions == [] and again.result.withdrawn == []
    assert {(a.model_id, a.host_id) for a in again.plan.assignments} == {
        (a.model_id, a.host_id) for a in report.plan.assignments
    }


def run_scenario(sc: Scenario, config: SimConfig | None = None) -> FleetSimulator:
    sim = FleetSimulator(sc.snapshot(), config=config)
    for tick in range(DISTURBED_TICKS):
        for event in sc.events:
            if event.tick == tick:
                apply_event(sim, event)
        sim.step()
    return sim


@settings(max_examples=500, **SETTINGS)  # type: ignore[arg-type]
@given(scenarios())
def test_invariants_hold_under_disturbances_and_the_fleet_converges(sc: Scenario) -> None:
    sim = run_scenario(sc)
    assert_clean(sim)
    calm_down(sim)
    report = settle(sim)
    assert_clean(sim)
    assert_stable(sim, report)


@settings(max_examples=300, **SETTINGS)  # type: ignore[arg-type]
@given(fleets())
def test_any_starting_fleet_converges_to_its_plan_when_nothing_changes(
    doc: dict[str, Any],
) -> None:
    sim = FleetSimulator(FleetSnapshot.model_validate(doc))
    report = settle(sim)
    assert_clean(sim)
    assert_stable(sim, report)
    wanted = {(a.model_id, a.host_id) for a in report.plan.assignments}
    for model_id, host_id in wanted:
        res = sim.hosts[host_id].residencies.get(model_id)
        assert res is not None and res.state.value == "ready"


@settings(max_examples=200, **SETTINGS)  # type: ignore[arg-type]
@given(fleets(), st.integers(0, 2**16), st.sampled_from([0.2, 0.4]))
def test_retries_stay_idempotent_under_random_failures(
    doc: dict[str, Any], seed: int, rate: float
) -> None:
    config = SimConfig(failure_rate=rate, seed=seed)
    sim = FleetSimulator(FleetSnapshot.model_validate(doc), config=config)
    sim.run(12)
    assert_clean(sim)
    ids = [r.action_id for r in sim.history()]
    assert len(ids) == len(set(ids))
    by_key: dict[tuple[str, str, str], list[int]] = {}
    for record in sorted(sim.history(), key=lambda r: r.created_at):
        key = (record.kind.value, record.host_id, record.model_id)
        by_key.setdefault(key, []).append(record.attempt)
    for attempts in by_key.values():
        assert attempts == sorted(set(attempts)), attempts  # every retry is a new attempt
    sim.config.failure_rate = 0.0
    settle(sim)
    assert_clean(sim)
