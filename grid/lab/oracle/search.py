"""CP-SAT runs under one budget, and the time-window search used on large traces.

`Budget` is wall-clock seconds, or CP-SAT deterministic time in deterministic mode (then the
same trace gives the same schedule whatever the machine's load; the wall clock is only a
safety net). The time-window search is a large-neighbourhood search over time: it re-solves
the exact model on a window of minutes [a, b) plus an extension of load + hold + load minutes
whose residency is fixed to the incumbent's (model.py `ResidencyModel` with `entry`/`fixed`),
maximising served, then minimising mutations with served held (two solves per window). The
extension makes every replica present after the window at least as old as in the incumbent,
so the rest of the schedule stays valid and serves at least as much; each accepted window is
replayed in full and never makes the (served, −mutations) pair worse. Windows sweep the
trace, alternately offset by half a window, until the budget runs out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from grid.lab.oracle.model import ResidencyModel
from grid.lab.oracle.replay import Replay, replay, schedule_from_residency
from grid.lab.oracle.trace import Problem

SEED = 20261201
WORKERS = 8  # whole-trace model: CP-SAT portfolio (LNS improves the hint, LP proves the bound)
WINDOW_WORKERS = 2  # windows are small: measured, 2 workers improve them faster than 8
WALL_SAFETY = 3.0  # deterministic mode: wall-clock safety net, a multiple of the budget ...
WALL_SAFETY_MIN_S = 30.0  # ... and at least this many seconds
WINDOW_CELLS = 1500  # replica variables per window (sets its length); measured on 16 × 12 × 480:
# 1,500 accepted more improving windows in 50 s than 2,500 or 10,000 (larger ones rarely finish)
MIN_WINDOW_S = 0.2
SERVED_SHARE = 0.7  # of a window's time: maximise served; the rest minimises its mutations
MIN_WINDOW_MINUTES = 8

Rows = list[list[set[int]]]


@dataclass
class Budget:
    total: float
    deterministic: bool
    spent: float = 0.0
    deadline: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.deadline = time.perf_counter() + self.total

    def left(self) -> float:
        if self.deterministic:
            return max(0.0, self.total - self.spent)
        return max(0.0, self.deadline - time.perf_counter())

    def solver(self, seconds: float, workers: int) -> cp_model.CpSolver:
        solver = cp_model.CpSolver()
        solver.parameters.random_seed = SEED
        solver.parameters.num_workers = workers
        solver.parameters.linearization_level = 2
        if self.deterministic:
            solver.parameters.interleave_search = True
            solver.parameters.max_deterministic_time = max(0.01, seconds)
            safety = max(WALL_SAFETY_MIN_S, WALL_SAFETY * seconds)
            solver.parameters.max_time_in_seconds = safety
        else:
            solver.parameters.max_time_in_seconds = max(0.01, seconds)
        return solver

    def run(
        self,
        rm: ResidencyModel,
        seconds: float,
        hint: Rows,
        base: Rows | None = None,
        workers: int = WORKERS,
    ) -> tuple[cp_model.CpSolver, str, Rows | None]:
        rm.hint(hint)
        solver = self.solver(seconds, workers)
        code = solver.solve(rm.model)
        self.spent += solver.deterministic_time
        found = code in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        return solver, solver.status_name(code), rm.residency(solver, base) if found else None


def replay_rows(problem: Problem, rows: Rows, *, keep: bool = False) -> Replay:
    return replay(problem, schedule_from_residency(problem, rows), keep_residency=keep)


def _better(new: Replay, old: Replay) -> bool:
    return new.valid and (new.total, -new.mutations) > (old.total, -old.mutations)


def window_length(problem: Problem) -> int:
    pairs = max(1, len(problem.pairs()))
    return max(MIN_WINDOW_MINUTES, min(problem.minutes, 120, WINDOW_CELLS // pairs))


def window_search(
    problem: Problem, rows: Rows, caps: list[int], budget: Budget
) -> tuple[Rows, list[dict[str, Any]]]:
    """Improve `rows` window by window until the budget is spent; returns (rows, reports)."""
    size = window_length(problem)
    ext = 2 * problem.load + problem.hold
    current = replay_rows(problem, rows, keep=True)
    reports: list[dict[str, Any]] = []
    sweep = 0
    while budget.left() > MIN_WINDOW_S:
        offset = 0 if sweep % 2 == 0 else size // 2
        starts = list(range(offset, problem.minutes, size))
        if offset:
            starts = [0, *starts]
        improved = False
        for i, a in enumerate(starts):
            left = budget.left()
            if left <= MIN_WINDOW_S:
                break
            b = starts[i + 1] if i + 1 < len(starts) else problem.minutes
            end = min(problem.minutes, b + ext)
            seconds = max(MIN_WINDOW_S, left / (len(starts) - i))
            started = time.perf_counter()
            got, name = _window(problem, rows, current, (a, b, end), caps, budget, seconds)
            accepted = False
            if got is not None:
                trial = replay_rows(problem, got, keep=True)
                if _better(trial, current):
                    rows, current, accepted, improved = got, trial, True, True
            reports.append(
                {
                    "stage": f"window {a}-{b}",
                    "status": name,
                    "accepted": accepted,
                    "served": current.total,
                    "mutations": current.mutations,
                    "wall_s": round(time.perf_counter() - started, 3),
                }
            )
        sweep += 1
        if not improved and sweep >= 2:
            break  # two sweeps without a change: every window is locally optimal or stuck
    return rows, reports


def _window(
    problem: Problem,
    rows: Rows,
    current: Replay,
    span: tuple[int, int, int],
    caps: list[int],
    budget: Budget,
    seconds: float,
) -> tuple[Rows | None, str]:
    """Re-solve minutes [a, end) (those from b on fixed): served first, then mutations.

    Two solves on one model rather than one weighted objective: measured on 16 × 12 × 480
    windows, W·served − mutations (W ≈ 20 000) often found no solution at all in 5 s."""
    a, b, end = span
    entry = None if a == 0 else _entry(current, a)
    fixed = {
        (m, h, t): int(m in rows[t][h])
        for t in range(b, end)
        for m, h in problem.pairs()
        if problem.up[h][t]
    }
    rm = ResidencyModel(problem, symmetry=False, start=a, end=end, entry=entry, fixed=fixed)
    rm.add_minute_caps(caps)
    rm.model.maximize(rm.served_expr())
    solver, name, got = budget.run(
        rm, seconds * SERVED_SHARE, rows, base=rows, workers=WINDOW_WORKERS
    )
    if got is None:
        return None, name
    rm.model.add(rm.served_expr() >= round(solver.objective_value))
    rm.model.minimize(rm.mutations_expr())
    _solver, name2, again = budget.run(
        rm, seconds * (1 - SERVED_SHARE), got, base=rows, workers=WINDOW_WORKERS
    )
    return (again if again is not None else got), f"{name}/{name2}"


def _entry(current: Replay, a: int) -> dict[tuple[int, int], int]:
    """(m, h) -> load minute of every replica present at the end of minute a − 1."""
    return {
        (m, h): start
        for h, resident in enumerate(current.residency[a - 1])
        for m, start in resident.items()
    }
