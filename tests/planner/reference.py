"""An independent reference optimum of the replica levels, for small fleets.

The acceptance test runs it on clean fleets (no live residencies: every placement is new and
nothing is fixed); it also handles live residencies, which the property tests use. The hard
constraints are written again here from `problem.py`'s docstring and the snapshot itself —
allocatable memory, both ledgers, slots, colocation ceilings and reciprocal exclusions,
cumulative artifact disk, replica bounds, and the spec's pin reservation (at most
desired − |pins| replicas away from the pinned hosts) — and the replica levels again from
DESIGN.md. Only the candidate pairs (the eligibility filter, `problem.candidates`), the host
admission filter (`eligibility.host_refusals`) and the desired counts (`targets`) are shared.
The solver is HiGHS through `scipy.optimize.milp`, one integer program per level, each earlier
level held at its optimum: nothing here touches OR-Tools or the engines.

Variables: x[m,h] ∈ {0,1} per candidate pair; y[m,k] ∈ {0,1} for k = 1..K(m), nonincreasing
in k with Σ_k y[m,k] = fixed(m) + Σ_h x[m,h], so y[m,k] = [replicas(m) ≥ k] exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import lil_matrix

from grid.fleet.models import (
    LIVE_STATES,
    Assignment,
    Evidence,
    FleetSnapshot,
    Host,
    HostState,
    ModelProfile,
    Plan,
    Residency,
    ResidencyState,
    SolverReport,
    Unsatisfied,
)
from grid.planner.eligibility import host_refusals
from grid.planner.problem import PlacementProblem

Key = tuple[str, str]


@dataclass(frozen=True)
class RefLevel:
    name: str
    coefficients: dict[int, float]  # variable index -> weight (all levels are maximized)
    constant: int = 0  # the part no decision can change (fixed replicas)


@dataclass(frozen=True)
class ReferenceResult:
    values: dict[str, int]  # replica level name -> optimal value, in lexicographic order
    placement: frozenset[Key]  # one placement of the variable pairs that reaches every value


# ----------------------------------------------------------------------------- fleet facts


def _allocatable(host: Host) -> int:
    raw = max(0, host.capacity_mb - host.reserved_mb - host.external_mb)
    if host.state is HostState.THROTTLED:
        return math.floor(raw * host.throttle_fraction)
    return raw


def _runtimes(model: ModelProfile, host: Host) -> list[str]:
    return sorted(set(model.runtimes or host.runtimes) & set(host.runtimes))


def _footprint(model: ModelProfile, host: Host) -> int:
    """The smallest footprint over the runtimes both sides support."""
    return min(model.runtime_memory_mb.get(rt, model.memory_mb) for rt in _runtimes(model, host))


def _cached(model: ModelProfile, host: Host) -> bool:
    return model.model_id in host.cached_models or any(
        r.model_id == model.model_id and r.state is ResidencyState.CACHED for r in host.residencies
    )


def _live(host: Host) -> list[Residency]:
    return [r for r in host.residencies if r.state in LIVE_STATES]


def _excluded(a: ModelProfile, b: ModelProfile) -> bool:
    return b.model_id in a.colocation_excludes or a.model_id in b.colocation_excludes


def harm_order(snap: FleetSnapshot) -> dict[str, int]:
    """Rank 0..n-1 by measured service harm; among exact ties the lower model ID ranks higher."""

    def harm(model: ModelProfile) -> tuple[float, ...]:
        d = snap.demand.get(model.model_id)
        if d is None:
            return (0.0,) * 5
        ratio = d.p95_ms / model.latency_slo_ms if model.latency_slo_ms else 0.0
        return (d.queue_depth, ratio, d.error_rate, d.offered_concurrency, d.rpm)

    by_id_desc = sorted(snap.models, key=lambda m: m.model_id, reverse=True)
    ordered = sorted(by_id_desc, key=harm)  # stable: equal harm keeps higher IDs first
    return {m.model_id: rank for rank, m in enumerate(ordered)}


# ----------------------------------------------------------------------------- the program


class _Program:
    def __init__(self, problem: PlacementProblem) -> None:
        snap = problem.snapshot
        self.snap = snap
        self.hosts = {h.host_id: h for h in snap.hosts}
        self.models = {m.model_id: m for m in snap.models}
        self.desired = {m: t.desired for m, t in problem.targets.items()}
        self.baseline = {m: t.baseline for m, t in problem.targets.items()}
        self.evidence = {m: t.evidence for m, t in problem.targets.items()}
        # fixed replicas: unmanaged ready residencies of configured models on admitting hosts
        self.fixed: list[Key] = sorted(
            (r.model_id, h.host_id)
            for h in snap.hosts
            if not host_refusals(h, snap)
            for r in h.residencies
            if r.model_id in self.models and not r.is_managed and r.state is ResidencyState.READY
        )
        self.keys: list[Key] = sorted(problem.candidates)
        self.index: dict[Key, int] = {k: i for i, k in enumerate(self.keys)}
        n = len(self.keys)
        self.y: dict[tuple[str, int], int] = {}
        for model_id in sorted(self.models):
            for k in range(1, max(self.desired[model_id], self._fixed_count(model_id)) + 1):
                self.y[(model_id, k)] = n + len(self.y)
        self.size = n + len(self.y)
        self.rows: list[tuple[dict[int, float], float, float]] = []
        self._extra_variables()
        for host_id in sorted(self.hosts):
            self._host_constraints(host_id)
        for model_id in sorted(self.models):
            self._model_constraints(model_id)

    def _fixed_count(self, model_id: str, off_hosts: set[str] | None = None) -> int:
        return sum(
            1 for m, h in self.fixed if m == model_id and (off_hosts is None or h not in off_hosts)
        )

    def _row(self, coefs: dict[int, float], lo: float, hi: float) -> None:
        if coefs:
            self.rows.append((coefs, lo, hi))

    def _implies_at_most(self, trigger: int, counted: list[int], limit: int) -> None:
        """x[trigger] = 1  ⇒  Σ counted ≤ limit   (trigger ∈ counted), as one big-M row."""
        if len(counted) <= limit:
            return
        big = len(counted) - limit
        coefs = {i: 1.0 for i in counted}
        coefs[trigger] += big
        self._row(coefs, -np.inf, limit + big)

    def _host_constraints(self, host_id: str) -> None:
        host = self.hosts[host_id]
        keys = [k for k in self.keys if k[1] == host_id]
        if not keys:
            return
        x = {k: self.index[k] for k in keys}
        live = _live(host)
        unmanaged = [r for r in live if not r.is_managed]
        live_models = {r.model_id for r in live}
        fixed_models = {r.model_id for r in unmanaged}
        resident = {r.model_id: r for r in live}
        # a candidate with a live residency of its model is a kept incumbent, else it is new
        new = [k for k in keys if k[0] not in resident]
        mem: dict[Key, float] = {}
        for k in keys:
            prof = self.models[k[0]]
            res = resident.get(k[0])
            if res is None:
                mem[k] = float(_footprint(prof, host))
            else:
                runtime = res.runtime or min(
                    _runtimes(prof, host),
                    key=lambda rt: (prof.runtime_memory_mb.get(rt, prof.memory_mb), rt),
                )
                own = prof.runtime_memory_mb.get(runtime, prof.memory_mb)
                mem[k] = float(max(own, res.memory_mb))
        alloc = _allocatable(host)
        headroom = self.snap.policy.memory_headroom_fraction * alloc
        fixed_mb = sum(r.memory_mb for r in unmanaged)
        live_mb = sum(r.memory_mb for r in live)
        # desired footprint after unmanaged use; make-before-break for new allocations
        self._row({x[k]: mem[k] for k in keys}, -np.inf, max(0, alloc - fixed_mb))
        self._row(
            {x[k]: mem[k] for k in new}, -np.inf, max(0, math.floor(alloc - live_mb - headroom))
        )
        # model slots: unmanaged models hold theirs; new ones need a slot free of live ones
        if host.max_models:
            self._row(
                {x[k]: 1.0 for k in keys}, -np.inf, max(0, host.max_models - len(fixed_models))
            )
            self._row({x[k]: 1.0 for k in new}, -np.inf, max(0, host.max_models - len(live_models)))
        # ceilings of residents that stay (unmanaged) or are still live (for new placements)
        for other in sorted(fixed_models):
            ceiling = self.models[other].max_colocated_models if other in self.models else 0
            if ceiling:
                self._row({x[k]: 1.0 for k in keys}, -np.inf, max(0, ceiling - len(fixed_models)))
        for other in sorted(live_models):
            ceiling = self.models[other].max_colocated_models if other in self.models else 0
            if ceiling:
                self._row({x[k]: 1.0 for k in new}, -np.inf, max(0, ceiling - len(live_models)))
        # each placed model's own ceiling, counting itself
        everyone = [x[k] for k in keys]
        newcomers = [x[k] for k in new]
        for k in keys:
            ceiling = self.models[k[0]].max_colocated_models
            if not ceiling:
                continue
            self._implies_at_most(x[k], everyone, ceiling - len(fixed_models))
            if k in new:
                self._implies_at_most(x[k], newcomers, ceiling - len(live_models))
        for i, a in enumerate(keys):
            for b in keys[i + 1 :]:
                if _excluded(self.models[a[0]], self.models[b[0]]):
                    self._row({x[a]: 1.0, x[b]: 1.0}, -np.inf, 1)
        if host.disk_free_mb is not None:
            disk = {
                x[k]: float(self.models[k[0]].artifact_size_mb)
                for k in new
                if not _cached(self.models[k[0]], host)
            }
            self._row(disk, -np.inf, host.disk_free_mb)

    # -- hooks for programs that count more than placements (reference_staged.py) ---------
    def _extra_variables(self) -> None:
        """Allocate further variables (indices from self.size) before the constraints."""

    def _counted(self, model_id: str) -> list[tuple[Key, int]]:
        """The variables that count as the model's replicas, each with its (model, host)."""
        return [(k, self.index[k]) for k in self.keys if k[0] == model_id]

    def _model_constraints(self, model_id: str) -> None:
        counted = self._counted(model_id)
        placed = {i: 1.0 for _k, i in counted}
        fixed = self._fixed_count(model_id)
        self._row(dict(placed), -np.inf, max(0, self.desired[model_id] - fixed))
        # a replica is reserved for each pinned host: a pin that cannot be honoured is
        # reported, never moved elsewhere (the spec; not in problem.py's docstring)
        pins = set(self.models[model_id].pinned_hosts)
        if pins:
            unpinned = {i: 1.0 for k, i in counted if k[1] not in pins}
            room = self.desired[model_id] - len(pins) - self._fixed_count(model_id, pins)
            self._row(unpinned, -np.inf, max(0, room))
        # Σ_k y[m,k] = fixed(m) + placed(m), y nonincreasing in k
        link = {i: -1.0 for i in placed}
        k = 1
        while (model_id, k) in self.y:
            link[self.y[(model_id, k)]] = 1.0
            if k > 1:
                self._row({self.y[(model_id, k)]: 1.0, self.y[(model_id, k - 1)]: -1.0}, -np.inf, 0)
            k += 1
        if k > 1:
            self._row(link, fixed, fixed)

    # -- levels -------------------------------------------------------------------------
    def levels(self) -> list[RefLevel]:
        pinned = {
            i: 1.0
            for m in sorted(self.models)
            for k, i in self._counted(m)
            if k[1] in self.models[m].pinned_hosts
        }
        pinned_fixed = sum(1 for m, h in self.fixed if h in self.models[m].pinned_hosts)
        out = [RefLevel("pinned", pinned, pinned_fixed)]
        harm = harm_order(self.snap)
        for p in sorted({m.priority for m in self.models.values()}, reverse=True):
            members = sorted(m for m, prof in self.models.items() if prof.priority == p)
            # required replicas round by round: every model's k-th before any (k+1)-th
            for k in range(1, max((self.baseline[m] for m in members), default=0) + 1):
                base = {self.y[(m, k)]: 1.0 for m in members if self.baseline[m] >= k}
                out.append(RefLevel(f"p{p}:baseline:{k}", base))
            direct = [m for m in members if self.evidence[m] is Evidence.DIRECT]
            rounds = sorted(
                {k for m in direct for k in range(self.baseline[m] + 1, self.desired[m] + 1)}
            )
            for k in rounds:
                ids = [m for m in direct if self.baseline[m] < k <= self.desired[m]]
                out.append(RefLevel(f"p{p}:direct:{k}", {self.y[(m, k)]: 1.0 for m in ids}))
                out.append(
                    RefLevel(f"p{p}:direct:{k}:harm", {self.y[(m, k)]: float(harm[m]) for m in ids})
                )
            inferred = [
                m
                for m in members
                if self.evidence[m] is Evidence.INFERRED and self.desired[m] > self.baseline[m]
            ]
            if inferred:
                coefs = {
                    self.y[(m, k)]: 1.0
                    for m in inferred
                    for k in range(self.baseline[m] + 1, self.desired[m] + 1)
                }
                out.append(RefLevel(f"p{p}:inferred", coefs))
        return out

    # -- solving ------------------------------------------------------------------------
    def _solve(
        self, objective: dict[int, float], held: Sequence[tuple[RefLevel, int]]
    ) -> np.ndarray:
        rows = list(self.rows) + [(lvl.coefficients, value - 0.5, np.inf) for lvl, value in held]
        matrix = lil_matrix((max(1, len(rows)), self.size))
        lo = np.full(max(1, len(rows)), -np.inf)
        hi = np.full(max(1, len(rows)), np.inf)
        for r, (coefs, low, high) in enumerate(rows):
            for col, weight in coefs.items():
                matrix[r, col] = weight
            lo[r], hi[r] = low, high
        c = np.zeros(self.size)
        for col, weight in objective.items():
            c[col] = -weight  # milp minimizes
        result = milp(
            c,
            constraints=LinearConstraint(matrix.tocsr(), lo, hi),
            integrality=np.ones(self.size),
            bounds=Bounds(0, 1),
            options={"disp": False, "mip_rel_gap": 0.0},
        )
        if not result.success:
            raise RuntimeError(f"reference MILP failed: {result.message}")
        solution: np.ndarray = np.round(result.x).astype(int)
        return solution

    def solve(self) -> ReferenceResult:
        held: list[tuple[RefLevel, int]] = []  # (level, optimum of its variable part)
        values: dict[str, int] = {}
        x = np.zeros(self.size, dtype=int)
        for level in self.levels():
            if self.size:
                x = self._solve(level.coefficients, held)
            variable = round(sum(w * x[i] for i, w in level.coefficients.items()))
            values[level.name] = level.constant + variable
            held.append((level, variable))
        placement = frozenset(k for k, i in self.index.items() if x[i] == 1)
        return ReferenceResult(values, placement)


