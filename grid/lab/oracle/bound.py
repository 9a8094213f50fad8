"""Per-minute configuration-LP upper bounds on served (independent of the CP-SAT search).

At minute t, whatever a schedule does, the replicas ready at t sit on hosts that have been up
since t − load (t ≥ load), or are initial replicas (t < load), and each host's ready set fits its
memory and slots. Relaxing everything that couples minutes, the most minute t can serve is a
small packing problem; its configuration LP (one column per maximal set of models a host type
can hold, counted per type: the aggregation of identical hosts is exact here, since nothing
couples minutes) is much tighter than the item LP of the time-expanded model, whose fractional
replicas split memory. B_t = ⌊LP_t⌋ (served is an integer) is added to CP-SAT as the cut
Σ_m served[m, t] ≤ B_t, and Σ_t B_t is a proven bound on Σ served.

`coupled_bounds` tightens this across minutes (a replica ready at t was present, so counted in
its host's configuration, at every minute of [t − load, t]): one LP per span of minutes, each
also capped by the B_t; it stops the per-minute bound from re-packing every minute for free.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from scipy.optimize import linprog

from grid.lab.oracle.trace import Problem

LP_SAFETY = 1e-7  # relative slack added before rounding an LP value down (solver tolerance)

Config = tuple[int, ...]


def _maximal_configs(memory: tuple[int, ...], capacity: int, slots: int) -> list[Config]:
    """Every maximal set of models (indices into `memory`) that fits `capacity` and `slots`."""
    n = len(memory)
    found: list[Config] = []

    def extend(start: int, chosen: list[int], used: int) -> None:
        grew = False
        for j in range(start, n):
            if used + memory[j] <= capacity and (not slots or len(chosen) < slots):
                grew = True
                chosen.append(j)
                extend(j + 1, chosen, used + memory[j])
                chosen.pop()
        if not grew:
            found.append(tuple(chosen))

    extend(0, [], 0)
    free = set(range(n))
    out = []
    for cfg in found:  # drop sets that some skipped earlier model could still join
        rest = free - set(cfg)
        used = sum(memory[j] for j in cfg)
        room = not slots or len(cfg) < slots
        if not (room and any(used + memory[j] <= capacity for j in rest)):
            out.append(cfg)
    return out


@cache
def _configs_cached(memory: tuple[int, ...], capacity: int, slots: int) -> tuple[Config, ...]:
    return tuple(_maximal_configs(memory, capacity, slots))


def _host_types(problem: Problem, t: int) -> dict[tuple[object, ...], tuple[int, list[Config]]]:
    """Host types that may have ready replicas at t: key -> (count, configs over model ids)."""
    types: dict[tuple[object, ...], tuple[int, list[Config]]] = {}
    since = max(0, t - problem.load)
    for h in range(len(problem.host_ids)):
        if not all(problem.up[h][since : t + 1]):
            continue
        if t < problem.load:  # only initial replicas can be ready yet
            held = tuple(sorted(m for m, hh in problem.initial if hh == h))
            if held:
                types[("initial", h)] = (1, [held])
            continue
        _count_host(problem, h, types)
    return types


def _count_host(
    problem: Problem, h: int, types: dict[tuple[object, ...], tuple[int, list[Config]]]
) -> None:
    """Add host h to its type (capacity, slots, eligible models), with the type's configs."""
    models = tuple(m for m in range(len(problem.model_ids)) if problem.eligible[m][h])
    key = (problem.capacity[h], problem.slots[h], models)
    if key in types:
        types[key] = (types[key][0] + 1, types[key][1])
        return
    mem = tuple(problem.memory[m] for m in models)
    local = _configs_cached(mem, problem.capacity[h], problem.slots[h])
    types[key] = (1, [tuple(models[j] for j in cfg) for cfg in local])


class _Layout:
    """The LP's structure for one set of host types (shared by the minutes that have it)."""

    def __init__(self, problem: Problem, types: dict[tuple[object, ...], tuple[int, list[Config]]]):
        self.models = [m for m in range(len(problem.model_ids))]
        columns: list[tuple[int, Config]] = []
        for i, (_count, configs) in enumerate(types.values()):
            columns += [(i, cfg) for cfg in configs]
        self.n_y, n_s = len(columns), len(self.models)
        member = np.zeros((n_s, self.n_y))
        owner = np.zeros((len(types), self.n_y))
        for col, (ti, cfg) in enumerate(columns):
            owner[ti, col] = 1.0
            for m in cfg:
                member[m, col] = 1.0
        self.member = member
        self.owner = owner
        self.counts = np.array([float(count) for count, _c in types.values()])
        self.useful = member.any(axis=1)

    def solve(self, problem: Problem, t: int) -> float:
        d = np.array([float(problem.demand[m][t]) for m in self.models])
        c = np.array([float(problem.conc[m]) for m in self.models])
        d[~self.useful] = 0.0
        k = np.maximum(1.0, np.ceil(d / c))
        last = d - c * (k - 1)
        n_s = len(self.models)
        eye = np.eye(n_s)
        a_ub = np.vstack(
            [
                np.hstack([self.owner, np.zeros((len(self.counts), n_s))]),
                np.hstack([-c[:, None] * self.member, eye]),
                np.hstack([-last[:, None] * self.member, eye]),
            ]
        )
        b_ub = np.concatenate([self.counts, np.zeros(n_s), c * (k - 1) - last * (k - 1)])
        bounds = [(0.0, None)] * self.n_y + [(0.0, float(v)) for v in d]
        cost = np.concatenate([np.zeros(self.n_y), -np.ones(n_s)])
        res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
        if res.status != 0:  # cannot happen (y = 0 is feasible): fall back to the trivial bound
            return float(d.sum())
        return -float(res.fun)


