"""The controller: forecast -> plan -> reconcile, modes, commands and their acknowledgements.

Every method takes `now`; the only side effects are the injected store (durable state) and lease
file. `service.py` owns the wall clock and the background thread.

Revisions. Every input (registration, heartbeat, acknowledgement, profile, mode, observation,
explicit tick request) advances the causal `dirty` revision; only a change that matters to
destructive safety (residency or lifecycle states, profiles, mode, receipts) also advances the
`safety` revision. A tick records the revisions it started from: `processed` advances whatever
happens, `success` only when it planned, reconciled and saved. A command poll at revision r gets
availability commands once `success >= r`; drains and unloads additionally need the last
successful tick's safety revision to equal the current one, no membership grace, and pass the
final revalidation in `delivery.py` after their delivery marker is durable.

Plans. A tick solves with the configured engine within its budget and falls back to the heuristic
if the engine fails; with a `config.plan_worker` the solve runs off the tick's critical path, and
the tick acts on the newest plan still valid for its snapshot (plan_worker.py). When the plan's
complete inputs (clock-derived facts included, see `plan_inputs`) equal those of the last
proven-optimal or heuristic plan, that plan is kept and only reconciliation runs, so idle passes
and repeated heartbeats stay cheap; the plan generation changes exactly when those inputs do.

Restart. Membership is not durable; after restoring a valid state, a grace period starting at
the first tick (rebased if the clock moves back) suppresses destructive work, and restored
commands of hosts that have not re-registered are not withdrawn, so an incomplete fleet view
cannot cause unloads.

Structure. `ControllerState` (live_state.py) is the state object; the collaborators act on it
with explicit inputs: `LeaseKeeper` and `Grace` (authority.py), `Outbox` (outbox.py, command
delivery), `StatusView` (status.py), the planning functions (planning.py) and the `Registry`.
This class is the face: it takes the locks, orders the steps and keeps the public API; its
public state attributes are descriptors declared in `ControllerFields` (fields.py).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from grid.demand import Measurements, Observation
from grid.fleet import FleetSnapshot, GridError, Mode, Plan
from grid.fleet.operator import StatusDocument
from grid.planner import compute_targets, make_plan
from grid.runtime.controller.authority import Grace, LeaseKeeper
from grid.runtime.controller.commands import AckOutcome, AckResult
from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.evidence_store import EvidenceKeeper
from grid.runtime.controller.fields import ControllerFields
from grid.runtime.controller.gatekeeper import Gatekeeper
from grid.runtime.controller.generation import input_digest
from grid.runtime.controller.in_flight import held_back
from grid.runtime.controller.lease import Lease
from grid.runtime.controller.live_state import ControllerState, restore_state
from grid.runtime.controller.operations import Operations
from grid.runtime.controller.outbox import Authority, Outbox, PlanFacts
from grid.runtime.controller.plan_worker import PlanNeed, PlanWorker, note_failures, tick_plan
from grid.runtime.controller.planning import (
    Planner,
    describe,
    plan_inputs,
    reusable_plan,
)
from grid.runtime.controller.registry import Registry
from grid.runtime.controller.reports import Delivery, NodeReply, TickReport
from grid.runtime.controller.snapshot_inputs import fleet_snapshot
from grid.runtime.controller.status import StatusView
from grid.runtime.controller.store import Store
from grid.runtime.controller.trust import Attestor
from grid.runtime.controller.views import PlanView, RoutingTable, ViewPublisher
from grid.runtime.controller.wire import NodeUpdate
from grid.runtime.controller.workload_inputs import classifier_config
from grid.runtime.reconcile import reconcile, with_failures


class Controller(ControllerFields, Operations):
    def __init__(
        self,
        store: Store,
        *,
        now: float,
        config: ControllerConfig | None = None,
        lease: Lease | None = None,
        planner: Planner = make_plan,
        attestor: Attestor | None = None,
    ) -> None:
        self.config = config or ControllerConfig()
        self.store = store
        self.lease = lease
        self.planner = planner
        self.plan_worker: PlanWorker | None = None  # config.plan_worker, started on first use
        self.plan_ready: Callable[[], None] | None = None  # called when a background plan is in
        self.controller_id = lease.controller_id if lease is not None else secrets.token_hex(8)
        self.lock = threading.RLock()
        self._tick_lock = threading.RLock()
        self.registry = Registry()
        self.views = ViewPublisher()  # what readers take without the lock (views.py)
        cfg = self.config
        self.gate = Gatekeeper(  # what a node's word is worth (trust.py)
            attestor or Attestor.ephemeral(),
            rate_per_s=cfg.heartbeat_rate_per_s,
            burst=cfg.heartbeat_burst,
            suspicion_ttl_s=cfg.suspicion_ttl_s,
            poll_tick_rate_per_s=cfg.poll_tick_rate_per_s,
            poll_tick_burst=cfg.poll_tick_burst,
            suspect_rate_per_s=cfg.suspect_heartbeat_rate_per_s,
        )
        self.state: ControllerState = restore_state(store, self.config.demand)
        self.classifier = classifier_config(self.policy)  # the policy's vocabulary, once
        self.measured = Measurements()  # what the proxy measures (grid/api/proxy_state.py)
        self.keeper = LeaseKeeper(lease, self.state.warnings)
        self.grace = Grace(restored=self.state.restored)
        self.outbox = Outbox(
            self.state.book, self.registry, self.state.counters, self.state.warnings, self.save
        )
        self.status_view = StatusView(
            self.state,
            self.registry,
            store,
            self.keeper,
            self.grace,
            self.outbox,
            self.controller_id,
            self.gate,
        )
        if self.mode is Mode.AUTOMATIC:
            if not self.store.durable:
                self.mode = Mode.RECOMMEND
                self.warn(
                    "automatic_refused",
                    "automatic mode was restored but the state is not "
                    "durable; the controller runs in recommend mode",
                )
            else:
                self.ensure_lease(now)
        self.publish_views()

    @property
    def routing(self) -> RoutingTable:
        """The routing table as last published (immutable; read without the lock)."""
        return self.views.routing

    @property
    def plan_view(self) -> PlanView:
        return self.views.plan

    @property
    def evidence(self) -> EvidenceKeeper:
        """The outcome evidence store (persisted with the state; evaluations record here)."""
        return self.signals.evidence

    # ------------------------------------------------------------------------ authority
    def ensure_lease(self, now: float) -> bool:
        foreign, _host = self.registry.foreign_term(self.controller_id)
        floor = max(self.max_term, foreign + 1 if foreign else 0)
        term = self.keeper.ensure(now, self.config, floor)
        if term is None:
            return False
        self.max_term = max(self.max_term, term)
        self._note_fleet_term()
        return True

    def _note_fleet_term(self) -> None:
        """Warn while a node remembers a proven term this controller has not passed."""
        self.gate.fleet_term_warning(
            self.registry, self.controller_id, self.own_term, self.state.warnings
        )

    @property
    def own_term(self) -> int:
        held = self.keeper.held
        return held.term if held is not None else self.max_term

    def lease_ttl(self, now: float) -> float:
        return self.keeper.ttl(now)

    def in_grace(self, now: float) -> bool:
        return self.grace.active(now, self.config.membership_grace_s)

    # ------------------------------------------------------------------------ inputs
    def node_update(
        self, node_id: str, auth_host: str, update: NodeUpdate, now: float
    ) -> NodeReply:
        with self.lock:
            judge = self.gate.judge(auth_host, self.book.history(), self.profiles)
            try:
                applied = self.registry.apply(node_id, auth_host, update, now, judge)
            except GridError as err:
                self.gate.refused(auth_host, err, node_id, now)  # e.g. another host's record
                raise
            self.gate.review(
                self.registry, applied.host_id, applied.refused_routes, self.own_term, now
            )
            self.views.publish_host(self.registry, self.state.externals, applied.host_id)
            self._note_fleet_term()
            outcomes = [self._acknowledge(applied.host_id, a, now) for a in update.acknowledgements]
            self.gate.receipts(applied.host_id, outcomes, now)
            changed = any(o.result is AckResult.APPLIED for o in outcomes)
            revision = self._bump(safety=applied.safety_changed or changed)
            if changed:
                self._save_quietly(now, "receipt")
            return NodeReply(applied.host_id, revision, outcomes)

    def _acknowledge(self, host_id: str, ack: Any, now: float) -> AckOutcome:
        outcome = self.book.acknowledge(host_id, ack, now)
        result = outcome.result.value
        self.counters.acks[result] = self.counters.acks.get(result, 0) + 1
        record = outcome.record
        if outcome.result is AckResult.APPLIED and record is not None and ack.status == "succeeded":
            fetched = ack.artifact_fetched
            self.timings.learn(record, ack.duration_seconds, fetched, self.profiles, now)
        return outcome

    def observe(self, observations: Iterable[Observation], now: float) -> dict[str, int]:
        accepted = ignored = 0
        with self.lock:
            for obs in observations:
                if self.tracker.observe(obs, now):
                    accepted += 1
                    stamp = min(obs.timestamp, now)
                    if stamp > self.model_last_used_at.get(obs.model_id, 0.0):
                        self.model_last_used_at[obs.model_id] = stamp
                else:
                    ignored += 1
            self.counters.observations_accepted += accepted
            self.counters.observations_ignored += ignored
            if accepted:
                self._bump(safety=False)
        return {"accepted": accepted, "ignored": ignored}

    def observe_request(
        self,
        obs: Observation,
        now: float,
        *,
        served_sha256: str | None = None,
        affinity_digest: str | None = None,
    ) -> bool:
        """One classified request at the proxy boundary. A request that names a configured
        model is demand for it; any other (`auto`, no model) is workload demand only, and the
        model that served it gets outcome evidence for its revision, never demand (its latency
        and throughput the proxy measures itself, into `measured`). True when anything was
        recorded."""
        with self.lock:
            signal = self.signals.observe(
                obs,
                profiles=self.profiles,
                policy=self.policy.portfolio,
                now=now,
                served_sha256=served_sha256,
                affinity_digest=affinity_digest,
            )
            if signal.workload_demand:
                accepted = obs.workload in self.signals.workloads.vocabulary
                self.counters.observations_accepted += int(accepted)
                self.counters.observations_ignored += int(not accepted)
                if accepted:
                    self._bump(safety=False)
                return accepted or signal.evidence
        return self.observe([obs], now)["accepted"] > 0 or signal.evidence

    def request_tick(self) -> int:
        with self.lock:
            return self._bump(safety=False)

    # ------------------------------------------------------------------------ ticks
    def snapshot(self, now: float) -> FleetSnapshot:
        live = self.state.planning_hosts(self.registry.snapshot_hosts(), self.registry.hosts)
        hosts = with_failures(live, self.book.history(), now, self.policy)
        return fleet_snapshot(self.state, hosts, self.measured, now)

    def tick(self, now: float) -> TickReport:
        """One coalesced pass; concurrent callers queue and each sees a tick that started later."""
        with self._tick_lock:
            started = time.perf_counter()
            with self.lock:
                self.grace.start(now)
                revision, safety = self.dirty_revision, self.safety_revision
                snap = self.snapshot(now)
            report = TickReport(ok=False, at=now, revision=revision)
            targets = compute_targets(snap)
            need = PlanNeed(snap, input_digest(plan_inputs(snap, targets)), targets)
            digest, plan_digest, solved_at = need.digest, need.digest, self.last_solved_at
            with self.lock:
                plan = reusable_plan(self.state.last, digest, now, self.config.resolve_interval_s)
            if plan is not None:
                report.reused_plan, report.plan_source = True, "reused"
            else:
                worker = self._plan_worker(len(snap.hosts))
                plan, plan_digest, solved_at = tick_plan(
                    worker, self.planner, self.config, self.state.last, need, report
                )
            with self.lock:
                rev, counters = self.state.revisions, self.counters
                counters.ticks += 1
                note_failures(self.plan_worker, self.warnings)
                rev.processed = max(rev.processed, revision)
                if plan is not None:
                    report.plan_age_s = round(max(0.0, now - solved_at), 3)
                    self._commit(plan, need, plan_digest, now, report)
                report.duration_ms = round((time.perf_counter() - started) * 1000, 2)
                if report.ok:
                    self.last_solved_at = solved_at
                    rev.success = max(rev.success, revision)
                    rev.success_safety = safety
                    self.last_success_at = now
                    counters.tick_ms.append(report.duration_ms)
                    self.warnings.pop("tick_failed", None)
                else:
                    counters.tick_failures += 1
                    self.warn("tick_failed", f"the last tick failed: {report.error}")
                self.last_tick = report
                self.publish_views()
            return report

    def _plan_worker(self, hosts: int) -> PlanWorker | None:
        """The background planner `config.plan_worker` gives a fleet of `hosts` hosts (made
        lazily); None to solve inline, after fencing off whatever a worker still has."""
        kind = self.config.plan_worker_for(hosts)
        if kind == "inline":
            if self.plan_worker is not None:
                self.plan_worker.supersede()
            return None
        if self.plan_worker is None:
            self.plan_worker = PlanWorker(kind, self.config, self.on_plan_ready)
        return self.plan_worker

    def on_plan_ready(self) -> None:
        if self.plan_ready is not None:  # a background plan finished: the service ticks soon
            self.plan_ready()

    def close(self) -> None:
        """Stop the background planner, if any (its unfinished solve is dropped)."""
        if self.plan_worker is not None:
            self.plan_worker.close()

    def ensure_success(self, revision: int, clock: Callable[[], float]) -> bool:
        """Make sure a successful tick covers `revision` (coalesced: one tick serves many)."""
        with self._tick_lock:
            if self.success_revision >= revision:
                return True
            self.tick(clock())
            return self.success_revision >= revision

    def _commit(
        self, plan: Plan, need: PlanNeed, digest: str, now: float, report: TickReport
    ) -> None:
        mode, book, last, snap = self.mode, self.book, self.state.last, need.snap
        try:
            result = reconcile(
                plan,
                snap,
                book.history(),
                mode=mode,
                tombstones=list(self.tombstones.values()),
                now=now,
                targets=need.targets,
                plan_current=digest == need.digest,  # solved for this tick's inputs
            )
        except Exception as exc:
            report.error = f"reconciliation failed: {describe(exc)}"
            return
        generation, fresh = self.generation.advance(digest)
        grace = self.in_grace(now)
        registered = set(self.registry.hosts)
        for withdrawal in result.withdrawn:
            record = book.records.get(withdrawal.action_id)
            if grace and record is not None and record.host_id not in registered:
                continue  # restored command of a host that has not re-registered yet
            if book.withdraw(withdrawal.action_id, now):
                report.withdrawn.append(withdrawal.action_id)
        held, deferred = held_back(
            result, snap, book.history(), registered, self.grace, self.config, now
        )
        actions = [a for a in result.actions if a not in held]
        last.proposed = actions if mode is Mode.RECOMMEND else []
        if mode is Mode.AUTOMATIC and self.store.durable:
            for action in actions:
                issued = book.issue(action, str(generation), now) if action.executable else ""
                if issued:
                    report.issued.append(issued)
        last.plan, last.result, last.deferred = plan, result, deferred
        last.generation, last.plan_digest = generation, digest
        try:
            self.save(now)
        except GridError as err:
            report.error = err.message
            return
        self.counters.issued += len(report.issued)
        report.ok = True
        report.generation, report.new_generation = str(generation), fresh
        report.engine, report.solver_status = plan.solver.engine, plan.solver.status

    # ------------------------------------------------------------------------ delivery, status
    def poll_commands(self, host_id: str, poll_revision: int, now: float) -> Delivery:
        """Commands for `host_id` after a poll at `poll_revision` (steps in `outbox.py`)."""
        with self.lock:
            out = Delivery(commands=[], mode=self.mode, lease_ttl_s=self.lease_ttl(now))
            if self.mode is not Mode.AUTOMATIC or not self.store.durable:
                return out
            if self.success_revision < poll_revision or not self.ensure_lease(now):
                return out
            lease = self.keeper.held
            if lease is None:
                return out
            out.lease_ttl_s = self.lease_ttl(now)
            authority = Authority(
                lease=lease,
                destructive_ok=self.success_safety_revision == self.safety_revision
                and not self.in_grace(now),
            )
            facts = PlanFacts(
                plan=self.last_plan,
                profiles=self.profiles,
                retired=set(self.tombstones),
                policy=self.policy,
            )
            commands, out.held = self.outbox.deliver(host_id, authority, facts, self.config, now)
            out.commands = self.gate.attest(commands)
            return out

    def set_unreachable(self, host_id: str, problems: list[str]) -> None:
        """Background reachability results for a host (grid.api.reachability), at once."""
        with self.lock:
            if self.registry.set_unreachable(host_id, problems):
                self._bump(safety=True)
            self.views.publish_host(self.registry, self.state.externals, host_id)

    def forget_routes(self, host_id: str) -> bool:
        """Drop a host's routes at once (its credential was revoked; see grid.api)."""
        with self.lock:
            dropped = self.registry.forget_routes(host_id)
            if dropped:
                self._bump(safety=True)
                self.views.publish_host(self.registry, self.state.externals, host_id)
            return dropped

    def status(
        self, now: float, *, history: int | None = None, detail: bool = False
    ) -> StatusDocument:
        """The allocator status document (`status.py`; `detail`: operator-only facts too)."""
        with self.lock:
            snap = self.snapshot(now)
            return self.status_view.document(snap, self.config, now, history, detail=detail)

    def last_used_for(self, host_id: str) -> dict[str, float]:
        with self.lock:
            entry = self.registry.hosts.get(host_id)
            if entry is None:
                return {}
            models = {r.model_id for r in entry.host.residencies}
            return {m: t for m, t in sorted(self.model_last_used_at.items()) if m in models}
