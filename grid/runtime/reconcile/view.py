"""What the reconciler knows about the fleet in one tick: snapshot, plan and targets, indexed once.

"Counted" replicas are the only ones that may serve as replacement or floor evidence: READY, on
a host that admits work (lifecycle, fresh heartbeat, not manual), corroborated by a live child
route when the host reports its routes (a READY row alone is inventory, invariant 4), and, for a
managed residency of a checksum-protected model, proving that exact artifact digest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from grid.fleet import (
    LIVE_STATES,
    REUSABLE_STATES,
    FleetSnapshot,
    Host,
    ModelProfile,
    Ownership,
    Plan,
    Policy,
    Residency,
    ResidencyState,
    Tombstone,
)
from grid.planner import Target, compute_targets, host_refusals

Key = tuple[str, str]  # (model_id, host_id)


def clamped_age(now: float, stamp: float | None) -> float | None:
    """Seconds since `stamp`; a timestamp in the future counts as age zero."""
    if stamp is None:
        return None
    return max(0.0, now - stamp)


def route_proven(host: Host, res: Residency) -> bool:
    """Invariant 4 for one row: a managed row is proven by a live child route for its model on
    the host; a host without route inventory and rows Grid does not own stand as reported."""
    return host.routes is None or not res.is_managed or res.model_id in host.routes


@dataclass
class FleetView:
    snap: FleetSnapshot
    plan: Plan
    tombstones: list[Tombstone] = field(default_factory=list)
    given_targets: dict[str, Target] | None = None  # compute_targets(snap), when known
    # The plan was solved for this snapshot's inputs (the tick's plan generation). Only a
    # current plan's staged preemption may take a lower class's configured minimum (gates.py).
    plan_current: bool = True
    # Per-model host lists asked once per cleanup candidate (O(residencies x replicas) a tick
    # otherwise); the view's inputs never change within a tick.
    _counted: dict[str, list[str]] = field(default_factory=dict, init=False, repr=False)
    _managed_serving: dict[str, list[str]] = field(default_factory=dict, init=False, repr=False)

    @property
    def now(self) -> float:
        return self.snap.now

    @property
    def policy(self) -> Policy:
        return self.snap.policy

    # -- indexes -------------------------------------------------------------------------
    @cached_property
    def hosts(self) -> dict[str, Host]:
        return {h.host_id: h for h in self.snap.hosts}

    @cached_property
    def profiles(self) -> dict[str, ModelProfile]:
        return {m.model_id: m for m in self.snap.models}

    @cached_property
    def targets(self) -> dict[str, Target]:
        if self.given_targets is not None:
            return self.given_targets
        return compute_targets(self.snap)

    @cached_property
    def residencies(self) -> dict[Key, Residency]:
        return {(r.model_id, h.host_id): r for h in self.snap.hosts for r in h.residencies}

    @cached_property
    def desired(self) -> dict[Key, int]:
        """Plan assignments: (model, host) -> memory the replica claims."""
        return {(a.model_id, a.host_id): a.memory_mb for a in self.plan.assignments}

    @cached_property
    def desired_hosts(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for a in sorted(self.plan.assignments, key=lambda a: (a.model_id, a.host_id)):
            out.setdefault(a.model_id, []).append(a.host_id)
        return out

    @cached_property
    def relocating(self) -> set[Key]:
        """(model, host) of incumbents the plan relocates (a repack names where they go)."""
        return {
            (p.victim_model_id, p.host_id)
            for p in self.plan.preemptions
            if p.relocated_to is not None
        }

    @cached_property
    def retired(self) -> set[str]:
        """Tombstoned models without a profile (a recreated profile clears its tombstone)."""
        return {t.model_id for t in self.tombstones if t.model_id not in self.profiles}

    @cached_property
    def refusals(self) -> dict[str, list[str]]:
        """Why each host takes no new work (empty: it admits), shared by the predicates below."""
        return {h.host_id: host_refusals(h, self.snap) for h in self.snap.hosts}

    @cached_property
    def admitting(self) -> dict[str, bool]:
        return {h: not refusals for h, refusals in self.refusals.items()}

    @cached_property
    def reachable(self) -> dict[str, bool]:
        """Hosts whose heartbeat is fresh: their snapshot is authoritative and commands land."""
        return {
            h: not any(r.startswith("heartbeat") for r in refusals)
            for h, refusals in self.refusals.items()
        }

    @cached_property
    def by_model(self) -> dict[str, list[tuple[str, Residency]]]:
        out: dict[str, list[tuple[str, Residency]]] = {}
        for h in sorted(self.snap.hosts, key=lambda h: h.host_id):
            for r in h.residencies:
                out.setdefault(r.model_id, []).append((h.host_id, r))
        return out

    # -- predicates ------------------------------------------------------------------------
    def residency(self, model_id: str, host_id: str) -> Residency | None:
        return self.residencies.get((model_id, host_id))

    def is_pinned(self, model_id: str, host_id: str) -> bool:
        prof = self.profiles.get(model_id)
        return prof is not None and host_id in prof.pinned_hosts

    def exact_artifact(self, model_id: str, res: Residency) -> bool:
        prof = self.profiles.get(model_id)
        if prof is None or prof.artifact_sha256 is None or not res.is_managed:
            return True
        return res.artifact_sha256 == prof.artifact_sha256

    def route_corroborated(self, model_id: str, host_id: str) -> bool:
        """Invariant 4: a managed READY row counts only beside a live child route for the same
        host and model. A host without route inventory (a hand-written snapshot) and external
        or manual rows (inventory the node does not own) stand as reported."""
        host = self.hosts.get(host_id)
        res = self.residency(model_id, host_id)
        if host is None or res is None:
            return False
        return route_proven(host, res)

    def serving(self, model_id: str, host_id: str) -> bool:
        """READY on an admitting host with its route: it carries traffic (any revision)."""
        res = self.residency(model_id, host_id)
        return (
            res is not None
            and res.state is ResidencyState.READY
            and self.admitting.get(host_id, False)
            and self.route_corroborated(model_id, host_id)
        )

    def counted_ready(self, model_id: str, host_id: str) -> bool:
        """READY replica that may serve as replacement, floor and failure-domain evidence."""
        res = self.residency(model_id, host_id)
        return (
            res is not None
            and self.serving(model_id, host_id)
            and self.exact_artifact(model_id, res)
        )

    def managed_serving_hosts(self, model_id: str) -> list[str]:
        found = self._managed_serving.get(model_id)
        if found is None:
            found = [
                h
                for h, r in self.by_model.get(model_id, [])
                if r.is_managed and self.serving(model_id, h)
            ]
            self._managed_serving[model_id] = found
        return list(found)

    def counted_hosts(self, model_id: str) -> list[str]:
        found = self._counted.get(model_id)
        if found is None:
            found = [
                h for h, _r in self.by_model.get(model_id, []) if self.counted_ready(model_id, h)
            ]
            self._counted[model_id] = found
        return list(found)

    def managed_counted_hosts(self, model_id: str) -> list[str]:
        return [
            h
            for h in self.counted_hosts(model_id)
            if (res := self.residency(model_id, h)) is not None and res.is_managed
        ]

    def reusable_incumbent(self, model_id: str, host_id: str) -> bool:
        """A managed residency the plan may keep (ready, or a lifecycle in progress)."""
        res = self.residency(model_id, host_id)
        return (
            res is not None
            and res.is_managed
            and res.state in REUSABLE_STATES
            and self.exact_artifact(model_id, res)
        )

    def exact_cached(self, model_id: str, host_id: str) -> bool:
        """The exact artifact is on the host's disk, so a warm needs no load first."""
        host = self.hosts.get(host_id)
        if host is None:
            return False
        res = self.residency(model_id, host_id)
        if res is not None and res.state is ResidencyState.CACHED:
            return self.exact_artifact(model_id, res) or res.artifact_sha256 is None
        return model_id in host.cached_models

    def _residencies_on(self, host_id: str) -> list[Residency]:
        host = self.hosts.get(host_id)
        return host.residencies if host is not None else []

    def live_mb(self, host_id: str) -> int:
        return sum(r.memory_mb for r in self._residencies_on(host_id) if r.state in LIVE_STATES)

    def live_models(self, host_id: str) -> set[str]:
        return {r.model_id for r in self._residencies_on(host_id) if r.state in LIVE_STATES}

    def is_live(self, model_id: str, host_id: str) -> bool:
        res = self.residency(model_id, host_id)
        return res is not None and res.state in LIVE_STATES

    def quiet(self, model_id: str) -> bool:
        """No current demand: the scale-down cooldown guards exactly such a quiet spell.

        Under live demand the plan's replica count already carries the planner's hysteresis,
        and a surplus replica that keeps receiving traffic would otherwise never cool down.
        """
        demand = self.snap.demand.get(model_id)
        return demand is None or (
            demand.offered_concurrency == 0 and demand.rpm == 0 and demand.queue_depth == 0
        )

    def domain(self, host_id: str) -> str:
        host = self.hosts.get(host_id)
        return host.domain if host is not None else f"host:{host_id}"

    def host_manual(self, host_id: str) -> bool:
        host = self.hosts.get(host_id)
        return host is not None and host.ownership is Ownership.MANUAL

    def heartbeat(self, host_id: str) -> float:
        host = self.hosts.get(host_id)
        stamp = host.last_heartbeat if host is not None else None
        return stamp if stamp is not None else float("-inf")

    def retry_soon(self) -> float:
        return self.now + self.policy.reconcile_interval_s
