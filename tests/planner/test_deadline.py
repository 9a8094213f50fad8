"""`grid plan --time-limit` is a promise about the whole command (issue 8, #7).

One Deadline, started by the caller before the snapshot load, budgets every phase. A fake step
clock (tests/support) makes "each phase takes a second" exact, so nothing here is timed.
"""

from __future__ import annotations

import pytest

from grid.fleet.models import FleetSnapshot
from grid.planner.deadline import SHORTENED_NOTE, Deadline, post_solve_reserve_s
from grid.planner.plan import make_plan
from grid.planner.validate import violations
from tests.planner.fleets import host, model, snapshot, want
from tests.support.fake_clock import FakeStepClock

pytestmark = pytest.mark.unit


def _short_fleet() -> FleetSnapshot:
    """`big` cannot fit anywhere: the plan must explain one missing replica."""
    return snapshot(
        [host("h1", 8192), host("h2", 8192)],
        [model("small", 2000, max_replicas=2), model("big", 9000)],
        {"small": want(2), "big": want(1)},
    )


def test_a_deadline_spent_before_the_solve_returns_the_heuristic_plan_and_says_why() -> None:
    snap = _short_fleet()
    # limit 3 s; the clock moves 1 s per reading: the load, build and heuristic leave no time
    deadline = Deadline(3.0, clock=FakeStepClock(1.0))
    plan = make_plan(snap, engine="cpsat", time_limit_s=3.0, deadline=deadline)
    assert plan.solver.status == "HEURISTIC_FALLBACK"
    assert "left no time for CP-SAT" in plan.solver.message
    assert violations(snap, plan) == []
    # no solver phase ran (vacate and solve took the fallback path at once); the phases after
    # it (staging, explanations, validation) are clocked too
    assert set(deadline.spent) == {
        "build",
        "heuristic",
        "vacate",
        "solve",
        "stage",
        "explain",
        "validate",
    }


def test_explanations_shorten_out_of_time_and_the_plan_says_so() -> None:
    snap = _short_fleet()
    full = make_plan(snap, engine="heuristic", time_limit_s=60)
    late = make_plan(
        snap,
        engine="heuristic",
        time_limit_s=3.0,
        deadline=Deadline(3.0, clock=FakeStepClock(1.0)),
    )
    (entry,) = [u for u in late.unsatisfied if u.model_id == "big"]
    assert SHORTENED_NOTE in entry.message
    assert entry.missing_replicas == 1 and entry.binding  # still explained, from the ledger
    assert "explanation(s) shortened" in late.solver.message
    assert SHORTENED_NOTE not in " ".join(u.message for u in full.unsatisfied)
    assert violations(snap, late) == []


def test_the_solver_gets_what_the_later_phases_leave() -> None:
    snap = _short_fleet()
    # A generous limit on the fake clock: CP-SAT runs and the plan is complete and unshortened.
    plan = make_plan(
        snap,
        engine="cpsat",
        time_limit_s=1000.0,
        deterministic=True,
        deadline=Deadline(1000.0, clock=FakeStepClock(0.001)),
    )
    assert plan.solver.engine == "cp-sat"
    assert SHORTENED_NOTE not in " ".join(u.message for u in plan.unsatisfied)


def test_the_reserve_grows_with_the_problem_and_a_slow_build() -> None:
    # hand-worked from the documented coefficients (issue 12 part 2): 0.12 s + 0.5 us per
    # candidate (at most 300,000 of them) + 60 us per host (at most 20,000), or 0.45x build,
    # plus the explanations' CP-SAT cores (0.02 s + 0.1 ms per candidate, at most 0.3 s and at
    # most 5 % of the limit), plus the CLI's validation and output: 0.05 s + 30 us per host
    assert post_solve_reserve_s(0) == pytest.approx(0.12 + 0.02 + 0.05)
    assert post_solve_reserve_s(1_000) == pytest.approx(0.12 + 0.0005 + 0.12 + 0.05)
    assert post_solve_reserve_s(166_000) == pytest.approx(0.12 + 0.083 + 0.3 + 0.05)
    assert post_solve_reserve_s(166_000, build_s=3.0) == pytest.approx(1.35 + 0.3 + 0.05)
    # the per-candidate term stops at 300,000 candidates (fleets of host shapes)
    assert post_solve_reserve_s(3_650_000) == pytest.approx(0.12 + 0.15 + 0.3 + 0.05)
    assert post_solve_reserve_s(3_650_000, build_s=4.0) == pytest.approx(1.8 + 0.3 + 0.05)
    # 60 us per host (at most 20,000 of them) on top of the per-candidate term; the output
    # term counts every host
    assert post_solve_reserve_s(2_000, hosts=1_000) == pytest.approx(
        0.12 + 0.001 + 0.06 + 0.22 + 0.05 + 0.03
    )
    assert post_solve_reserve_s(2_000, hosts=10_000) == pytest.approx(
        0.12 + 0.001 + 0.6 + 0.22 + 0.05 + 0.3
    )
    assert post_solve_reserve_s(2_000, hosts=30_000) == pytest.approx(
        0.12 + 0.001 + 1.2 + 0.22 + 0.05 + 0.9
    )


