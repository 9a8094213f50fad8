"""Stages of the lexicographic solve: levels merged where weights provably dominate.

A direct:{k} count and its :harm tie-break form one stage, W·count + harm with
W = Σ harm_rank + 1 > any harm sum; quality and spare_hosts form one, W·quality + spare with
W = hosts + 1 > any spare count. Every stage is maximized: a min level enters negated.

Scope. Every hard constraint is downward closed (removing a placement never breaks one), so a
replica level of class P is optimized exactly over the pinned candidates plus the candidates of
classes ≥ P: the other variables can always be zero, and no earlier level involves them. The
pinned level needs only the pinned candidates; levels 3–6 need every candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

from ortools.sat.python import cp_model

from grid.planner.cpsat.variables import Expr, Key
from grid.planner.levels import Level, levels
from grid.planner.problem import PlacementProblem

ALL = 10**9  # scope rank of the levels that need every candidate


@dataclass(frozen=True)
class Stage:
    levels: tuple[Level, ...]
    weights: tuple[int, ...]
    scope: int  # 0: pinned candidates; i: classes down to the i-th priority; ALL: everything

    @property
    def names(self) -> list[str]:
        return [level.name for level in self.levels]

    def signed(self, values: dict[str, int]) -> int:
        """The stage's combined value, larger is better."""
        return sum(
            w * (values[lv.name] if lv.sense == "max" else -values[lv.name])
            for lv, w in zip(self.levels, self.weights, strict=True)
        )

    def expression(self, exprs: dict[str, Expr]) -> Expr:
        signs = [
            w if lv.sense == "max" else -w for lv, w in zip(self.levels, self.weights, strict=True)
        ]
        return cp_model.LinearExpr.weighted_sum([exprs[lv.name] for lv in self.levels], signs)

    def split_bound(
        self, combined: int, values: dict[str, int], static: dict[str, int]
    ) -> dict[str, int]:
        """Per-level bounds from a bound on the combined value."""
        first = self.levels[0]
        if len(self.levels) == 1:
            return {first.name: combined if first.sense == "max" else -combined}
        weight = self.weights[0]
        lead = combined // weight  # the second level is ≥ 0 and < weight
        out = {first.name: lead}
        second = self.levels[1]
        if lead == values[first.name]:
            out[second.name] = min(static[second.name], combined - weight * lead)
        else:
            out[second.name] = static[second.name]
        return out


def stages_of(problem: PlacementProblem) -> list[Stage]:
    rank = {p: i + 1 for i, p in enumerate(problem.priorities)}

    def scope(level: Level) -> int:
        if level.name == "pinned":
            return 0
        if level.replica_level:
            return rank[int(level.name[1:].split(":")[0])]
        return ALL

    out: list[Stage] = []
    ordered = levels(problem)
    i = 0
    while i < len(ordered):
        level = ordered[i]
        following = ordered[i + 1] if i + 1 < len(ordered) else None
        if following is not None and following.name == f"{level.name}:harm":
            weight = sum(problem.harm_rank.values()) + 1
            out.append(Stage((level, following), (weight, 1), scope(level)))
            i += 2
        elif level.name == "quality" and following is not None and following.name == "spare_hosts":
            weight = len(problem.hosts) + 1
            out.append(Stage((level, following), (weight, 1), ALL))
            i += 2
        else:
            out.append(Stage((level,), (1,), scope(level)))
            i += 1
    return out


def scope_keys(problem: PlacementProblem, scope: int) -> list[Key]:
    """The candidates a stage of this scope optimizes over."""
    if scope >= ALL:
        return sorted(problem.candidates)
    floor = problem.priorities[scope - 1] if scope > 0 else None
    return sorted(
        key
        for key, cand in problem.candidates.items()
        if cand.pinned or (floor is not None and problem.model_by_id[key[0]].priority >= floor)
    )
