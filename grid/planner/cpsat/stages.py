"""Stages of the lexicographic solve: levels merged where weights provably dominate.

A direct:{k} count and its :harm tie-break form one stage, W·count + harm with
W = Σ harm_rank + 1 > any harm sum; quality and spare_hosts form one, W·quality + spare with
W = hosts + 1 > any spare count. Every stage is maximized: a min level enters negated.

Folding (`fold_stages`). Consecutive replica stages of one scope (a class's baseline, direct
and inferred rounds) are folded into one stage by mixed-radix weights: with R_i the static
upper bound of stage i's combined value (bounds.py; every replica level is ≥ 0), stage i
weighs Π_{j>i} (R_j + 1), so one unit of an earlier stage outweighs every later stage together
and maximizing the sum is exactly the lexicographic maximum. A fold stops where the weights
would pass FOLD_LIMIT (2^40: every coefficient and the objective stay exact in int64 and, with
room to spare, in the solver's double arithmetic and LP).

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
FOLD_LIMIT = 2**40


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
        lead = combined // weight  # the later levels are ≥ 0 and weigh < weight together
        out = {first.name: lead}
        if len(self.levels) > 2:  # a folded stage: the later levels keep their static bounds
            out.update({lv.name: static[lv.name] for lv in self.levels[1:]})
            return out
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


def scope_size(problem: PlacementProblem, scope: int) -> int:
    """len(scope_keys(problem, scope)) from the per-model lists, without listing or sorting
    the keys (10,000 production hosts: 1 s for the widest scope, to learn it is too large)."""
    if scope >= ALL:
        return len(problem.candidates)
    floor = problem.priorities[scope - 1] if scope > 0 else None
    size = 0
    for model in problem.models:
        cands = problem.candidates_of_model(model.model_id)
        if floor is not None and model.priority >= floor:
            size += len(cands)
        elif model.pinned_hosts:
            size += sum(1 for cand in cands if cand.pinned)
    return size


def fold_stages(
    stages: list[Stage], static: dict[str, int], limit: int = FOLD_LIMIT
) -> list[Stage]:
    """Consecutive replica stages of one scope folded by mixed-radix weights (docstring)."""
    out: list[Stage] = []
    group: list[Stage] = []

    def flush() -> None:
        if not group:
            return
        if len(group) == 1:
            out.append(group[0])
        else:
            levels_: list[Level] = []
            weights: list[int] = []
            radix = 1
            for stage in reversed(group):
                levels_ = list(stage.levels) + levels_
                weights = [w * radix for w in stage.weights] + weights
                radix *= stage.signed(static) + 1
            out.append(Stage(tuple(levels_), tuple(weights), group[0].scope))
        group.clear()

    span = 1
    for stage in stages:
        replica = all(lv.replica_level and lv.sense == "max" for lv in stage.levels)
        size = stage.signed(static) + 1 if replica else 0
        fits = bool(group) and group[0].scope == stage.scope and span * size <= limit
        if replica and fits:
            group.append(stage)
            span *= size
            continue
        flush()
        if replica:
            group.append(stage)
            span = size
        else:
            out.append(stage)
            span = 1
    flush()
    return out
