"""What the predictive cache reads from one snapshot and its authoritative plan (pure).

- the post-assignment disk ledger: each host's authenticated free disk less the artifact of
  every uncached new replica the plan places there (predictive transfers start from it and
  never race demanded loads for space); None where the host reports no free disk;
- future-compatible hosts for a model: admitting, managed, with the load actuator, statically
  compatible (runtime, backend, tier, tags, allow/deny) and large enough in raw allocatable
  memory, whatever live memory is in use now;
- the value of a transfer: confidence x pressure x the transfer seconds that can finish before
  the predicted demand (the learned lead; unknown lead: the whole transfer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

from grid.fleet import (
    LIVE_STATES,
    Evidence,
    FleetSnapshot,
    Host,
    ModelProfile,
    Ownership,
    Plan,
    Prediction,
    Residency,
    ResidencyState,
)
from grid.planner.eligibility import host_refusals, pair_refusals
from grid.planner.problem import allocatable_mb, choose_runtime, footprint_mb

LOAD_CAPABILITY = "load"


def transfer_s(snap: FleetSnapshot, profile: ModelProfile, host_id: str) -> float:
    """The host's learned artifact transfer time for the model's revision, or the profile's
    configured load estimate (an unknown host keeps the conservative prior)."""
    learned = snap.learned_startup.get(profile.model_id, {}).get(host_id)
    if learned is not None and learned.load_s is not None:
        return learned.load_s
    return profile.load_estimate_s


def counted_s(transfer: float, lead_s: float | None) -> float:
    """Transfer seconds that can finish before the predicted demand arrives."""
    return transfer if lead_s is None else min(transfer, lead_s)


def value_s(prediction: Prediction, counted: float) -> float:
    """Confidence- and pressure-weighted cold-start seconds a cached copy removes."""
    return prediction.confidence * prediction.offered_concurrency * counted


@dataclass
class Context:
    snap: FleetSnapshot
    plan: Plan
    free: dict[str, int | None] = field(default_factory=dict)  # post-assignment free disk
    _static: dict[tuple[str, str], str | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for host in self.snap.hosts:
            self.free[host.host_id] = host.disk_free_mb
        for a in self.plan.assignments:
            prof = self.profiles.get(a.model_id)
            placed = self.hosts.get(a.host_id)
            free = self.free.get(a.host_id)
            if prof is None or placed is None or free is None:
                continue
            if self.cached(prof, placed) or self.live(a.model_id, placed):
                continue
            self.free[a.host_id] = free - prof.artifact_size_mb

    @property
    def now(self) -> float:
        return self.snap.now

    @property
    def reserve_mb(self) -> int:
        return self.snap.policy.predictive_disk_reserve_mb

    @cached_property
    def profiles(self) -> dict[str, ModelProfile]:
        return {m.model_id: m for m in self.snap.models}

    @cached_property
    def hosts(self) -> dict[str, Host]:
        return {h.host_id: h for h in self.snap.hosts}

    @cached_property
    def planned(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for a in self.plan.assignments:
            out.setdefault(a.model_id, set()).add(a.host_id)
        return out

    @cached_property
    def demanded(self) -> set[str]:
        """Models with direct or queued demand, or serving a workload in the portfolio."""
        out = {
            m
            for m, d in self.snap.demand.items()
            if d.evidence is Evidence.DIRECT
            and (d.offered_concurrency > 0 or d.rpm > 0 or d.queue_depth > 0)
        }
        portfolio = self.plan.portfolio
        if portfolio is not None:
            out |= set(portfolio.mapping.values())
        return out | set(self.planned)

    def served_load(self, model_id: str) -> float:
        """Concurrency the plan's replicas of the model carry now: the offered concurrency of
        every workload the plan's portfolio maps to it plus its direct demand."""
        load = 0.0
        portfolio = self.plan.portfolio
        if portfolio is not None:
            for word, target in portfolio.mapping.items():
                forecast = self.snap.workloads.get(word)
                if target == model_id and forecast is not None:
                    load += forecast.offered_concurrency
        demand = self.snap.demand.get(model_id)
        if demand is not None and demand.evidence is Evidence.DIRECT:
            load += demand.offered_concurrency
        return load

    def planned_capacity(self, profile: ModelProfile) -> float:
        """Concurrency the plan's replicas of the model take at its target utilization."""
        replicas = len(self.planned.get(profile.model_id, ()))
        return replicas * profile.replica_concurrency * profile.target_utilization

    @cached_property
    def refusals(self) -> dict[str, list[str]]:
        return {h.host_id: host_refusals(h, self.snap) for h in self.snap.hosts}

    def fresh(self, host_id: str) -> bool:
        """The host's heartbeat is fresh: its report is authoritative and commands land."""
        return not any(r.startswith("heartbeat") for r in self.refusals.get(host_id, ["x"]))

    # -- per model and host ------------------------------------------------------------------
    @cached_property
    def _rows(self) -> dict[str, dict[str, list[Residency]]]:
        """host -> model -> its residency rows (in report order)."""
        out: dict[str, dict[str, list[Residency]]] = {}
        for host in self.snap.hosts:
            rows = out.setdefault(host.host_id, {})
            for r in host.residencies:
                rows.setdefault(r.model_id, []).append(r)
        return out

    @cached_property
    def mentions(self) -> dict[str, set[str]]:
        """model -> the hosts whose report names it (a cached model or a residency row)."""
        out: dict[str, set[str]] = {}
        for host in self.snap.hosts:
            for model_id in [*host.cached_models, *self._rows.get(host.host_id, {})]:
                out.setdefault(model_id, set()).add(host.host_id)
        return out

    def _model_rows(self, model_id: str, host: Host) -> list[Residency]:
        rows = self._rows.get(host.host_id)
        if rows is None:  # a host outside the snapshot: read it directly
            return [r for r in host.residencies if r.model_id == model_id]
        return rows.get(model_id, [])

    def live(self, model_id: str, host: Host) -> bool:
        return any(r.state in LIVE_STATES for r in self._model_rows(model_id, host))

    def cached(self, profile: ModelProfile, host: Host) -> bool:
        """The exact artifact is on the host's disk (a CACHED row of another revision is not)."""
        rows = self._model_rows(profile.model_id, host)
        if rows and rows[0].state is ResidencyState.CACHED:
            return rows[0].artifact_sha256 in (None, profile.artifact_sha256)
        return profile.model_id in host.cached_models

    def compatibility(self, profile: ModelProfile, host: Host) -> str | None:
        """Why the host is not future-compatible for a cache-only transfer (None: it is)."""
        if self.refusals[host.host_id]:
            return "host_not_admitting"
        return self.static_compatibility(profile, host)

    def static_compatibility(self, profile: ModelProfile, host: Host) -> str | None:
        """The same without the host's current lifecycle and heartbeat: a host that is down or
        paused now keeps its disk, so a copy there still counts once it is back (memoized per
        model and host: one plan's facts do not change)."""
        key = (profile.model_id, host.host_id)
        if key not in self._static:
            self._static[key] = self._static_refusal(profile, host)
        return self._static[key]

    def _static_refusal(self, profile: ModelProfile, host: Host) -> str | None:
        if host.ownership is not Ownership.MANAGED or LOAD_CAPABILITY not in (
            host.actuator_capabilities
        ):
            return "no_managed_load"
        if pair_refusals(profile, host, cached=False):
            return "incompatible"
        runtime = choose_runtime(profile, host)
        if runtime is None or footprint_mb(profile, runtime) > allocatable_mb(host):
            return "too_small"
        return None

    def room_mb(self, host_id: str) -> int | None:
        """Free disk a predictive transfer may use there: the ledger less the reserve."""
        free = self.free.get(host_id)
        return None if free is None else free - self.reserve_mb

    @cached_property
    def _placed_on(self) -> dict[str, dict[str, int]]:
        """host -> the plan's replicas there (model -> memory MB)."""
        out: dict[str, dict[str, int]] = {}
        for a in self.plan.assignments:
            models = out.setdefault(a.host_id, {})
            models[a.model_id] = models.get(a.model_id, 0) + a.memory_mb
        return out

    def free_memory_mb(self, host: Host) -> int:
        """Allocatable memory the plan's replicas leave free on the host."""
        return allocatable_mb(host) - sum(self._placed_on.get(host.host_id, {}).values())

    def source_model(self, prediction: Prediction) -> str | None:
        """The model the plan's portfolio serves the prediction's source workload with."""
        portfolio = self.plan.portfolio
        if portfolio is None:
            return None
        model_id = portfolio.mapping.get(prediction.source)
        return None if model_id == prediction.model_id else model_id

    def landing_refusal(
        self, profile: ModelProfile, host: Host, freed: str | None = None
    ) -> str | None:
        """Why the model's next replica could not start on the host after the plan (None: it
        could): the plan fills every model slot there, or leaves too little memory (above the
        planner's headroom) for its footprint. A replica of `freed`, the model serving the
        prediction's source workload, counts as room: the predicted transition moves that
        work on to the target. A cached copy only pays off where a later warm can land without
        draining other planned work, so only such hosts are prefetch targets."""
        placed = self._placed_on.get(host.host_id, {})
        kept = len(placed) - (freed in placed)
        if host.max_models and kept >= host.max_models:
            return "no_free_slot"
        runtime = choose_runtime(profile, host)
        alloc = allocatable_mb(host)
        free = self.free_memory_mb(host) + placed.get(freed or "", 0)
        headroom = math.ceil(self.snap.policy.memory_headroom_fraction * alloc)
        if runtime is None or footprint_mb(profile, runtime) > free - headroom:
            return "no_free_slot"
        return None
