"""A deterministic fleet simulator: a virtual clock, hosts that execute actions, and the real
planner and reconciler running on it tick by tick. The lab and the property tests share it.

Each `step()`:
1. nodes that poll this tick take their pending commands (delivery is durably recorded first);
2. the fleet reports a snapshot (heartbeats, residencies, cached weights, demand);
3. `make_plan` (deterministic; the heuristic engine by default) and `reconcile` decide;
4. withdrawals are recorded (a node drops a withdrawn command it has not started), executable
   actions become records and are delivered to nodes that are online;
5. the clock advances one tick: every host runs its queue one action at a time (dependencies
   first), acknowledges each action, and the request model updates activity.
Every safety invariant is checked on the way (`sim_checks`); violations are collected, not
raised, so a failing scenario can print its whole story.

Knobs (all on `FleetSimulator`): set_demand, pause_host, resume_host, set_host_state, outage,
restore, crash, set_ready, add_external, drop_route, set_requests, set_activity_unknown,
fail_next, remove_profile, add_profile, set_poll_every. Nothing here reads a real clock.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from grid.fleet import (
    LIVE_STATES,
    Action,
    ActionKind,
    ActionRecord,
    DemandEntry,
    FleetSnapshot,
    HostState,
    Mode,
    ModelProfile,
    Ownership,
    Plan,
    Policy,
    Receipt,
    ReceiptStatus,
    ReconcileResult,
    RecordStatus,
    ResidencyState,
    Tombstone,
    apply_receipt,
)
from grid.lab.sim_checks import (
    SimViolation,
    deferral_violations,
    governor_violations,
    memory_violations,
    ownership_violations,
    placement_violations,
    retry_violations,
    start_violations,
)
from grid.lab.sim_host import Outcome, SimHost, SimResidency
from grid.runtime.reconcile import reconcile

PlannerFn = Callable[[FleetSnapshot], Plan]


def planner_for(engine: str = "heuristic", time_limit_s: float = 2.0) -> PlannerFn:
    from grid.planner import make_plan

    def plan(snap: FleetSnapshot) -> Plan:
        return make_plan(snap, engine=engine, time_limit_s=time_limit_s, deterministic=True)

    return plan


@dataclass
class Durations:
    load_s: float = 12.0
    warm_s: float = 6.0
    drain_s: float = 1.0
    unload_s: float = 1.0

    def of(self, kind: ActionKind) -> float:
        return {
            ActionKind.LOAD: self.load_s,
            ActionKind.WARM: self.warm_s,
            ActionKind.DRAIN: self.drain_s,
            ActionKind.UNLOAD: self.unload_s,
        }.get(kind, 1.0)


@dataclass
class FailureRule:
    kind: ActionKind | None = None
    host_id: str | None = None
    model_id: str | None = None
    times: int = 1

    def matches(self, action: Action) -> bool:
        return (
            self.times > 0
            and (self.kind is None or self.kind is action.kind)
            and (self.host_id is None or self.host_id == action.host_id)
            and (self.model_id is None or self.model_id == action.model_id)
        )


@dataclass
class SimConfig:
    tick_s: float = 5.0
    durations: Durations = field(default_factory=Durations)
    failure_rate: float = 0.0  # chance that any action fails (seeded)
    seed: int = 0
    mode: Mode = Mode.AUTOMATIC
    requests_finished_per_tick: int = 1  # how fast a draining residency empties


@dataclass
class TickReport:
    now: float
    snapshot: FleetSnapshot
    plan: Plan
    result: ReconcileResult
    delivered: list[Action]
    violations: list[SimViolation]


class FleetSimulator:
    def __init__(
        self,
        snapshot: FleetSnapshot,
        *,
        config: SimConfig | None = None,
        planner: PlannerFn | None = None,
        tombstones: list[Tombstone] | None = None,
    ) -> None:
        self.config = config or SimConfig()
        self.planner = planner or planner_for("heuristic")
        self.now = snapshot.now
        self.policy: Policy = snapshot.policy
        self.mode = self.config.mode
        self.models: dict[str, ModelProfile] = {m.model_id: m for m in snapshot.models}
        self.demand: dict[str, DemandEntry] = dict(snapshot.demand)
        self.tombstones: list[Tombstone] = list(tombstones or [])
        self.hosts: dict[str, SimHost] = {}
        for h in sorted(snapshot.hosts, key=lambda h: h.host_id):
            sim = SimHost(
                template=h.model_copy(update={"residencies": [], "cached_models": []}),
                state=h.state,
                last_heartbeat=h.last_heartbeat,
                cached=set(h.cached_models),
                predictive={e.model_id: e for e in h.predictive_cache},
            )
            for r in h.residencies:
                if r.state is ResidencyState.CACHED:
                    sim.cached.add(r.model_id)
                    continue
                sim.residencies[r.model_id] = SimResidency(
                    model_id=r.model_id,
                    state=r.state,
                    memory_mb=r.memory_mb,
                    ownership=r.owner,
                    loaded_at=r.loaded_at,
                    last_used_at=r.last_used_at,
                    active_requests=r.active_requests or 0,
                    artifact_sha256=r.artifact_sha256,
                    activity_unknown=r.active_requests is None,
                )
            self.hosts[h.host_id] = sim
        self.records: dict[str, ActionRecord] = {}
        self.violations: list[SimViolation] = []
        self.failure_rules: list[FailureRule] = []
        self.poll_every: dict[str, int] = {}
        self.ticks = 0
        self.rng = random.Random(self.config.seed)
        self.reports: list[TickReport] = []

    # ----------------------------------------------------------------------------- knobs
    def set_demand(self, model_id: str, entry: DemandEntry | None) -> None:
        if entry is None:
            self.demand.pop(model_id, None)
        else:
            self.demand[model_id] = entry

    def set_host_state(self, host_id: str, state: HostState) -> None:
        self.hosts[host_id].state = state

    def pause_host(self, host_id: str) -> None:
        self.set_host_state(host_id, HostState.PAUSED)

    def resume_host(self, host_id: str) -> None:
        self.set_host_state(host_id, HostState.ACCEPTING)

    def outage(self, host_id: str) -> None:
        """The host stops heartbeating; the action it was running is interrupted."""
        host = self.hosts[host_id]
        host.online = False
        if host.running is not None:
            host.interrupted.append(host.running.action)
            host.running = None

    def restore(self, host_id: str) -> None:
        """The host restarts: interrupted actions fail, half-started processes do not survive."""
        host = self.hosts[host_id]
        host.online = True
        for action in list(host.queue):
            record = self.records.get(action.action_id)
            if record is not None and record.status is RecordStatus.WITHDRAWN:
                # Reconnecting, the node learns of the cancellation before it starts the work.
                host.queue.remove(action)
                self._receipt((action.action_id, ReceiptStatus.CANCELLED, self.now, "withdrawn"))
        for action in host.interrupted:
            self._receipt((action.action_id, ReceiptStatus.FAILED, self.now, "interrupted"))
        host.interrupted.clear()
        for model_id, res in list(host.residencies.items()):
            if res.state is ResidencyState.LOADING:
                del host.residencies[model_id]
            elif res.state is ResidencyState.WARMING:
                res.state = ResidencyState.FAILED

    def crash(self, host_id: str, model_id: str) -> None:
        res = self.hosts[host_id].residencies.get(model_id)
        if res is not None:
            res.state = ResidencyState.FAILED
            res.active_requests = 0

    def set_ready(
        self, host_id: str, model_id: str, memory_mb: int | None = None, *, managed: bool = True
    ) -> None:
        prof = self.models.get(model_id)
        memory = memory_mb if memory_mb is not None else (prof.memory_mb if prof else 0)
        host = self.hosts[host_id]
        host.cached.add(model_id)
        host.residencies[model_id] = SimResidency(
            model_id=model_id,
            state=ResidencyState.READY,
            memory_mb=memory,
            ownership=Ownership.MANAGED if managed else Ownership.EXTERNAL,
            loaded_at=self.now,
            last_used_at=self.now,
            artifact_sha256=prof.artifact_sha256 if prof else None,
        )

    def add_external(self, host_id: str, model_id: str, memory_mb: int) -> None:
        self.set_ready(host_id, model_id, memory_mb, managed=False)

    def drop_route(self, host_id: str, model_id: str, dropped: bool = True) -> None:
        """The READY child keeps running but its route disappears (or comes back)."""
        if dropped:
            self.hosts[host_id].unrouted.add(model_id)
        else:
            self.hosts[host_id].unrouted.discard(model_id)

    def set_requests(self, host_id: str, model_id: str, active: int) -> None:
        res = self.hosts[host_id].residencies.get(model_id)
        if res is not None:
            res.active_requests = active

    def set_activity_unknown(self, host_id: str, model_id: str, unknown: bool = True) -> None:
        res = self.hosts[host_id].residencies.get(model_id)
        if res is not None:
            res.activity_unknown = unknown

    def fail_next(
        self,
        kind: ActionKind | None = None,
        host_id: str | None = None,
        model_id: str | None = None,
        times: int = 1,
    ) -> None:
        self.failure_rules.append(FailureRule(kind, host_id, model_id, times))

    def remove_profile(self, model_id: str) -> None:
        self.models.pop(model_id, None)
        self.demand.pop(model_id, None)
        if all(t.model_id != model_id for t in self.tombstones):
            self.tombstones.append(Tombstone(model_id=model_id, created_at=self.now))

    def add_profile(self, profile: ModelProfile) -> None:
        self.models[profile.model_id] = profile
        self.tombstones = [t for t in self.tombstones if t.model_id != profile.model_id]

    def set_poll_every(self, host_id: str, ticks: int) -> None:
        """The node fetches commands only every `ticks` ticks (undelivered work piles up)."""
        self.poll_every[host_id] = max(1, ticks)

    # ----------------------------------------------------------------------------- views
    def snapshot(self) -> FleetSnapshot:
        return FleetSnapshot(
            now=self.now,
            policy=self.policy,
            hosts=[h.to_model() for h in self.hosts.values()],
            models=sorted(self.models.values(), key=lambda m: m.model_id),
            demand={m: d for m, d in sorted(self.demand.items()) if m in self.models},
        )

    def history(self) -> list[ActionRecord]:
        return list(self.records.values())

    # ----------------------------------------------------------------------------- the tick
    def step(self) -> TickReport:
        found: list[SimViolation] = []
        self._deliver_pending()
        snap = self.snapshot()
        plan = self.planner(snap)
        before = self.history()
        result = reconcile(plan, snap, before, mode=self.mode, tombstones=self.tombstones)
        self._withdraw(result)
        issued = [a for a in result.actions if a.executable]
        found += placement_violations(self.now, snap, result)
        found += deferral_violations(self.now, result)
        found += ownership_violations(self.now, snap, self.hosts, issued)
        found += retry_violations(self.now, snap, before, issued)
        for action in issued:
            self.records[action.action_id] = ActionRecord.from_action(action, now=self.now)
        delivered = self._deliver_pending()
        found += governor_violations(self.now, snap, self.history())
        self.violations += found
        start_count = len(self.violations)
        self._advance(self.config.tick_s)
        self.violations += memory_violations(self.now, self.hosts)
        found += self.violations[start_count:]
        self.ticks += 1
        report = TickReport(snap.now, snap, plan, result, delivered, found)
        self.reports.append(report)
        return report

    def run(self, ticks: int) -> list[TickReport]:
        return [self.step() for _ in range(ticks)]

    def _deliver_pending(self) -> list[Action]:
        delivered: list[Action] = []
        for record in list(self.records.values()):
            if record.status is not RecordStatus.PENDING:
                continue
            host = self.hosts.get(record.host_id)
            if host is None or not host.online:
                continue
            if self.ticks % self.poll_every.get(record.host_id, 1):
                continue
            self.records[record.action_id] = record.model_copy(
                update={"status": RecordStatus.DELIVERED, "delivered_at": self.now}
            )
            action = record.to_action()
            host.queue.append(action)
            delivered.append(action)
        return delivered

    def _withdraw(self, result: ReconcileResult) -> None:
        for w in result.withdrawn:
            record = self.records.get(w.action_id)
            if record is None or not record.is_open:
                continue
            self.records[w.action_id] = record.model_copy(
                update={"status": RecordStatus.WITHDRAWN, "withdrawn_at": self.now}
            )
            host = self.hosts.get(record.host_id)
            if host is None:
                continue
            queued = next((a for a in host.queue if a.action_id == w.action_id), None)
            if queued is not None and host.online:
                host.queue.remove(queued)  # not started: the node drops it and says so
                self._receipt((w.action_id, ReceiptStatus.CANCELLED, self.now, "withdrawn"))

    def _receipt(self, outcome: Outcome) -> None:
        action_id, status, at, message = outcome
        record = self.records.get(action_id)
        if record is None:
            return
        receipt = Receipt(action_id=action_id, status=status, at=at, message=message)
        (self.records[action_id],) = apply_receipt([record], receipt)

    def _should_fail(self, action: Action) -> bool:
        for rule in self.failure_rules:
            if rule.matches(action):
                rule.times -= 1
                return True
        return self.config.failure_rate > 0 and self.rng.random() < self.config.failure_rate

    def _on_start(self, host: SimHost, action: Action, at: float) -> None:
        self.violations += start_violations(at, self.models, self.policy, self.hosts, host, action)

    def _next_runnable(self, host: SimHost, at: float) -> Action | None:
        for action in list(host.queue):
            states = [self.records[d].status for d in action.dependencies if d in self.records]
            if any(s in (RecordStatus.FAILED, RecordStatus.WITHDRAWN) for s in states):
                host.queue.remove(action)
                self._receipt((action.action_id, ReceiptStatus.FAILED, at, "dependency failed"))
                continue
            if all(s is RecordStatus.SUCCEEDED for s in states):
                host.queue.remove(action)
                return action
        return None

    def _advance(self, dt: float) -> None:
        end = self.now + dt
        for host in self.hosts.values():
            if not host.online:
                continue
            at = self.now
            while True:
                if host.running is not None:
                    if host.running.finishes_at > end:
                        break
                    at = host.running.finishes_at
                    self._receipt(host.finish(at))
                    continue
                action = self._next_runnable(host, at)
                if action is None:
                    break
                prof = self.models.get(action.model_id)
                refused = host.start(
                    action,
                    at,
                    self.config.durations.of(action.kind),
                    self._should_fail(action),
                    self._on_start,
                    sha=prof.artifact_sha256 if prof else None,
                    size_mb=prof.artifact_size_mb if prof else 0,
                )
                if refused is not None:
                    self._receipt(refused)
                self.violations += memory_violations(at, {host.host_id: host})
            host.last_heartbeat = end
        self.now = end
        self._serve_requests()

    def _serve_requests(self) -> None:
        for host in self.hosts.values():
            for res in host.residencies.values():
                serving = host.admitting and res.state is ResidencyState.READY
                if not serving and res.active_requests:
                    finished = self.config.requests_finished_per_tick
                    res.active_requests = max(0, res.active_requests - finished)
        for model_id, entry in sorted(self.demand.items()):
            serving_res = [
                r
                for h in self.hosts.values()
                if h.admitting
                for r in h.residencies.values()
                if r.model_id == model_id and r.state is ResidencyState.READY and h.routed(model_id)
            ]
            if not serving_res:
                continue
            total = round(entry.offered_concurrency)
            per, extra = divmod(total, len(serving_res))
            for i, res in enumerate(serving_res):
                res.active_requests = per + (1 if i < extra else 0)
                if total > 0 or entry.rpm > 0:
                    res.last_used_at = self.now
        demanded = set(self.demand)
        for host in self.hosts.values():
            for res in host.residencies.values():
                idle_ready = res.state is ResidencyState.READY and res.model_id not in demanded
                if idle_ready and host.admitting:
                    res.active_requests = 0

    # ----------------------------------------------------------------------------- verdicts
    def convergence_gaps(
        self, plan: Plan, *, held: set[tuple[str, str]] | None = None
    ) -> list[str]:
        """What still differs from `plan` (empty: the fleet has converged to it).

        `held` lists (model, host) residencies the reconciler keeps on purpose (for example a
        managed baseline it refuses to hand over to an external replica); they are not gaps.
        """
        held = held or set()
        gaps: list[str] = []
        wanted = {(a.model_id, a.host_id) for a in plan.assignments}
        for model_id, host_id in sorted(wanted):
            res = self.hosts[host_id].residencies.get(model_id)
            if res is None or res.state is not ResidencyState.READY:
                state = res.state.value if res is not None else "absent"
                gaps.append(f"{model_id} on {host_id} is {state}, plan wants it ready")
        for host in self.hosts.values():
            for res in host.residencies.values():
                key = (res.model_id, host.host_id)
                if res.state not in LIVE_STATES or key in wanted or key in held:
                    continue
                prof = self.models.get(res.model_id)
                pinned = prof is not None and host.host_id in prof.pinned_hosts
                if res.ownership is Ownership.MANAGED and not pinned:
                    gaps.append(f"{res.model_id} on {host.host_id} is {res.state.value}, unplanned")
        open_ids = sorted(r.action_id for r in self.records.values() if r.holds_slot)
        if open_ids:
            gaps.append(f"open actions: {', '.join(open_ids)}")
        return gaps

    def story(self, last: int = 40) -> str:
        """The last ticks, one line each: actions, deferral codes, withdrawals, violations."""
        lines = []
        for r in self.reports[-last:]:
            acts = " ".join(f"{a.kind.value}:{a.model_id}@{a.host_id}" for a in r.result.actions)
            codes = sorted({f"{d.code}:{d.model_id}@{d.host_id}" for d in r.result.deferred})
            gone = " ".join(f"{w.code}:{w.model_id}@{w.host_id}" for w in r.result.withdrawn)
            bad = " ".join(f"{v.code}({v.detail})" for v in r.violations)
            lines.append(f"t+{r.now - self.reports[0].now:.0f} [{acts}] {codes} {gone} {bad}")
        return "\n".join(lines)


__all__ = [
    "Durations",
    "FailureRule",
    "FleetSimulator",
    "SimConfig",
    "TickReport",
    "planner_for",
]
