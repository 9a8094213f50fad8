"""One simulated host: residencies, cached weights, and an actuator that runs one action at a time.

The host mirrors the managed actuator of the spec closely enough for the reconciler's safety
properties to be observable: a load fetches weights (a placement load shows LOADING with its
memory, a disk-only load shows nothing until the weights are CACHED); a warm needs the weights
and ends READY (or FAILED, memory still held); a drain stops routing at once; an unload releases
memory. The node's own fail-safe refuses an unload of a serving or busy residency, and the sim
records it as a violation too, since the reconciler must never ask for one.

The predictive cache, as the managed node keeps it: a `predictive` load that actually
downloads records the entry's provenance (exact SHA-256, size, when), a warm marks it used, and
an evict removes exactly that SHA only when the entry is predictive, never warmed and the model
is not live (otherwise the node refuses it, nothing is deleted).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from grid.fleet import (
    ADMITTING_STATES,
    CONSTRUCTIVE_KINDS,
    LIVE_STATES,
    Action,
    ActionKind,
    Host,
    HostState,
    Ownership,
    PredictiveEntry,
    ReceiptStatus,
    Residency,
    ResidencyState,
)


@dataclass
class SimResidency:
    model_id: str
    state: ResidencyState
    memory_mb: int
    ownership: Ownership = Ownership.MANAGED
    loaded_at: float | None = None
    last_used_at: float | None = None
    active_requests: int | None = 0
    artifact_sha256: str | None = None
    activity_unknown: bool = False  # a knob: the host cannot report this residency's activity

    def to_model(self) -> Residency:
        return Residency(
            model_id=self.model_id,
            memory_mb=self.memory_mb,
            state=self.state,
            managed=self.ownership is Ownership.MANAGED,
            ownership=self.ownership,
            artifact_sha256=self.artifact_sha256,
            loaded_at=self.loaded_at,
            last_used_at=self.last_used_at,
            active_requests=None if self.activity_unknown else self.active_requests,
        )


@dataclass
class Running:
    action: Action
    finishes_at: float
    fail: bool


Outcome = tuple[str, ReceiptStatus, float, str]  # (action_id, status, at, message)


@dataclass
class SimHost:
    template: Host  # static facts: capacity, runtimes, tags, domain, ...
    state: HostState = HostState.ACCEPTING
    online: bool = True
    residencies: dict[str, SimResidency] = field(default_factory=dict)
    cached: set[str] = field(default_factory=set)
    queue: list[Action] = field(default_factory=list)
    running: Running | None = None
    last_heartbeat: float | None = None
    interrupted: list[Action] = field(default_factory=list)
    unrouted: set[str] = field(default_factory=set)  # a knob: READY children without a route
    predictive: dict[str, PredictiveEntry] = field(default_factory=dict)  # provenance
    # Loads that download: action id -> (SHA-256 of a predictive download or "", MB).
    _fetching: dict[str, tuple[str, int]] = field(default_factory=dict)

    def routed(self, model_id: str) -> bool:
        """A live child route corroborates the READY row (what the real node reports)."""
        res = self.residencies.get(model_id)
        return (
            res is not None and res.state is ResidencyState.READY and model_id not in self.unrouted
        )

    @property
    def host_id(self) -> str:
        return self.template.host_id

    @property
    def admitting(self) -> bool:
        return self.online and self.state in ADMITTING_STATES

    def allocatable_raw_mb(self) -> int:
        t = self.template
        return max(0, t.capacity_mb - t.reserved_mb - t.external_mb)

    def live_mb(self) -> int:
        return sum(r.memory_mb for r in self.residencies.values() if r.state in LIVE_STATES)

    def to_model(self) -> Host:
        cached = sorted(
            m
            for m in self.cached
            if m not in self.residencies or self.residencies[m].state not in LIVE_STATES
        )
        return self.template.model_copy(
            update={
                "state": self.state,
                "last_heartbeat": self.last_heartbeat,
                "cached_models": cached,
                "routes": sorted(
                    m
                    for m, r in self.residencies.items()
                    if r.ownership is Ownership.MANAGED and self.routed(m)
                ),
                "residencies": [r.to_model() for _m, r in sorted(self.residencies.items())],
                # a file deleted by other means (the lab's disk reclaim) has no provenance left
                "predictive_cache": [
                    e for m, e in sorted(self.predictive.items()) if m in self.cached
                ],
            }
        )

    # -- actuator ----------------------------------------------------------------------------
    def _begin(self, action: Action, state: ResidencyState, now: float, sha: str | None) -> None:
        self.residencies[action.model_id] = SimResidency(
            action.model_id, state, action.memory_mb, loaded_at=now, artifact_sha256=sha
        )

    def start(
        self,
        action: Action,
        now: float,
        duration: float,
        fail: bool,
        on_start: Callable[[SimHost, Action, float], None],
        sha: str | None = None,
        size_mb: int = 0,
    ) -> Outcome | None:
        """Begin an action; returns an immediate receipt when the node refuses it outright."""
        on_start(self, action, now)
        res = self.residencies.get(action.model_id)
        kind = action.kind
        if kind in CONSTRUCTIVE_KINDS and not self.admitting:
            return (action.action_id, ReceiptStatus.CANCELLED, now, "host does not admit work")
        if kind is ActionKind.LOAD:
            if res is not None and res.state in LIVE_STATES:
                return (action.action_id, ReceiptStatus.FAILED, now, "model already live")
            if action.memory_mb > 0:
                self._begin(action, ResidencyState.LOADING, now, sha)
        elif kind is ActionKind.WARM:
            if action.model_id not in self.cached:
                return (action.action_id, ReceiptStatus.FAILED, now, "artifact not cached")
            entry = self.predictive.get(action.model_id)
            if entry is not None:
                self.predictive[action.model_id] = entry.model_copy(update={"warmed": True})
            if res is not None and res.state in LIVE_STATES:
                return (action.action_id, ReceiptStatus.FAILED, now, "model already live")
            self._begin(action, ResidencyState.WARMING, now, sha)
        elif kind is ActionKind.DRAIN:
            if res is None or res.state is not ResidencyState.READY:
                return (action.action_id, ReceiptStatus.FAILED, now, "nothing ready to drain")
            if not fail:
                res.state = ResidencyState.DRAINING  # routing stops at once
        elif kind is ActionKind.EVICT:
            refusal = self._evict_refusal(action, res)
            if refusal:
                return (action.action_id, ReceiptStatus.FAILED, now, refusal)
        elif kind is ActionKind.UNLOAD:
            busy = res is not None and (
                res.activity_unknown or res.active_requests is None or res.active_requests > 0
            )
            if res is None or res.state is ResidencyState.READY or busy:
                return (action.action_id, ReceiptStatus.FAILED, now, "refused: not drained")
        if kind is ActionKind.LOAD and action.model_id not in self.cached:
            # A real download: a predictive one records its provenance when it publishes, any
            # other replaces whatever provenance an earlier, since deleted copy had.
            self._fetching[action.action_id] = ((sha or "") if action.predictive else "", size_mb)
        self.running = Running(action, now + duration, fail)
        return None

    def _evict_refusal(self, action: Action, res: SimResidency | None) -> str:
        entry = self.predictive.get(action.model_id)
        if (
            entry is None
            or action.model_id not in self.cached
            or entry.sha256 != action.artifact_sha256
        ):
            return "evict_not_held: no predictive download of exactly this artifact"
        if entry.warmed:
            return "evict_used: the download was warmed"
        if res is not None and res.state in LIVE_STATES:
            return "evict_active: the model is live here"
        return ""

    def finish(self, now: float) -> Outcome:
        assert self.running is not None
        action, fail = self.running.action, self.running.fail
        self.running = None
        res = self.residencies.get(action.model_id)
        if action.kind is ActionKind.LOAD:
            if res is not None and res.state is ResidencyState.LOADING:
                del self.residencies[action.model_id]
            fetching = self._fetching.pop(action.action_id, None)
            if fail:
                return (action.action_id, ReceiptStatus.FAILED, now, "injected load failure")
            self.cached.add(action.model_id)
            if fetching is not None and not fetching[0]:
                self.predictive.pop(action.model_id, None)
            elif fetching is not None:
                self.predictive[action.model_id] = PredictiveEntry(
                    model_id=action.model_id,
                    sha256=fetching[0],
                    size_mb=fetching[1],
                    cached_at=now,
                )
        elif action.kind is ActionKind.WARM:
            if res is None or res.state is not ResidencyState.WARMING:
                return (action.action_id, ReceiptStatus.FAILED, now, "warming process vanished")
            if fail:
                res.state = ResidencyState.FAILED
                res.active_requests = 0
                return (action.action_id, ReceiptStatus.FAILED, now, "injected warm failure")
            res.state = ResidencyState.READY
            res.loaded_at = now
            res.last_used_at = now
        elif action.kind is ActionKind.DRAIN:
            if fail:
                return (action.action_id, ReceiptStatus.FAILED, now, "injected drain failure")
        elif action.kind is ActionKind.UNLOAD:
            if fail:
                return (action.action_id, ReceiptStatus.FAILED, now, "injected unload failure")
            self.residencies.pop(action.model_id, None)
        elif action.kind is ActionKind.EVICT:
            refusal = self._evict_refusal(action, res)
            if fail or refusal:
                return (action.action_id, ReceiptStatus.FAILED, now, refusal or "injected failure")
            self.cached.discard(action.model_id)
            del self.predictive[action.model_id]
        return (action.action_id, ReceiptStatus.SUCCEEDED, now, "")
