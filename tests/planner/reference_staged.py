"""An independent model of staged preemption, for checking plans that name victims.

A plan with preemptions promises a *future* fleet: each victim drains and unloads (a relocated
one once its replacement elsewhere is READY), then each beneficiary loads on the freed host.
This module restates, from the spec and DESIGN.md rather than from the planner's code, what
that promise must satisfy and what it is worth:

`staged_problems(problem, plan)` lists every broken rule of the staged transition:
    authority   a beneficiary has a required baseline replica, a pin, or direct demand
                (correlation-only demand never evicts)
    victims     live and managed, on a host whose actuator can drain and unload, not pinned
                there, past their minimum residency (an unknown load time protects), and of
                strictly lower priority than the beneficiary; a relocated victim instead is
                placed by the plan on the host it moves to
    budget      at most policy.max_evictions_per_plan evictions, no victim named twice
    future fit  on the freed host, with the victims gone and the plan's placements live, the
                beneficiaries fit both memory ledgers, the slots, every occupant's colocation
                ceiling, the exclusions and the known free disk
`level_values(problem, pairs)` scores the replica levels (DESIGN.md levels 1-2) of any set of
(model, host) pairs, fixed replicas included, with its own arithmetic.
`staged_optimum(problem)` extends reference.py's HiGHS program with eviction and staging
variables: the lexicographic optimum of the future fleet's replica levels, an upper bound for
every staged plan (and never below the optimum without eviction).

The only things shared with the planner are the inputs every reference shares: the snapshot,
the desired counts (`problem.targets`), the fixed replicas (`problem.fixed`, re-derived by
reference.py's program) and the eligibility filter.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np

from grid.fleet.models import LIVE_STATES, Evidence, Host, ModelProfile, Plan, ResidencyState
from grid.planner.eligibility import host_refusals, pair_refusals
from grid.planner.problem import PlacementProblem
from tests.planner.reference import (
    _allocatable,
    _cached,
    _excluded,
    _footprint,
    _Program,
    _runtimes,
)
from tests.planner.reference import harm_order as _harm_order

Key = tuple[str, str]


# ----------------------------------------------------------------------------- level values


def level_values(problem: PlacementProblem, pairs: Iterable[Key]) -> dict[str, int]:
    """Replica levels of these placements (fixed replicas added), from DESIGN.md's text."""
    snap = problem.snapshot
    profiles = {m.model_id: m for m in snap.models}
    chosen = set(pairs) | {(f.model_id, f.host_id) for f in problem.fixed}
    counts = Counter(m for m, _h in chosen)
    desired = {m: t.desired for m, t in problem.targets.items()}
    base = {m: t.baseline for m, t in problem.targets.items()}
    evidence = {m: t.evidence for m, t in problem.targets.items()}
    harm = _harm_order(snap)
    out = {"pinned": sum(1 for m, h in chosen if h in profiles[m].pinned_hosts)}
    for p in sorted({m.priority for m in snap.models}, reverse=True):
        members = sorted(m for m, prof in profiles.items() if prof.priority == p)
        for k in range(1, max((base[m] for m in members), default=0) + 1):
            out[f"p{p}:baseline:{k}"] = sum(1 for m in members if base[m] >= k and counts[m] >= k)
        direct = [m for m in members if evidence[m] is Evidence.DIRECT]
        for k in sorted({k for m in direct for k in range(base[m] + 1, desired[m] + 1)}):
            ids = [m for m in direct if base[m] < k <= desired[m] and counts[m] >= k]
            out[f"p{p}:direct:{k}"] = len(ids)
            out[f"p{p}:direct:{k}:harm"] = sum(harm[m] for m in ids)
        inferred = [m for m in members if evidence[m] is Evidence.INFERRED and desired[m] > base[m]]
        if inferred:
            out[f"p{p}:inferred"] = sum(
                max(0, min(counts[m], desired[m]) - base[m]) for m in inferred
            )
    return out


def lexicographic(order: list[str], a: dict[str, int], b: dict[str, int]) -> int:
    """1 if `a` is better than `b` on the replica levels named in `order` (all maximized)."""
    for name in order:
        if a.get(name, 0) != b.get(name, 0):
            return 1 if a.get(name, 0) > b.get(name, 0) else -1
    return 0


# ----------------------------------------------------------------------------- the transition


def beneficiaries(plan: Plan) -> set[Key]:
    """The (model, host) pairs the plan stages: they count as replicas of the future fleet."""
    return {(p.beneficiary_model_id, p.host_id) for p in plan.preemptions}


