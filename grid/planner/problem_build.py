"""Building the placement problem (grid/planner/problem.py) from a snapshot (pure).

`build_problem` decides every (model, host) pair: a candidate with its runtime, footprint and
flags, or the refusal codes that explain why not. Hosts without residencies that agree on
everything `_pair` reads but their ID form one *build shape*, decided once per model; hosts
with residencies are decided pair by pair. The problem's formulation is in problem.py.
"""

from __future__ import annotations

import operator
from collections import deque
from dataclasses import dataclass, field
from itertools import repeat

from grid.fleet import (
    LIVE_STATES,
    REUSABLE_STATES,
    FleetSnapshot,
    Host,
    ModelProfile,
    Residency,
    ResidencyState,
)
from grid.planner.eligibility import compatible_runtimes, pair_refusals
from grid.planner.gcpause import gc_paused
from grid.planner.problem import (
    NOT_DESIRED,
    Candidate,
    FixedReplica,
    HostBudget,
    PlacementProblem,
    choose_runtime,
    exclusion_partners,
    footprint_mb,
    host_budget,
    smallest_runtime,
)
from grid.planner.refusals import RefusalTable
from grid.planner.targets import Target, compute_targets

HostSignature = tuple[tuple[str, ...], ...]


def _signature(host: Host) -> HostSignature:
    """Everything `eligibility.pair_refusals` reads from a host, but its ID."""
    return (
        tuple(host.runtimes),
        tuple(sorted(host.backends)),
        tuple(sorted(host.data_tiers)),
        tuple(sorted(host.tags)),
        tuple(sorted(host.actuator_capabilities)),
        tuple(map(str, host.devices_mb)),  # the GPU filter (gpus.pair_refusal)
    )


class _PairRules:
    """`compatible_runtimes` and `pair_refusals` memoized per (model, host signature): the
    rules themselves stay in eligibility.py; a fleet of 1,000 hosts has a few dozen distinct
    host signatures, so the build asks them a few thousand times instead of 200,000. The
    returned lists are shared: never mutate them."""

    def __init__(self) -> None:
        self._runtimes: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        self._refusals: dict[tuple[str, HostSignature, bool], list[str]] = {}

    def runtimes(self, model: ModelProfile, host: Host, signature: HostSignature) -> list[str]:
        key = (model.model_id, signature[0])
        found = self._runtimes.get(key)
        if found is None:
            found = self._runtimes[key] = compatible_runtimes(model, host)
        return found

    def refusals(
        self,
        model: ModelProfile,
        host: Host,
        signature: HostSignature,
        cached: bool,
        runtimes: list[str],
    ) -> list[str]:
        if model.allowed_hosts or model.denied_hosts:  # the host ID matters: no memo
            return pair_refusals(model, host, cached=cached, runtimes=runtimes)
        key = (model.model_id, signature, cached)
        found = self._refusals.get(key)
        if found is None:
            found = self._refusals[key] = pair_refusals(
                model, host, cached=cached, runtimes=runtimes
            )
        return found


def _pair(
    model: ModelProfile,
    host: Host,
    budget: HostBudget,
    partners: frozenset[str],
    residency: Residency | None,
    rules: _PairRules,
    signature: HostSignature,
) -> tuple[Candidate | None, list[str]]:
    cached = model.model_id in host.cached_models or (
        residency is not None and residency.state is ResidencyState.CACHED
    )
    refusals: list[str] = []
    incumbent: ResidencyState | None = None
    runtimes = rules.runtimes(model, host, signature)
    runtime = smallest_runtime(model, runtimes)
    if residency is not None and residency.state in LIVE_STATES:
        reusable = (
            residency.is_managed
            and residency.state in REUSABLE_STATES
            and (
                model.artifact_sha256 is None or residency.artifact_sha256 == model.artifact_sha256
            )
            and (residency.runtime is None or residency.runtime in runtimes)
        )
        if not reusable:
            refusals.append("residency_not_reusable")
        else:
            incumbent = residency.state
            runtime = residency.runtime or runtime
    refusals += rules.refusals(model, host, signature, cached or incumbent is not None, runtimes)
    # Exclusions against inventory that stays are static: unmanaged residencies always stay,
    # and every live residency is still there when a new placement starts.
    neighbours = budget.fixed_models if incumbent is not None else budget.live_models
    if partners and not partners.isdisjoint(neighbours):
        refusals.append("colocation_excluded")
    if incumbent is None and budget.new_cap == 0:
        refusals.append("colocation_or_slots_full")
    if budget.desired_cap == 0:
        refusals.append("colocation_or_slots_full")
    if refusals or runtime is None:
        return None, sorted(set(refusals))
    memory = footprint_mb(model, runtime)
    if incumbent is not None and residency is not None:
        memory = max(memory, residency.memory_mb)
    return (
        Candidate(
            model_id=model.model_id,
            host_id=host.host_id,
            runtime=runtime,
            memory_mb=memory,
            new_mb=0 if incumbent is not None else memory,
            disk_mb=0 if (cached or incumbent is not None) else model.artifact_size_mb,
            incumbent=incumbent,
            cached=cached,
            pinned=host.host_id in model.pinned_hosts,
        ),
        [],
    )