def test_the_output_reserve_sends_a_plan_without_it_to_the_fallback() -> None:
    snap = _short_fleet()  # 2 hosts, 2 distinct candidates
    # A clock that never moves: every phase takes 0 s, so what is left at the solve is the
    # whole limit. Reserve by hand at 0.2 s: 0.12 + 2 x 0.5 us + 2 x 60 us + the cores'
    # min(0.02 + 2 x 0.1 ms, 5 % of 0.2 s = 0.01) = 0.130121 s, plus the CLI's validation and
    # output 0.05 + 2 x 30 us = 0.05006 s: 0.180181 s in all. 0.2 s leaves 0.0198 s after it,
    # under the 0.05 s a solve needs (it would leave 0.0699 s without the output term); 0.27 s
    # (cores 0.0135) leaves 0.27 - 0.183681 = 0.0863 s, enough.
    late = make_plan(snap, time_limit_s=0.2, deadline=Deadline(0.2, clock=FakeStepClock(0.0)))
    assert late.solver.status == "HEURISTIC_FALLBACK"
    assert "the time limit of 0.2 s left no time for CP-SAT" in late.solver.message
    assert violations(snap, late) == []
    enough = make_plan(snap, time_limit_s=0.27, deadline=Deadline(0.27, clock=FakeStepClock(0.0)))
    assert enough.solver.engine == "cp-sat"


def test_a_deadline_started_earlier_counts_the_time_before_it() -> None:
    clock = FakeStepClock(0.0, start=100.0)  # now is 100.0 and stays there
    deadline = Deadline(10.0, clock=clock, started=100.0 - 2.5)  # the process began 2.5 s ago
    assert deadline.elapsed() == pytest.approx(2.5)
    assert deadline.remaining() == pytest.approx(7.5)


def test_a_deadline_counts_from_its_start() -> None:
    clock = FakeStepClock(0.5)
    deadline = Deadline(2.0, clock=clock)  # started at 0.0
    assert deadline.remaining() == pytest.approx(1.5)  # read at 0.5
    assert not deadline.expired()  # read at 1.0: 1.0 left
    assert deadline.expired(margin_s=0.6)  # read at 1.5: 0.5 left
    assert deadline.expired()  # read at 2.0: nothing left


def test_no_time_for_a_search_still_proves_levels_by_their_bounds() -> None:
    # A clock that never moves. Hand-worked for 2 hosts and 2 distinct candidates at 0.23 s:
    # the reserve is 0.12 + 2 x 60 us + 2 x 0.5 us + the cores' min(0.0202, 5 % of 0.23 =
    # 0.0115) + the output 0.05 + 2 x 30 us = 0.181681 s, which leaves 0.0483 s, under the
    # 0.05 s a search needs: the fallback path. Its floor (no cores, no per-candidate term) is
    # 0.17018 s, which leaves 0.0598 s: enough for the proofs by bounds alone.
    snap = snapshot(
        [host("h1", 8192), host("h2", 8192)],
        [model("small", 2000, max_replicas=2)],
        {"small": want(2)},
    )
    plan = make_plan(snap, time_limit_s=0.23, deadline=Deadline(0.23, clock=FakeStepClock(0.0)))
    assert plan.solver.engine == "cp-sat"
    assert "levels proven by bounds only" in plan.solver.message
    level = next(o for o in plan.solver.objective if o.level.endswith(":direct:2"))
    assert level.value == level.bound == 1
    assert violations(snap, plan) == []
    # 0.22 s leaves the floor 0.0498 s: the fallback as before
    late = make_plan(snap, time_limit_s=0.22, deadline=Deadline(0.22, clock=FakeStepClock(0.0)))
    assert late.solver.status == "HEURISTIC_FALLBACK"
