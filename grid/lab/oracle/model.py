"""The CP-SAT time-expanded residency model (formulation in grid/lab/oracle/__init__.py).

Variables exist only where they can be non-zero: a replica variable x[p, t] for an eligible pair
p = (model, host) at a minute t when the host is up; load/unload/ready literals are aliases of x
where the previous minute is a constant (start of the trace, end of a down interval).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ortools.sat.python import cp_model, cp_model_helper

from grid.lab.oracle.flow import minute_flow
from grid.lab.oracle.trace import Problem

Lit = cp_model_helper.Literal  # a Boolean variable or its negation


def identical_host_groups(problem: Problem) -> list[list[int]]:
    """Hosts with the same capacity, slots, runtimes and down intervals and no initial replica:
    interchangeable, so one counted type (used for symmetry breaking and the static bound)."""
    occupied = {h for _m, h in problem.initial}
    groups: dict[tuple[object, ...], list[int]] = {}
    for h, host in enumerate(problem.trace.hosts):
        if h in occupied:
            continue
        key = (host.capacity_mb, host.max_models, tuple(sorted(set(host.runtimes))), problem.up[h])
        groups.setdefault(key, []).append(h)
    return [g for g in groups.values() if len(g) > 1]


@dataclass
class ResidencyModel:
    """The model over minutes [start, end) (the whole trace by default).

    A window (start > 0, used by the time-window search in search.py) enters with `entry`:
    (m, h) -> load minute of each replica present at start − 1; minutes in `fixed` keep the
    given residency ((m, h, t) -> 0/1), so the schedule after the window is unchanged."""

    problem: Problem
    symmetry: bool = True
    start: int = 0
    end: int = -1
    entry: dict[tuple[int, int], int] | None = None
    fixed: dict[tuple[int, int, int], int] = field(default_factory=dict)
    model: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    x: dict[tuple[int, int, int], cp_model.IntVar] = field(default_factory=dict)
    load: dict[tuple[int, int, int], Lit] = field(default_factory=dict)
    unload: dict[tuple[int, int, int], Lit] = field(default_factory=dict)
    ready: dict[tuple[int, int, int], Lit] = field(default_factory=dict)
    served: dict[tuple[int, int], cp_model.IntVar] = field(default_factory=dict)  # (class, t)
    flow: dict[tuple[int, int, int], cp_model.IntVar] = field(default_factory=dict)  # (c, m, t)

    def __post_init__(self) -> None:
        p = self.problem
        if self.end < 0:
            self.end = p.minutes
        if self.entry is None:
            self.entry = {pair: -(p.load + p.hold) for pair in p.initial}
        for m, h in p.pairs():
            self._pair(m, h)
        for key, value in self.fixed.items():
            if key in self.x:
                self.model.add(self.x[key] == value)
        self._ledgers()
        self._served()
        if self.symmetry and self.start == 0:
            self._symmetry()

    def minutes(self) -> range:
        return range(self.start, self.end)

    # residency timing -------------------------------------------------------------------------
    def _pair(self, m: int, h: int) -> None:
        p, md = self.problem, self.model
        up = p.up[h]
        entered = self.entry.get((m, h)) if self.entry else None
        keep = p.load + p.hold
        for t in self.minutes():
            if not up[t]:
                continue
            x = md.new_bool_var(f"x_{m}_{h}_{t}")
            self.x[m, h, t] = x
            prev: cp_model.IntVar | None = None
            if t > self.start and up[t - 1]:
                prev = self.x[m, h, t - 1]
            if prev is not None:
                load = md.new_bool_var(f"l_{m}_{h}_{t}")
                md.add(load >= x - prev)
                unload = md.new_bool_var(f"u_{m}_{h}_{t}")
                md.add(unload >= prev - x)
                self.load[m, h, t] = load
                self.unload[m, h, t] = unload
            elif t == self.start and entered is not None:
                self.unload[m, h, t] = x.Not()
            else:
                self.load[m, h, t] = x
            # a replica loaded at s stays through s + load + hold - 1 (unless its host goes down)
            window = []
            for s in range(t, max(self.start - 1, t - keep), -1):
                if not up[s]:
                    break
                if (m, h, s) in self.load:
                    window.append(self.load[m, h, s])
            if len(window) > 1 or (window and window[0] is not x):
                md.add(sum(window) <= x)
            if entered is not None and t < entered + keep and all(up[self.start : t + 1]):
                md.add(x == 1)  # an entering replica still inside its hold
            self._ready(m, h, t, entered)

    def _ready(self, m: int, h: int, t: int, entered: int | None) -> None:
        p = self.problem
        if p.load == 0:
            self.ready[m, h, t] = self.x[m, h, t]
            return
        chain = []
        for j in range(p.load + 1):
            u = t - j
            if u < self.start:  # the rest of the chain is the entering replica, if any
                if entered is None or t - entered < p.load:
                    return
                break
            if (m, h, u) not in self.x:
                return
            chain.append(self.x[m, h, u])
        ready = self.model.new_bool_var(f"r_{m}_{h}_{t}")
        for lit in chain:
            self.model.add_implication(ready, lit)
        self.ready[m, h, t] = ready

    # memory and slot ledgers ------------------------------------------------------------------
    def _ledgers(self) -> None:
        p = self.problem
        for h in range(len(p.host_ids)):
            models = [m for m in range(len(p.model_ids)) if p.eligible[m][h]]
            mem_binds = sum(p.memory[m] for m in models) > p.capacity[h]
            slot_binds = bool(p.slots[h]) and len(models) > p.slots[h]
            if not (mem_binds or slot_binds):
                continue
            for t in self.minutes():
                xs = [(m, self.x[m, h, t]) for m in models if (m, h, t) in self.x]
                if mem_binds:
                    self.model.add(sum(p.memory[m] * x for m, x in xs) <= p.capacity[h])
                if slot_binds:
                    self.model.add(sum(x for _m, x in xs) <= p.slots[h])

    # served: a solo class on an even model is min(demand, C × ready) as its exact concave hull
    # over integer counts; otherwise classes route onto their models' ready capacity (flows)
    def _served(self) -> None:
        p = self.problem
        for t in self.minutes():
            capacity: dict[int, list[tuple[int, Lit]]] = {}
            for m in range(len(p.model_ids)):
                terms = [
                    (p.cap(m, h, t), self.ready[m, h, t])
                    for h in range(len(p.host_ids))
                    if (m, h, t) in self.ready
                ]
                if terms:
                    capacity[m] = terms
            into: dict[int, list[cp_model.IntVar]] = {}
            for c, members in enumerate(p.class_models):
                d = p.demand[c][t]
                usable = [m for m in members if m in capacity]
                if d <= 0 or not usable:
                    continue
                srv = self.model.new_int_var(0, d, f"s_{c}_{t}")
                self.served[c, t] = srv
                if p.solo[c]:
                    m = usable[0]
                    if p.even[m]:
                        self._hull(srv, d, p.conc[m], sum(lit for _c, lit in capacity[m]))
                    else:
                        self.model.add(srv <= sum(k * lit for k, lit in capacity[m]))
                    continue
                parts = []
                for m in usable:
                    most = min(d, sum(k for k, _lit in capacity[m]))
                    f = self.model.new_int_var(0, most, f"f_{c}_{m}_{t}")
                    self.flow[c, m, t] = f
                    into.setdefault(m, []).append(f)
                    parts.append(f)
                self.model.add(srv == sum(parts))
            for m, fs in into.items():
                self.model.add(sum(fs) <= sum(k * lit for k, lit in capacity[m]))

    def _hull(self, srv: cp_model.IntVar, d: int, c: int, count: cp_model.LinearExprT) -> None:
        k = -(-d // c)  # replicas needed to serve d in full
        last = d - c * (k - 1)  # what the k-th replica adds
        if k >= 2:
            self.model.add(srv <= c * count)
        self.model.add(srv <= c * (k - 1) + last * (count - (k - 1)))

    # symmetry breaking between identical hosts: order them by residency-minutes --------------
    def _symmetry(self) -> None:
        for group in identical_host_groups(self.problem):
            totals = [self.occupancy(h) for h in group]
            for a, b in itertools.pairwise(totals):
                self.model.add(a >= b)

    def occupancy(self, h: int) -> cp_model.LinearExprT:
        return sum(v for (_m, hh, _t), v in self.x.items() if hh == h)

    def add_minute_caps(self, caps: list[int]) -> None:
        """Σ_c served[c, t] ≤ caps[t]: per-minute bounds proven elsewhere (bound.py)."""
        by_minute: dict[int, list[cp_model.IntVar]] = {}
        for (_c, t), srv in self.served.items():
            by_minute.setdefault(t, []).append(srv)
        for t, terms in by_minute.items():
            if caps[t] < sum(series[t] for series in self.problem.demand):
                self.model.add(sum(terms) <= caps[t])

    # objective expressions --------------------------------------------------------------------
    def served_expr(self) -> cp_model.LinearExprT:
        return sum(self.served.values())

    def mutations_expr(self) -> cp_model.LinearExprT:
        return sum(self.load.values()) + sum(self.unload.values())

    def hint(self, rows: list[list[set[int]]]) -> None:
        """Hint every variable with the values of the residency `rows` (rows[t][h])."""
        self.model.clear_hints()  # type: ignore[no-untyped-call]
        val: dict[int, int] = {}
        for (m, h, t), x in self.x.items():
            val[x.index] = int(m in rows[t][h])
        p = self.problem

        def lit_value(lit: Lit) -> int:
            if isinstance(lit, cp_model.IntVar):
                return val[lit.index]
            return 1 - val[lit.Not().index]

        for key, lit in list(self.load.items()) + list(self.unload.items()):
            if isinstance(lit, cp_model.IntVar) and lit.index not in val:
                m, h, t = key
                now, before = val[self.x[key].index], val[self.x[m, h, t - 1].index]
                is_load = lit is self.load.get(key)
                val[lit.index] = int(now > before) if is_load else int(before > now)
        for (m, h, t), lit in self.ready.items():
            if isinstance(lit, cp_model.IntVar) and lit.index not in val:
                chain = [
                    self.x.get((m, h, t - j)) for j in range(p.load + 1) if t - j >= self.start
                ]
                val[lit.index] = int(all(x is not None and val[x.index] for x in chain))
        capacity: dict[int, list[int]] = {}
        for (m, h, t), lit in self.ready.items():
            if lit_value(lit):
                capacity.setdefault(t, [0] * len(p.model_ids))[m] += p.cap(m, h, t)
        flows = {
            t: minute_flow(p, t, capacity.get(t, [0] * len(p.model_ids))) for t in self.minutes()
        }
        for (c, t), srv in self.served.items():
            val[srv.index] = sum(x for (cc, _m), x in flows[t].items() if cc == c)
        for (c, m, t), f in self.flow.items():
            val[f.index] = flows[t].get((c, m), 0)
        for index, value in val.items():
            self.model.proto.solution_hint.vars.append(index)
            self.model.proto.solution_hint.values.append(value)

    def residency(
        self, solver: cp_model.CpSolver, base: list[list[set[int]]] | None = None
    ) -> list[list[set[int]]]:
        """The solved residency over the model's minutes; other minutes are copied from `base`."""
        p = self.problem
        rows: list[list[set[int]]] = [[set() for _ in p.host_ids] for _ in range(p.minutes)]
        if base is not None:
            for t in range(p.minutes):
                if not self.start <= t < self.end:
                    rows[t] = [set(r) for r in base[t]]
        for (m, h, t), x in self.x.items():
            if solver.boolean_value(x):
                rows[t][h].add(m)
        return rows