Tail = tuple[str, int, int, int, None, bool, bool]  # a Candidate's fields after its key


@dataclass
class _Shape:
    """One build shape's candidates and refusals, in model order (see `build_problem`)."""

    model_ids: list[str]  # the models with a candidate on every host of the shape
    tails: list[Tail]  # each candidate's fields after its key
    refused: dict[str, list[str]]
    per_host: list[str]  # models whose allow, deny or pin lists name hosts: decided per host
    index: int
    lists: list[list[Candidate]] = field(default_factory=list)  # by_model's list per model


def _host_specific(model: ModelProfile) -> bool:
    return bool(model.allowed_hosts or model.denied_hosts or model.pinned_hosts)


def build_problem(
    snap: FleetSnapshot, targets: dict[str, Target] | None = None
) -> PlacementProblem:
    """Candidates and refusals of every (model, host) pair.

    Hosts without residencies that agree on everything `_pair` reads but their ID (runtimes,
    backends, tiers, tags, actuator, cached weights, slot cap; admitting) form one *build
    shape*: its candidates are decided once per model, and each host of the shape gets a copy
    with its own ID (a model whose allow, deny or pin lists name hosts is decided per host).
    Hosts with residencies are decided pair by pair. The result, its order included, is the
    same as deciding every pair on its own."""
    with gc_paused():
        return _build_problem(snap, targets)


def _build_problem(snap: FleetSnapshot, targets: dict[str, Target] | None) -> PlacementProblem:
    builder = _Builder(snap, targets if targets is not None else compute_targets(snap))
    for host, budget in zip(builder.hosts, builder.budgets, strict=True):
        builder.note_fixed(host, budget)
        if budget.refusals:  # the host takes no new work: skip the pair filters
            builder.not_admitting(host.host_id, budget)
            continue
        signature = _signature(host)
        if host.residencies:  # decided pair by pair
            builder.pairwise(host, budget, signature)
            continue
        shape = builder.shape_of(host, budget, signature)
        if shape.per_host:
            builder.shape_and_host(host, budget, signature, shape)
        else:
            builder.copy_shape(host.host_id, shape)
    return builder.problem()


_make = tuple.__new__


