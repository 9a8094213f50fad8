"""The machine's pace (deadline.Deadline.pace) stretches the fixed estimates of the phases after
a flexible one, and the exit's freeing of the problem is in the output estimate.

Oracles: hand-worked clock readings and hand sums of the calibration table's figures."""

from __future__ import annotations

import time

import pytest

from grid.planner.deadline import CALIBRATION as C
from grid.planner.deadline import Deadline, output_reserve_s, stage_s
from grid.planner.pipeline import Run
from grid.planner.plan import make_plan
from grid.planner.problem_build import build_problem
from tests.planner.fleets import host, model, snapshot, want

pytestmark = pytest.mark.unit


class Clocks:
    def __init__(self) -> None:
        self.wall = 100.0
        self.cpu = 5.0


def _deadline(clocks: Clocks, limit_s: float = 10.0) -> Deadline:
    return Deadline(limit_s, clock=lambda: clocks.wall, cpu_clock=lambda: clocks.cpu)


@pytest.mark.parametrize(
    ("wall", "cpu", "pace"),
    [
        (3.0, 1.0, 3.0),  # a third of a core: estimates stretch three times
        (1.0, 1.0, 1.0),
        (1.0, 1.6, 1.0),  # worker threads: more CPU than wall never shrinks an estimate
        (10.0, 1.0, 4.0),  # capped at pace_max
        (0.1, 0.01, 1.0),  # too early to read
        (2.0, 0.0, 1.0),
    ],
)
def test_pace_is_wall_over_cpu_since_the_start(wall: float, cpu: float, pace: float) -> None:
    clocks = Clocks()
    deadline = _deadline(clocks)
    clocks.wall += wall
    clocks.cpu += cpu
    assert deadline.pace() == pytest.approx(pace)


def test_a_deadline_from_the_process_start_counts_cpu_from_zero() -> None:
    clocks = Clocks()
    deadline = Deadline(
        10.0, clock=lambda: clocks.wall, started=96.0, cpu_started=0.0, cpu_clock=lambda: clocks.cpu
    )
    assert deadline.pace() == 1.0  # 4 s of wall for 5 s of CPU
    clocks.wall += 6.0  # 10 s of wall for 5 s of CPU since the process started
    assert deadline.pace() == pytest.approx(2.0)


def _fleet():  # type: ignore[no-untyped-def]
    return snapshot(
        [host("h1", 16384), host("h2", 16384), host("h3", 8192)],
        [model("a", 6000, max_replicas=2), model("b", 9000)],
        {"a": want(2), "b": want(1)},
    )


def test_the_output_and_staging_estimates_stretch_with_the_pace() -> None:
    snap = _fleet()
    problem = build_problem(snap)
    clocks = Clocks()
    run = Run(snap, "cpsat", _deadline(clocks))
    run.problem = problem
    cands, hosts = len(problem.candidates), len(problem.hosts)
    base = C.output_base_s + C.output_per_host_s * hosts + C.exit_per_candidate_s * cands
    fixed = C.reserve_base_s + C.reserve_per_host_s * hosts
    assert run.output_s == pytest.approx(base)
    assert run.floor_s() == pytest.approx(fixed + base)  # no build measured: the fixed figures
    run.pace = 2.5
    assert run.output_s == pytest.approx(2.5 * base)
    assert run.floor_s() == pytest.approx(2.5 * fixed + 2.5 * base)
    assert stage_s(0, 10.0, hosts, 2.5) == pytest.approx(C.reserve_build_share * 10.0)
    assert output_reserve_s(hosts) == pytest.approx(C.output_base_s + C.output_per_host_s * hosts)


def test_a_slow_machine_keeps_more_of_the_limit_from_the_solve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same plan with the process's CPU clock running at a quarter of the wall clock: the
    heuristic phase reads pace 4 (1 with a CPU clock that is the wall clock), and the solve is
    handed a reserve that holds the stretched estimates (recorded where the step calls it)."""
    from grid.planner.cpsat import solve as cpsat_solve

    seen: list[tuple[float, float]] = []
    real = cpsat_solve.solve_lexicographic

    def record(problem, **kwargs):  # type: ignore[no-untyped-def]
        seen.append((kwargs["reserve_s"], kwargs["time_limit_s"]))
        return real(problem, **kwargs)

    monkeypatch.setattr(cpsat_solve, "solve_lexicographic", record)
    snap = _fleet()
    make_plan(snap, deadline=Deadline(5.0, cpu_clock=time.perf_counter))  # pace 1 exactly
    start = time.perf_counter()
    slow = Deadline(5.0, started=start - 1.0, cpu_clock=lambda: 0.0, cpu_started=-0.25)
    make_plan(snap, deadline=slow)
    assert len(seen) == 2
    (fast_reserve, _), (slow_reserve, _) = seen
    problem = build_problem(snap)
    hosts, cands = len(problem.hosts), len(problem.candidates)
    out = C.output_base_s + C.output_per_host_s * hosts + C.exit_per_candidate_s * cands
    assert slow_reserve - fast_reserve >= 3 * out  # pace 4 against pace 1 on the output alone