def reference_optimum(problem: PlacementProblem) -> ReferenceResult:
    """Lexicographic optimum of every replica level (harm tie-breaks included)."""
    return _Program(problem).solve()


def reference_plan(problem: PlacementProblem, placement: frozenset[Key]) -> Plan:
    """A placement as a Plan document: fixed replicas kept, every shortfall and pin declared."""
    snap = problem.snapshot
    hosts = {h.host_id: h for h in snap.hosts}
    assignments = []
    replicas: dict[str, set[str]] = {m.model_id: set() for m in snap.models}
    for model_id, host_id in _Program(problem).fixed:
        unmanaged = next(r for r in hosts[host_id].residencies if r.model_id == model_id)
        assignments.append(
            Assignment(
                model_id=model_id,
                host_id=host_id,
                memory_mb=unmanaged.memory_mb,
                runtime=unmanaged.runtime or "external",
                existing=True,
            )
        )
        replicas[model_id].add(host_id)
    for model_id, host_id in sorted(placement):
        prof = problem.model_by_id[model_id]
        host = hosts[host_id]
        res = next((r for r in _live(host) if r.model_id == model_id), None)
        runtime = min(
            _runtimes(prof, host),
            key=lambda rt: (prof.runtime_memory_mb.get(rt, prof.memory_mb), rt),
        )
        if res is not None and res.runtime:
            runtime = res.runtime
        memory = prof.runtime_memory_mb.get(runtime, prof.memory_mb)
        assignments.append(
            Assignment(
                model_id=model_id,
                host_id=host_id,
                memory_mb=max(memory, res.memory_mb) if res is not None else memory,
                runtime=runtime,
                existing=res is not None,
            )
        )
        replicas[model_id].add(host_id)
    unsatisfied = []
    for prof in snap.models:
        missing = problem.targets[prof.model_id].desired - len(replicas[prof.model_id])
        if missing > 0:
            unsatisfied.append(
                Unsatisfied(
                    model_id=prof.model_id,
                    code="insufficient_capacity",
                    missing_replicas=missing,
                    message="reference",
                )
            )
        for pin in sorted(set(prof.pinned_hosts) - replicas[prof.model_id]):
            unsatisfied.append(
                Unsatisfied(
                    model_id=prof.model_id,
                    code="pinned_host_unavailable",
                    missing_replicas=0,
                    message="reference",
                    host_id=pin,
                )
            )
    return Plan(
        assignments=assignments,
        unsatisfied=unsatisfied,
        solver=SolverReport(engine="reference", status="OPTIMAL", wall_ms=0.0),
    )