def staged_problems(problem: PlacementProblem, plan: Plan) -> list[str]:
    snap = problem.snapshot
    hosts = {h.host_id: h for h in snap.hosts}
    profiles = {m.model_id: m for m in snap.models}
    placed = {(a.model_id, a.host_id) for a in plan.assignments}
    out: list[str] = []
    victims = [(p.victim_model_id, p.host_id) for p in plan.preemptions]
    if len(victims) != len(set(victims)):
        out.append("a victim is named twice")
    evictions = sum(1 for p in plan.preemptions if p.relocated_to is None)
    if len(plan.preemptions) > snap.policy.max_evictions_per_plan:
        out.append(f"{evictions} evictions exceed the per-plan budget")
    for p in plan.preemptions:
        host, prof = hosts.get(p.host_id), profiles.get(p.beneficiary_model_id)
        if host is None or prof is None:
            out.append(f"{p}: unknown host or beneficiary")
            continue
        target = problem.targets[prof.model_id]
        if target.evidence is not Evidence.DIRECT and not (target.baseline or prof.pinned_hosts):
            out.append(f"{prof.model_id} has no eviction authority")
        out += _victim_problems(problem, host, prof, p.victim_model_id, p.relocated_to is not None)
        if p.relocated_to is not None and (p.victim_model_id, p.relocated_to) not in placed:
            out.append(f"{p.victim_model_id} relocates to {p.relocated_to}, which lacks it")
        if (p.victim_model_id, p.host_id) in placed:
            out.append(f"victim {p.victim_model_id} stays in the plan on {p.host_id}")
    for host_id in sorted({p.host_id for p in plan.preemptions}):
        gone = {p.victim_model_id for p in plan.preemptions if p.host_id == host_id}
        arriving = sorted(
            {p.beneficiary_model_id for p in plan.preemptions if p.host_id == host_id}
        )
        out += _future_fit(
            snap.policy.memory_headroom_fraction, hosts[host_id], profiles, placed, gone, arriving
        )
    return out


def _sole_host(problem: PlacementProblem, prof: ModelProfile) -> bool:
    """Exactly one admitting host could ever take the model (the spec's hard override)."""
    snap = problem.snapshot
    return (
        sum(
            1
            for h in snap.hosts
            if not host_refusals(h, snap) and not pair_refusals(prof, h, cached=True)
        )
        == 1
    )


def _victim_problems(
    problem: PlacementProblem,
    host: Host,
    beneficiary: ModelProfile,
    victim: str,
    relocated: bool,
) -> list[str]:
    profiles = {m.model_id: m for m in problem.snapshot.models}
    where = f"{victim} on {host.host_id}"
    res = next((r for r in host.residencies if r.model_id == victim), None)
    if res is None or res.state not in LIVE_STATES or not res.is_managed:
        return [f"{where} is not a live managed residency"]
    out = []
    if not {"drain", "unload"} <= set(host.actuator_capabilities):
        out.append(f"{where}: the host cannot drain and unload")
    prof = profiles.get(victim)
    if prof is not None and host.host_id in prof.pinned_hosts:
        out.append(f"{where} is pinned there")
    if relocated:
        # make-before-break: only a serving incumbent moves; the reconciler waits out its
        # minimum residency before the drain; an equal or higher class only for a sole host
        if res.state is not ResidencyState.READY:
            out.append(f"{where} relocates although it is not ready")
        higher = prof is not None and prof.priority >= beneficiary.priority
        if higher and prof is not None and not _sole_host(problem, beneficiary):
            out.append(f"{where} (priority {prof.priority}) moves for a peer")
        return out
    if prof is not None and prof.min_residency_s > 0:
        now = problem.snapshot.now
        if res.loaded_at is None or now - res.loaded_at < prof.min_residency_s:
            out.append(f"{where} is younger than its minimum residency")
    priority = prof.priority if prof is not None else -1
    if priority >= beneficiary.priority:
        out.append(f"{where} (priority {priority}) is not below {beneficiary.model_id}")
    return out


