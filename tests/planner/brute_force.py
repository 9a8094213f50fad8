"""Brute force over every placement of a tiny fleet: the lexicographic optimum of the replica
levels, and one host's feasible contents.

The constraints are reference.py's rows (written from the snapshot, no OR-Tools, nothing of
the planner's ledgers): every row over the placement variables alone is an upper bound with
non-negative weights, so a partial placement that breaks one can be cut off. The replica steps
y[m,k] = [replicas(m) ≥ k] are computed from the counts, and the levels are reference.py's
RefLevel rows over (x, y). Only tiny fleets: every subset of each model's candidate hosts up to
its desired count is tried.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

from grid.planner.problem import PlacementProblem
from tests.planner.reference import _Program

Key = tuple[str, str]


def _bound_rows(program: _Program) -> list[tuple[dict[int, float], float]]:
    n = len(program.keys)
    out = []
    for coefs, lo, hi in program.rows:
        if lo == -math.inf and all(i < n for i in coefs) and all(w >= 0 for w in coefs.values()):
            out.append((coefs, hi))
    return out


def _feasible(rows: list[tuple[dict[int, float], float]], chosen: set[int]) -> bool:
    return all(sum(w for i, w in coefs.items() if i in chosen) <= hi + 1e-9 for coefs, hi in rows)


def brute_force_levels(problem: PlacementProblem) -> dict[str, int]:
    """The best replica-level values (lexicographically, reference.py's level order)."""
    program = _Program(problem)
    rows = _bound_rows(program)
    levels = program.levels()
    models = sorted(program.models)
    options: list[list[tuple[int, ...]]] = []
    for model_id in models:
        columns = [program.index[k] for k in program.keys if k[0] == model_id]
        room = max(0, program.desired[model_id] - program._fixed_count(model_id))
        options.append(
            [
                c
                for r in range(min(room, len(columns)) + 1)
                for c in itertools.combinations(columns, r)
            ]
        )
    best: tuple[int, ...] | None = None

    def score(chosen: set[int]) -> tuple[int, ...]:
        z = set(chosen)
        for model_id in models:
            count = program._fixed_count(model_id) + sum(
                1 for k in program.keys if k[0] == model_id and program.index[k] in chosen
            )
            k = 1
            while (model_id, k) in program.y:
                if count >= k:
                    z.add(program.y[(model_id, k)])
                k += 1
        return tuple(
            level.constant + round(sum(w for i, w in level.coefficients.items() if i in z))
            for level in levels
        )

    def search(at: int, chosen: set[int]) -> None:
        nonlocal best
        if at == len(models):
            values = score(chosen)
            if best is None or values > best:
                best = values
            return
        for pick in options[at]:
            grown = chosen | set(pick)
            if _feasible(rows, grown):
                search(at + 1, grown)

    search(0, set())
    assert best is not None
    return {level.name: value for level, value in zip(levels, best, strict=True)}


def feasible_contents(problem: PlacementProblem, host_id: str) -> set[frozenset[str]]:
    """Every set of models that one host can hold on its own (reference.py's host rows)."""
    program = _Program(problem)
    program.rows = []  # the host's own rows only (not a model's rows over this host alone)
    program._host_constraints(host_id)
    mine = _bound_rows(program)
    columns = {program.index[k]: k[0] for k in program.keys if k[1] == host_id}
    out: set[frozenset[str]] = set()
    for r in range(len(columns) + 1):
        for pick in itertools.combinations(sorted(columns), r):
            if _feasible(mine, set(pick)):
                out.add(frozenset(columns[i] for i in pick))
    return out


def subsets(items: Iterable[str]) -> list[frozenset[str]]:
    pool = sorted(items)
    return [frozenset(c) for r in range(len(pool) + 1) for c in itertools.combinations(pool, r)]


def feasible_placements(problem: PlacementProblem, counts: dict[str, int]) -> list[set[Key]]:
    """Every placement with exactly counts[m] variable replicas of each model that passes
    reference.py's rows."""
    program = _Program(problem)
    rows = _bound_rows(program)
    models = sorted(program.models)
    found: list[set[Key]] = []

    def search(at: int, chosen: set[int]) -> None:
        if at == len(models):
            found.append({program.keys[i] for i in chosen})
            return
        columns = [program.index[k] for k in program.keys if k[0] == models[at]]
        for pick in itertools.combinations(columns, counts.get(models[at], 0)):
            grown = chosen | set(pick)
            if _feasible(rows, grown):
                search(at + 1, grown)

    search(0, set())
    return found