def minute_bounds(problem: Problem) -> list[int]:
    """B_t for every minute: ⌊configuration LP⌋, never above Σ demand at t."""
    layouts: dict[tuple[object, ...], _Layout] = {}
    out = []
    for t in range(problem.minutes):
        total = sum(problem.demand[m][t] for m in range(len(problem.model_ids)))
        types = _host_types(problem, t)
        if total == 0 or not types:
            out.append(0)
            continue
        key = tuple((k, v[0]) for k, v in types.items())
        layout = layouts.get(key)
        if layout is None:
            layout = layouts[key] = _Layout(problem, types)
        value = layout.solve(problem, t)
        out.append(min(total, math.floor(value * (1 + LP_SAFETY) + 1e-6)))
    return out


def _present_types(problem: Problem, t: int) -> list[tuple[int, list[Config]]]:
    """Host types up at t (any present set): (count, maximal configurations over model ids)."""
    types: dict[tuple[object, ...], tuple[int, list[Config]]] = {}
    for h in range(len(problem.host_ids)):
        if problem.up[h][t]:
            _count_host(problem, h, types)
    return list(types.values())


def coupled_bound(problem: Problem, start: int, end: int, caps: list[int]) -> float:
    """LP bound on Σ served over minutes [start, end), coupled across minutes.

    Variables y[k, t]: hosts of a type whose present set at t fits inside configuration k;
    n[m, t]: ready replicas of m. A replica ready at t was present at every minute of
    [t − load, t], so n[m, t] ≤ Σ_{k ∋ m} y[k, u] for each such u ≥ start (minutes before
    `start` are left free, so consecutive spans add up to a bound on the whole trace); before
    minute `load` only initial replicas can be ready. served ≤ the hull of min(D, C·n)."""
    from scipy.sparse import coo_matrix

    n_models = len(problem.model_ids)
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    rhs: list[float] = []
    ub: list[float | None] = []
    n_var = 0
    member: dict[int, dict[int, list[int]]] = {}  # t -> m -> y columns
    nvar: dict[tuple[int, int], int] = {}
    svar: list[int] = []

    def row(entries: list[tuple[int, float]], bound: float) -> None:
        r = len(rhs)
        for c, v in entries:
            rows.append(r)
            cols.append(c)
            vals.append(v)
        rhs.append(bound)

    for t in range(start, end):
        minute_s: list[int] = []
        member[t] = {m: [] for m in range(n_models)}
        for count, configs in _present_types(problem, t):
            first = n_var
            for cfg in configs:
                for m in cfg:
                    member[t][m].append(n_var)
                ub.append(None)
                n_var += 1
            row([(c, 1.0) for c in range(first, n_var)], float(count))
        for m in range(n_models):
            d, c = problem.demand[m][t], problem.conc[m]
            if d <= 0:
                continue
            n = nvar[m, t] = n_var
            cap: float | None = None
            if t < problem.load:
                cap = float(
                    sum(1 for mm, h in problem.initial if mm == m and all(problem.up[h][0 : t + 1]))
                )
            ub.append(cap)
            s = n_var + 1
            ub.append(float(d))
            n_var += 2
            svar.append(s)
            minute_s.append(s)
            for u in range(max(start, t - problem.load), t + 1):
                row([(n, 1.0)] + [(col, -1.0) for col in member[u][m]], 0.0)
            k = max(1, -(-d // c))
            last = d - c * (k - 1)
            row([(s, 1.0), (n, -float(c))], 0.0)
            row([(s, 1.0), (n, -float(last))], float(c * (k - 1) - last * (k - 1)))
        if minute_s:
            row([(s, 1.0) for s in minute_s], float(caps[t]))  # the per-minute bound
    if not svar:
        return 0.0
    matrix = coo_matrix((vals, (rows, cols)), shape=(len(rhs), n_var)).tocsr()
    cost = np.zeros(n_var)
    cost[svar] = -1.0
    bounds = [(0.0, b) for b in ub]
    res = linprog(cost, A_ub=matrix, b_ub=np.array(rhs), bounds=bounds, method="highs")
    if res.status != 0:
        return float(sum(problem.demand[m][t] for m in range(n_models) for t in range(start, end)))
    return -float(res.fun)


COUPLED_SPAN = 120  # minutes per coupled LP (longer spans: tighter, slower; measured ≤ 3 s total)


def coupled_bounds(problem: Problem, caps: list[int]) -> int:
    """Σ over consecutive spans of ⌊coupled LP⌋: a proven bound on Σ served."""
    total = 0
    for a in range(0, problem.minutes, COUPLED_SPAN):
        b = min(problem.minutes, a + COUPLED_SPAN)
        value = coupled_bound(problem, a, b, caps)
        total += min(sum(caps[a:b]), math.floor(value * (1 + LP_SAFETY) + 1e-6))
    return total