def _future_fit(
    headroom_fraction: float,
    host: Host,
    profiles: dict[str, ModelProfile],
    placed: set[Key],
    gone: set[str],
    arriving: list[str],
) -> list[str]:
    """The future snapshot of the host: victims gone, plan placements live, arrivals new."""
    hid = host.host_id
    alloc = _allocatable(host)
    live = {r.model_id: r for r in host.residencies if r.state in LIVE_STATES}
    fixed_mb = sum(r.memory_mb for r in live.values() if not r.is_managed)
    remaining = {m: r for m, r in live.items() if m not in gone}
    plan_here = sorted(m for m, h in placed if h == hid)
    new_here = [m for m in plan_here if m not in live]

    def mem(m: str) -> int:
        return _footprint(profiles[m], host) if _runtimes(profiles[m], host) else 0

    out: list[str] = []
    incoming = sum(mem(m) for m in arriving)
    footprint = sum(max(mem(m), live[m].memory_mb if m in live else 0) for m in plan_here)
    if footprint + incoming > max(0, alloc - fixed_mb):
        out.append(f"{hid}: the arrivals exceed the desired footprint")
    live_mb = sum(r.memory_mb for r in remaining.values())
    if live_mb + sum(mem(m) for m in new_here) + incoming > alloc - headroom_fraction * alloc:
        out.append(f"{hid}: the arrivals do not fit the memory freed")
    occupants = set(remaining) | set(plan_here) | set(arriving)
    if host.max_models and len(occupants) > host.max_models:
        out.append(f"{hid}: the arrivals exceed the model slots")
    for m in sorted(occupants):
        ceiling = profiles[m].max_colocated_models if m in profiles else 0
        if ceiling and len(occupants) > ceiling:
            out.append(f"{hid}: {m} allows {ceiling} models")
    for a in arriving:
        for b in sorted(occupants - {a}):
            if b in profiles and _excluded(profiles[a], profiles[b]):
                out.append(f"{hid}: {a} may not share a host with {b}")
    if host.disk_free_mb is not None:
        fetch = [m for m in [*new_here, *arriving] if not _cached(profiles[m], host)]
        if sum(profiles[m].artifact_size_mb for m in fetch) > host.disk_free_mb:
            out.append(f"{hid}: the arrivals' artifacts exceed the free disk")
    return out


# ----------------------------------------------------------------------------- staged optimum


