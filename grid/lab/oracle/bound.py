"""Configuration-LP upper bounds on served (independent of the CP-SAT search).

Hosts with the same capacity, slots, eligible models, speed row, up row and initial replicas
form a *type* (counted). At minute t a host of a type holds one set of models that fits its
memory and slots; relaxing which host holds which set, y[type, k, t] counts the type's hosts
whose present set fits inside maximal configuration k (one column per maximal set: much
tighter than the item LP of the time-expanded model, whose fractional replicas split memory).
n[m, type, t] counts ready replicas of m on the type: a replica ready at t was present at every
minute of [t − load, t], so n[m, type, t] ≤ Σ_{k ∋ m} y[type, k, u] for each such u in the span
(a minute before the span is left free, but its host must be up then); before minute `load`
only initial replicas can be ready. A model's ready capacity at t is Σ_type cap(m, type, t) ·
n[m, type, t]; classes route onto it (flow rows), and a solo class on an even model keeps the
exact concave hull of min(D, C·n) over integer counts.

`minute_bounds`: B_t = ⌊LP over the single minute t⌋ (served is an integer), added to CP-SAT as
the cut Σ_c served[c, t] ≤ B_t; Σ_t B_t is a proven bound on Σ served. `coupled_bounds`: one LP
per span of COUPLED_SPAN minutes, coupled across minutes and capped by the B_t; it stops the
per-minute bound from re-packing every minute for free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from grid.lab.oracle.trace import Problem

LP_SAFETY = 1e-7  # relative slack added before rounding an LP value down (solver tolerance)
COUPLED_SPAN = 120  # minutes per coupled LP (longer spans: tighter, slower)

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


@dataclass(frozen=True)
class HostType:
    hosts: tuple[int, ...]
    models: tuple[int, ...]  # eligible models
    configs: tuple[Config, ...]  # maximal sets over model indices
    up: tuple[bool, ...]
    rate: tuple[int, ...]
    initial: frozenset[int]  # models with an initial replica on every host of the type

    @property
    def count(self) -> int:
        return len(self.hosts)


def host_types(problem: Problem) -> list[HostType]:
    groups: dict[tuple[object, ...], list[int]] = {}
    for h in range(len(problem.host_ids)):
        models = tuple(m for m in range(len(problem.model_ids)) if problem.eligible[m][h])
        init = frozenset(m for m, hh in problem.initial if hh == h)
        key = (
            problem.capacity[h],
            problem.slots[h],
            models,
            problem.rate[h],
            problem.up[h],
            init,
        )
        groups.setdefault(key, []).append(h)
    out = []
    for key, hosts in groups.items():
        h = hosts[0]
        models = key[2]
        assert isinstance(models, tuple)
        mem = tuple(problem.memory[m] for m in models)
        local = _configs_cached(mem, problem.capacity[h], problem.slots[h])
        out.append(
            HostType(
                hosts=tuple(hosts),
                models=models,
                configs=tuple(tuple(models[j] for j in cfg) for cfg in local),
                up=problem.up[h],
                rate=problem.rate[h],
                initial=frozenset(m for m, hh in problem.initial if hh == h),
            )
        )
    return out


class _Lp:
    def __init__(self) -> None:
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.rhs: list[float] = []
        self.ub: list[float | None] = []
        self.objective: list[int] = []

    def var(self, ub: float | None = None) -> int:
        self.ub.append(ub)
        return len(self.ub) - 1

    def row(self, entries: list[tuple[int, float]], bound: float) -> None:
        r = len(self.rhs)
        for c, v in entries:
            self.rows.append(r)
            self.cols.append(c)
            self.vals.append(v)
        self.rhs.append(bound)

    def maximise(self) -> float | None:
        if not self.objective:
            return 0.0
        n = len(self.ub)
        cost = np.zeros(n)
        cost[self.objective] = -1.0
        bounds = [(0.0, b) for b in self.ub]
        if self.rhs:
            matrix = coo_matrix((self.vals, (self.rows, self.cols)), shape=(len(self.rhs), n))
            res = linprog(
                cost, A_ub=matrix.tocsr(), b_ub=np.array(self.rhs), bounds=bounds, method="highs"
            )
        else:
            res = linprog(cost, bounds=bounds, method="highs")
        return -float(res.fun) if res.status == 0 else None


def lp_bound(
    problem: Problem,
    start: int,
    end: int,
    caps: list[int] | None = None,
    types: list[HostType] | None = None,
) -> float:
    """LP bound on Σ served over minutes [start, end) (module docstring)."""
    types = types if types is not None else host_types(problem)
    lp = _Lp()
    y: dict[tuple[int, int], dict[int, list[int]]] = {}  # (type, t) -> model -> columns
    for i, ty in enumerate(types):
        for t in range(start, end):
            if not ty.up[t]:
                continue
            members: dict[int, list[int]] = {}
            first = len(lp.ub)
            for cfg in ty.configs:
                col = lp.var()
                for m in cfg:
                    members.setdefault(m, []).append(col)
            lp.row([(c, 1.0) for c in range(first, len(lp.ub))], float(ty.count))
            y[i, t] = members
    for t in range(start, end):
        active = [c for c, series in enumerate(problem.demand) if series[t] > 0]
        wanted = {m for c in active for m in problem.class_models[c]}
        ready: dict[int, list[tuple[int, int]]] = {}  # model -> [(n column, capacity)]
        for i, ty in enumerate(types):
            for m in ty.models:
                if m not in wanted:
                    continue
                col = _ready_count(lp, problem, ty, i, m, t, start, y)
                if col is not None:
                    ready.setdefault(m, []).append((col, problem.caps[m][ty.rate[t]]))
        minute_s: list[int] = []
        into: dict[int, list[int]] = {}
        for c in active:
            d = problem.demand[c][t]
            usable = [m for m in problem.class_models[c] if m in ready]
            if not usable:
                continue
            s = lp.var(float(d))
            lp.objective.append(s)
            minute_s.append(s)
            if problem.solo[c]:
                m = usable[0]
                terms = ready[m]
                if problem.even[m]:
                    cc = problem.conc[m]
                    k = max(1, -(-d // cc))
                    last = d - cc * (k - 1)
                    lp.row([(s, 1.0)] + [(n, -float(cc)) for n, _k in terms], 0.0)
                    lp.row(
                        [(s, 1.0)] + [(n, -float(last)) for n, _k in terms],
                        float(cc * (k - 1) - last * (k - 1)),
                    )
                else:
                    lp.row([(s, 1.0)] + [(n, -float(k)) for n, k in terms], 0.0)
                continue
            parts = []
            for m in usable:
                f = lp.var(float(d))
                parts.append(f)
                into.setdefault(m, []).append(f)
            lp.row([(s, 1.0)] + [(f, -1.0) for f in parts], 0.0)
        for m, fs in into.items():
            lp.row([(f, 1.0) for f in fs] + [(n, -float(k)) for n, k in ready[m]], 0.0)
        if minute_s and caps is not None:
            lp.row([(s, 1.0) for s in minute_s], float(caps[t]))
    value = lp.maximise()
    if value is None:  # cannot happen (all zeros is feasible): the trivial bound
        return float(sum(series[t] for series in problem.demand for t in range(start, end)))
    return value


def _ready_count(
    lp: _Lp,
    problem: Problem,
    ty: HostType,
    i: int,
    m: int,
    t: int,
    start: int,
    y: dict[tuple[int, int], dict[int, list[int]]],
) -> int | None:
    """The column n[m, type, t] with its coupling rows, or None when it must be 0."""
    load = problem.load
    if t < load:  # only initial replicas can be ready yet
        if m not in ty.initial or not all(ty.up[0 : t + 1]):
            return None
        cap: float | None = float(ty.count)
    else:
        if not all(ty.up[t - load : t + 1]):
            return None
        cap = None
    n = lp.var(cap)
    for u in range(max(start, t - load), t + 1):
        cols = y.get((i, u), {}).get(m, [])
        if not cols:
            lp.ub[n] = 0.0
            break
        lp.row([(n, 1.0)] + [(c, -1.0) for c in cols], 0.0)
    return n


def _floor(value: float) -> int:
    return math.floor(value * (1 + LP_SAFETY) + 1e-6)


def minute_bounds(problem: Problem) -> list[int]:
    """B_t for every minute: ⌊LP of minute t⌋, never above Σ demand at t."""
    types = host_types(problem)
    out = []
    for t in range(problem.minutes):
        total = sum(series[t] for series in problem.demand)
        if total == 0:
            out.append(0)
            continue
        out.append(min(total, _floor(lp_bound(problem, t, t + 1, None, types))))
    return out


def coupled_bounds(problem: Problem, caps: list[int]) -> int:
    """Σ over consecutive spans of ⌊coupled LP⌋: a proven bound on Σ served."""
    types = host_types(problem)
    total = 0
    for a in range(0, problem.minutes, COUPLED_SPAN):
        b = min(problem.minutes, a + COUPLED_SPAN)
        value = lp_bound(problem, a, b, caps, types)
        total += min(sum(caps[a:b]), _floor(value))
    return total
