"""The state that the phases of one plan share (pipeline.py), and its budget questions.

A `Run` carries the snapshot, the engine, the command's Deadline and what each phase leaves
for the next (the problem, the placements so far, the host-type result, the outcome, the
staged placement, the plan). Its budget methods read deadline.py's calibration table: what the
phases after a flexible one need (`later_s`), what the flexible phases may spend (`room_s`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import grid.planner.deadline as budget  # every calibrated figure (CALIBRATION)
from grid.fleet import FleetSnapshot, Plan, Preemption
from grid.planner.deadline import (
    Deadline,
    explain_s,
    model_build_s_per_key,
    output_reserve_s,
    portfolio_share_s,
    stage_s,
    summary_s,
)
from grid.planner.problem import PlacementProblem
from grid.planner.targets import Target

if TYPE_CHECKING:
    from grid.planner.cpsat import AggregateResult

Key = tuple[str, str]


@dataclass
class Outcome:
    """What the solve phase decided: engine, status, bounds and message of the plan."""

    engine: str
    status: str
    message: str = ""
    bounds: dict[str, int] | None = None


@dataclass
class Run:
    """The state one plan's phases share (pure but for the deadline's clock)."""

    snapshot: FleetSnapshot
    engine: str
    deadline: Deadline
    deterministic: bool = False
    targets: dict[str, Target] | None = None
    soft_stage_limit_s: float | None = None
    started: float = 0.0
    problem: PlacementProblem | None = None
    wide: PlacementProblem | None = None  # the portfolio's problem, with workloads (narrow.py)
    greedy: set[Key] = field(default_factory=set)
    placed: set[Key] = field(default_factory=set)  # the placement so far (always feasible)
    hints: list[set[Key]] = field(default_factory=list)  # further solve hints (incumbents)
    solved: bool = False  # the solve phase's placement is the run's
    aggregated: AggregateResult | None = None
    fallback: str | None = None  # what left no time for CP-SAT, once decided
    pace: float = 1.0  # the machine's pace (Deadline.pace), read before the solve
    outcome: Outcome | None = None
    staged: tuple[list[Preemption], set[Key]] | None = None
    values: dict[str, int] | None = None
    plan: Plan | None = None

    @property
    def built(self) -> PlacementProblem:
        assert self.problem is not None, "the build phase runs first"
        return self.problem

    def wall_ms(self) -> float:
        return (self.deadline.clock() - self.started) * 1000

    # -- the budget: estimates from deadline.py's calibration table ------------------------
    @property
    def build_s(self) -> float:
        return self.deadline.spent.get("build", 0.0)

    @property
    def output_s(self) -> float:
        """Validation, the caller's output and the exit (freeing the problem), at this pace."""
        given = self.deadline.output_s
        after = given if given is not None else output_reserve_s(len(self.built.hosts))
        after += budget.CALIBRATION.exit_per_candidate_s * len(self.built.candidates)
        return self.pace * after

    @cached_property
    def portfolio_s(self) -> float:
        """The portfolio phase's estimate (0 without workloads or with the heuristic)."""
        snap = self.snapshot
        if not snap.workloads or self.engine == "heuristic":
            return 0.0
        scored = {
            m.model_id for m in snap.models if any(w in snap.workloads for w in m.workload_scores)
        }
        keys = sum(len(self.built.candidates_of_model(m)) for m in scored)
        policy_s = snap.policy.portfolio.time_limit_s
        return portfolio_share_s(self.deadline.limit_s, keys, policy_s)

    def reserve_s(self) -> float:
        """The estimates of stage, explain and validate/output: what a solve leaves them."""
        problem = self.built
        hosts = len(problem.hosts)
        distinct = problem.distinct_candidates
        return (
            stage_s(distinct, self.build_s, hosts, self.pace)
            + explain_s(distinct, self.deadline.limit_s)
            + self.output_s
        )

    def floor_s(self) -> float:
        """The fallback path's reserve: staging once (no per-candidate term), no cores."""
        return stage_s(0, self.build_s, len(self.built.hosts), self.pace) + self.output_s

    def after_stage_s(self) -> float:
        """The floor staging leaves: summarised explanations, the portfolio and the output."""
        return summary_s(len(self.built.models), self.pace) + self.portfolio_s + self.output_s

    def setup_s(self) -> float:
        return budget.CALIBRATION.solve_setup_share * self.build_s

    def later_s(self) -> float:
        """What the phases before the solve leave: its setup and every later estimate."""
        return self.reserve_s() + self.portfolio_s + self.setup_s()

    def room_s(self) -> float:
        """The deadline's time left for the flexible phases (host types, vacate, solve)."""
        return self.deadline.remaining() - self.later_s()

    def solver_reachable(self) -> bool:
        """Decided once, after the heuristic: would a CP-SAT solve still be worth starting?"""
        if self.fallback is None and self.room_s() < budget.CALIBRATION.min_solve_s:
            self.fallback = "loading and building"
        return self.fallback is None

    def build_s_per_key(self) -> float:
        return model_build_s_per_key(len(self.built.candidates), self.build_s)