class _StagedProgram(_Program):
    """reference.py's program plus staged preemption, as an upper bound for staged plans.

    Extra variables: e[v,h] — a live managed residency v leaves host h (evicted, or relocated:
    its model may then be placed elsewhere by an ordinary x); s[m,h] — model m is staged on h
    and counts as a replica of the future fleet. Rows (a relaxation of the staging rules above:
    every staged plan that passes `staged_problems` and the validator is a solution):
        x[v,h] + e[v,h] ≤ 1;  e ≤ Σ_m s[m,h];  s[m,h] ≤ Σ_v e[v,h];  x[m,h] + s[m,h] ≤ 1
        e[v,h] + s[m,h] ≤ 1 unless v ranks below m (or h is m's sole compatible host)
        Σ_h s[m,h] ≤ authorized(m) − fixed(m);  Σ e ≤ max_evictions_per_plan
        future ledgers of h: Σ mem·x + Σ mem·s ≤ allocatable − fixed
                             Σ_new mem·x + Σ mem·s − Σ mem_v·e ≤ allocatable − headroom − live
                             Σ_new x + Σ s − Σ e ≤ max_models − |live|
                             s[m,h] ⇒ occupants ≤ m's own colocation ceiling
    """

    def _extra_variables(self) -> None:
        snap = self.snap
        targets = {m: (self.evidence[m], self.baseline[m], self.desired[m]) for m in self.models}
        self.s: dict[Key, int] = {}
        self.e: dict[Key, int] = {}
        for h in sorted(self.hosts.values(), key=lambda h: h.host_id):
            if host_refusals(h, snap) or not {"drain", "unload"} <= set(h.actuator_capabilities):
                continue
            for r in sorted(h.residencies, key=lambda r: r.model_id):
                if r.state not in LIVE_STATES or not r.is_managed:
                    continue
                prof = self.models.get(r.model_id)
                if prof is not None and h.host_id in prof.pinned_hosts:
                    continue
                young = (
                    prof is not None
                    and prof.min_residency_s > 0
                    and (r.loaded_at is None or snap.now - r.loaded_at < prof.min_residency_s)
                )
                if young and r.state is not ResidencyState.READY:
                    continue  # neither evictable nor relocatable
                self.e[(r.model_id, h.host_id)] = self.size + len(self.e)
            live = {r.model_id for r in h.residencies if r.state in LIVE_STATES}
            for m, prof in sorted(self.models.items()):
                evidence, base, _desired = targets[m]
                if evidence is not Evidence.DIRECT and not (base or prof.pinned_hosts):
                    continue
                if m in live or pair_refusals(prof, h, cached=_cached(prof, h)):
                    continue
                self.s[(m, h.host_id)] = -1  # numbered below, after every e
        self.size += len(self.e)
        for key in self.s:
            self.s[key] = self.size
            self.size += 1

    def _counted(self, model_id: str) -> list[tuple[Key, int]]:
        staged = [(k, i) for k, i in self.s.items() if k[0] == model_id]
        return super()._counted(model_id) + staged

    def staged_rows(self, problem: PlacementProblem) -> None:
        policy = self.snap.policy
        evictions = dict.fromkeys(self.e.values(), 1.0)
        if evictions:
            self._row(evictions, -np.inf, policy.max_evictions_per_plan)
        for m in sorted(self.models):
            staged = {i: 1.0 for k, i in self.s.items() if k[0] == m}
            target = problem.targets[m]
            prof = self.models[m]
            authorized = (
                target.desired
                if target.evidence is Evidence.DIRECT
                else min(target.desired, max(target.baseline, len(set(prof.pinned_hosts))))
            )
            self._row(staged, -np.inf, max(0, authorized - self._fixed_count(m)))
        for host_id in sorted(self.hosts):
            self._future_rows(problem, host_id)

    def _future_rows(self, problem: PlacementProblem, host_id: str) -> None:
        host = self.hosts[host_id]
        arrivals = {m: i for (m, h), i in self.s.items() if h == host_id}
        leaving = {v: i for (v, h), i in self.e.items() if h == host_id}
        if not arrivals:
            for i in leaving.values():
                self._row({i: 1.0}, -np.inf, 0)  # nobody arrives: nothing leaves for it
            return
        x = {k[0]: self.index[k] for k in self.keys if k[1] == host_id}
        live = {r.model_id: r for r in host.residencies if r.state in LIVE_STATES}
        for v, i in leaving.items():
            if v in x:
                self._row({x[v]: 1.0, i: 1.0}, -np.inf, 1)
            self._row({i: 1.0, **{j: -1.0 for j in arrivals.values()}}, -np.inf, 0)
        sole = {m: _sole_host(problem, self.models[m]) for m in arrivals}
        for m, i in arrivals.items():
            if m in x:
                self._row({x[m]: 1.0, i: 1.0}, -np.inf, 1)
            self._row({i: 1.0, **{j: -1.0 for j in leaving.values()}}, -np.inf, 0)
            for v, j in leaving.items():
                rank = self.models[v].priority if v in self.models else -1
                if rank >= self.models[m].priority and not sole[m]:
                    self._row({i: 1.0, j: 1.0}, -np.inf, 1)
        alloc = _allocatable(host)
        fixed_mb = sum(r.memory_mb for r in live.values() if not r.is_managed)
        mem_x = {x[m]: float(_memory(self.models[m], host)) for m in x}
        mem_s = {i: float(_footprint(self.models[m], host)) for m, i in arrivals.items()}
        self._row({**mem_x, **mem_s}, -np.inf, max(0, alloc - fixed_mb))
        new_x = {x[m]: mem_x[x[m]] for m in x if m not in live}
        freed = {j: -float(live[v].memory_mb) for v, j in leaving.items()}
        live_mb = sum(r.memory_mb for r in live.values())
        budget = alloc - self.snap.policy.memory_headroom_fraction * alloc - live_mb
        occupants = {x[m]: 1.0 for m in x if m not in live}
        occupants.update(dict.fromkeys(arrivals.values(), 1.0))
        occupants.update({j: -1.0 for j in leaving.values()})
        # The future ledgers bind only once something arrives (a host may be over its live
        # budget today): each row is relaxed by a big M unless its arrival s is staged.
        big_mb = sum(mem_x.values()) + sum(mem_s.values()) + live_mb + abs(budget) + 1
        big_n = len(self.models) + 2 * len(live) + host.max_models + 1
        for m, i in arrivals.items():
            row = {**new_x, **mem_s, **freed}
            row[i] = row[i] + big_mb
            self._row(row, -np.inf, budget + big_mb)
            limits = [host.max_models] if host.max_models else []
            if self.models[m].max_colocated_models:
                limits.append(self.models[m].max_colocated_models)
            for limit in limits:  # s ⇒ |live| + occupants ≤ the slots / m's own ceiling
                row = dict(occupants)
                row[i] = row[i] + big_n
                self._row(row, -np.inf, limit - len(live) + big_n)


def _memory(prof: ModelProfile, host: Host) -> int:
    res = next(
        (r for r in host.residencies if r.model_id == prof.model_id and r.state in LIVE_STATES),
        None,
    )
    if res is None:
        return _footprint(prof, host)
    own = (
        prof.runtime_memory_mb.get(res.runtime, prof.memory_mb)
        if res.runtime
        else _footprint(prof, host)
    )
    return max(own, res.memory_mb)


def staged_optimum(problem: PlacementProblem) -> dict[str, int]:
    """Lexicographic optimum of the replica levels of the future fleet, staging included."""
    program = _StagedProgram(problem)
    program.staged_rows(problem)
    return program.solve().values