class _Builder:
    """The problem under construction, host by host (see `build_problem`)."""

    def __init__(self, snap: FleetSnapshot, targets: dict[str, Target]) -> None:
        self.snap, self.targets = snap, targets
        self.models = sorted(snap.models, key=lambda m: (-m.priority, m.model_id))
        self.hosts = sorted(snap.hosts, key=lambda h: h.host_id)
        self.excluded = frozenset(
            frozenset((m.model_id, other))
            for m in self.models
            for other in m.colocation_excludes
            if other != m.model_id
        )
        self.partners = exclusion_partners(self.excluded)
        self.profiles = {m.model_id: m for m in self.models}
        self.budgets = [host_budget(h, snap, self.profiles) for h in self.hosts]
        self.candidates: dict[tuple[str, str], Candidate] = {}
        self.refusals = RefusalTable()
        self.by_model: dict[str, list[Candidate]] = {m.model_id: [] for m in self.models}
        self.by_host: dict[str, list[Candidate]] = {}
        self.fixed: list[FixedReplica] = []
        self.rules = _PairRules()
        self.shapes: dict[object, _Shape] = {}
        self.host_shape: dict[str, int] = {}
        self.shaped_per_host: dict[str, tuple[int, list[str]]] = {}  # with per-host models
        self.not_admitting_rows: dict[tuple[str, ...], dict[str, list[str]]] = {}

    def pair(
        self,
        model: ModelProfile,
        host: Host,
        budget: HostBudget,
        signature: HostSignature,
        residency: Residency | None,
    ) -> tuple[Candidate | None, list[str]]:
        partners = self.partners.get(model.model_id, frozenset())
        return _pair(model, host, budget, partners, residency, self.rules, signature)

    def note_fixed(self, host: Host, budget: HostBudget) -> None:
        """Unmanaged READY residencies of configured models on an admitting host."""
        for res in host.residencies:
            prof = self.profiles.get(res.model_id)
            if (
                prof is not None
                and not res.is_managed
                and res.state is ResidencyState.READY
                and budget.admitting
            ):
                runtime = res.runtime or choose_runtime(prof, host) or "external"
                self.fixed.append(FixedReplica(res.model_id, host.host_id, res.memory_mb, runtime))

    def not_admitting(self, host_id: str, budget: HostBudget) -> None:
        """Every model refused with the host's reasons (one shared row per set of reasons)."""
        shared = self.not_admitting_rows.get(budget.refusals)
        if shared is None:
            why = list(budget.refusals)
            shared = self.not_admitting_rows[budget.refusals] = {
                m.model_id: NOT_DESIRED if self.targets[m.model_id].desired == 0 else why
                for m in self.models
            }
        self.refusals.set_host(host_id, shared)

    def pairwise(self, host: Host, budget: HostBudget, signature: HostSignature) -> None:
        residencies = {r.model_id: r for r in host.residencies}
        own: list[Candidate] = []
        refused: dict[str, list[str]] = {}
        for model in self.models:
            if self.targets[model.model_id].desired == 0:
                refused[model.model_id] = NOT_DESIRED
                continue
            cand, why = self.pair(model, host, budget, signature, residencies.get(model.model_id))
            if cand is None:
                refused[model.model_id] = why
            else:
                own.append(cand)
        self._add(host.host_id, own, refused)

    def shape_of(self, host: Host, budget: HostBudget, signature: HostSignature) -> _Shape:
        """The host's build shape, its models decided on this host the first time."""
        key = (signature, tuple(sorted(host.cached_models)), host.max_models)
        shape = self.shapes.get(key)
        if shape is not None:
            return shape
        shape = self.shapes[key] = _Shape([], [], {}, [], len(self.shapes))
        for model in self.models:
            if self.targets[model.model_id].desired == 0:
                shape.refused[model.model_id] = NOT_DESIRED
            elif _host_specific(model):
                shape.per_host.append(model.model_id)
            else:
                cand, why = self.pair(model, host, budget, signature, None)
                if cand is None:
                    shape.refused[model.model_id] = why
                else:
                    shape.model_ids.append(model.model_id)
                    shape.tails.append(cand[2:])  # type: ignore[arg-type]
        shape.lists = [self.by_model[m] for m in shape.model_ids]
        return shape

    def copy_shape(self, host_id: str, shape: _Shape) -> None:
        """The shape's candidates with this host's ID (C-level maps: once per candidate)."""
        self.host_shape[host_id] = shape.index
        keys = list(zip(shape.model_ids, repeat(host_id)))
        own = list(map(_make, repeat(Candidate), map(operator.add, keys, shape.tails)))
        if own:
            self.candidates.update(zip(keys, own, strict=True))
            deque(map(list.append, shape.lists, own), maxlen=0)
            self.by_host[host_id] = own
        self.refusals.set_host(host_id, shape.refused)

    def shape_and_host(
        self, host: Host, budget: HostBudget, signature: HostSignature, shape: _Shape
    ) -> None:
        """The shape's decisions, and the host-specific models decided on this host."""
        host_id = host.host_id
        self.shaped_per_host[host_id] = (shape.index, shape.per_host)
        decided: dict[str, Candidate | list[str]] = {
            m: _make(Candidate, (m, host_id, *tail))
            for m, tail in zip(shape.model_ids, shape.tails, strict=True)
        }
        decided.update(shape.refused)
        for model_id in shape.per_host:
            cand, why = self.pair(self.profiles[model_id], host, budget, signature, None)
            decided[model_id] = why if cand is None else cand
        own: list[Candidate] = []
        refused: dict[str, list[str]] = {}
        for model in self.models:
            found = decided[model.model_id]
            if isinstance(found, list):
                refused[model.model_id] = found
            else:
                own.append(found)
        self._add(host_id, own, refused)

    def _add(self, host_id: str, own: list[Candidate], refused: dict[str, list[str]]) -> None:
        _add_host(host_id, own, self.candidates, self.by_model, self.by_host)
        self.refusals.set_host(host_id, refused)

    def problem(self) -> PlacementProblem:
        problem = PlacementProblem(
            snapshot=self.snap,
            targets=self.targets,
            models=self.models,
            hosts=self.budgets,
            candidates=self.candidates,
            refusals=self.refusals,
            fixed=self.fixed,
            excluded_pairs=self.excluded,
            _by_model={m: cands for m, cands in self.by_model.items() if cands},
            _by_host=self.by_host,
        )
        # build_shapes: shape hosts without per-host models (equal candidates but for the
        # host ID: levels.py, types.py), shaped_per_host the others (narrow.py).
        problem.memo.update(
            build_shapes=self.host_shape, shaped_per_host=self.shaped_per_host, host_major=True
        )
        return problem


def _add_host(
    host_id: str,
    own: list[Candidate],
    candidates: dict[tuple[str, str], Candidate],
    by_model: dict[str, list[Candidate]],
    by_host: dict[str, list[Candidate]],
) -> None:
    if not own:
        return
    by_host[host_id] = own
    for cand in own:
        candidates[(cand.model_id, host_id)] = cand
        by_model[cand.model_id].append(cand)
