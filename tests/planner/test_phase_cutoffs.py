"""Bounded work after the solve: staging and explanations respect the deadline (issue 20).

Staging (preemption.stage_within) stops once its `out_of_time` test says so and counts the
models it left unexamined; explanations (explain.py) are summarised from the first few open
hosts once the deadline leaves only the later phases' floor, or once shortened entries have
scanned the cap; the plan document counts both. Clocks are hand-set or counting callables:
nothing here is timed.

Oracles: the fleets are hand-worked (every VIP model needs exactly one eviction on its own full
host; `big` fits no host), the staging cut short is checked against the whole staging run
(a prefix of its evictions) and every plan against the validator.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.fleet.models import FleetSnapshot
from grid.planner.deadline import CALIBRATION, SHORTENED_NOTE, SUMMARISED_NOTE, Deadline
from grid.planner.explain import explain_unsatisfied
from grid.planner.heuristic import heuristic_placement
from grid.planner.plan import make_plan
from grid.planner.preemption import stage_changes, stage_within
from grid.planner.problem_build import build_problem
from grid.planner.validate import violations
from tests.planner.fleets import NOW, host, model, resident, snapshot, want
from tests.planner.test_heuristic import plan_of
from tests.support.fake_clock import FakeStepClock

pytestmark = pytest.mark.unit

OLD = NOW - 10_000  # loaded long ago: past every minimum residency


def _crowded(n: int) -> FleetSnapshot:
    """n hosts of 10,000 MB, each held by its own idle 8,000 MB batch incumbent; n VIP models
    of 6,000 MB that each need one replica: every VIP needs one eviction. The batches are not
    desired (no authority of their own once evicted), so only VIPs are ever short."""
    hosts = [
        host(
            f"h{i}",
            10_000,
            residencies=[resident(f"batch{i}", 8000, loaded_at=OLD, active_requests=0)],
        )
        for i in range(n)
    ]
    models: list[dict[str, Any]] = [model(f"batch{i}", 8000, priority=0) for i in range(n)]
    models += [model(f"vip{i}", 6000, priority=100, min_replicas=1) for i in range(n)]
    return snapshot(hosts, models)


class _After:
    """out_of_time that answers no `calls` times, then yes."""

    def __init__(self, calls: int) -> None:
        self.left = calls

    def __call__(self) -> bool:
        self.left -= 1
        return self.left < 0


def test_staging_out_of_time_at_once_stages_nothing_and_counts_every_short_model() -> None:
    snap = _crowded(3)
    problem = build_problem(snap)
    placed = heuristic_placement(problem)
    preemptions, final, unexamined = stage_within(problem, placed, lambda: True)
    assert preemptions == [] and final == placed
    assert unexamined == 3  # vip0, vip1, vip2: none examined
    full, _ = stage_changes(problem, placed)
    assert len(full) == 3  # the whole staging evicts one batch per VIP


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 4), calls=st.integers(0, 40))
def test_staging_cut_short_is_a_prefix_of_the_whole_staging_and_valid(n: int, calls: int) -> None:
    snap = _crowded(n)
    problem = build_problem(snap)
    placed = heuristic_placement(problem)
    full, full_final = stage_changes(problem, placed)
    preemptions, final, unexamined = stage_within(problem, placed, _After(calls))
    assert preemptions == full[: len(preemptions)]
    staged = {p.beneficiary_model_id for p in preemptions}
    if len(preemptions) < len(full):
        assert unexamined == n - len(staged)  # every VIP not staged was not examined
    else:
        assert unexamined == 0 and final == full_final
    assert violations(snap, plan_of(problem, final, preemptions)) == []


def test_a_plan_past_its_deadline_stops_staging_and_says_so() -> None:
    snap = _crowded(2)
    # limit 3 s, 1 s per clock reading: staging starts with no time left
    plan = make_plan(
        snap, engine="heuristic", time_limit_s=3.0, deadline=Deadline(3.0, clock=FakeStepClock(1))
    )
    assert plan.preemptions == []
    assert "preemption staging stopped at the time limit of 3 s" in plan.solver.message
    assert "2 model(s) short of replicas were not examined" in plan.solver.message
    assert violations(snap, plan) == []
    relaxed = make_plan(snap, engine="heuristic", time_limit_s=60.0)
    assert len(relaxed.preemptions) == 2
    assert "preemption staging stopped" not in relaxed.solver.message


def _wide(hosts: int) -> FleetSnapshot:
    """`big` (9,000 MB) fits none of `hosts` 8,192 MB hosts; `small` takes one of them."""
    return snapshot(
        [host(f"h{i:02d}", 8192) for i in range(hosts)],
        [model("small", 2000), model("big", 9000)],
        {"small": want(1), "big": want(1)},
    )


def test_explanations_past_the_floor_are_summarised_from_the_first_open_hosts() -> None:
    hosts = CALIBRATION.explain_summary_hosts + 8
    snap = _wide(hosts)
    late = make_plan(
        snap, engine="heuristic", time_limit_s=3.0, deadline=Deadline(3.0, clock=FakeStepClock(1))
    )
    (entry,) = [u for u in late.unsatisfied if u.model_id == "big"]
    assert SUMMARISED_NOTE in entry.message
    assert f"{CALIBRATION.explain_summary_hosts} of {hosts} eligible hosts examined" in (
        entry.message
    )
    assert entry.missing_replicas == 1 and entry.binding  # still explained, from the ledger
    first = {f"h{i:02d}" for i in range(CALIBRATION.explain_summary_hosts + 1)}
    assert {b.host_id for b in entry.binding} <= first  # one host may hold `small`
    assert "1 explanation(s) summarised from a sample of hosts" in late.solver.message
    assert violations(snap, late) == []
    full = make_plan(snap, engine="heuristic", time_limit_s=60.0)
    assert SUMMARISED_NOTE not in " ".join(u.message for u in full.unsatisfied)


def test_an_explanation_whose_sample_is_every_open_host_is_only_shortened() -> None:
    snap = _wide(CALIBRATION.explain_summary_hosts)
    late = make_plan(
        snap, engine="heuristic", time_limit_s=3.0, deadline=Deadline(3.0, clock=FakeStepClock(1))
    )
    (entry,) = [u for u in late.unsatisfied if u.model_id == "big"]
    assert SHORTENED_NOTE in entry.message and SUMMARISED_NOTE not in entry.message


def test_shortened_explanations_past_the_scan_cap_are_summarised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before the floor, but out of time for full explanations: the scan cap decides."""
    snap = _wide(CALIBRATION.explain_summary_hosts + 8)
    problem = build_problem(snap)
    placed = heuristic_placement(problem)
    now = [0.0]
    deadline = Deadline(10.0, clock=lambda: now[0])
    now[0] = 9.99  # 0.01 s left: short of the full explanations' margin, above the floor 0
    entries = explain_unsatisfied(problem, placed, [], deadline, floor_s=0.0)
    (entry,) = [u for u in entries if u.model_id == "big"]
    assert SHORTENED_NOTE in entry.message  # under the cap: the whole ledger scan
    capped = dataclasses.replace(CALIBRATION, explain_scan_max=0)
    monkeypatch.setattr("grid.planner.explain.CALIBRATION", capped)
    entries = explain_unsatisfied(problem, placed, [], deadline, floor_s=0.0)
    (entry,) = [u for u in entries if u.model_id == "big"]
    assert SUMMARISED_NOTE in entry.message
    without_deadline = explain_unsatisfied(problem, placed, [])
    assert all(SUMMARISED_NOTE not in u.message for u in without_deadline)
