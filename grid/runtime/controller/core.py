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

Plans. A tick solves with the configured engine within its budget and falls back to the
heuristic if the engine fails. When the plan's complete inputs (clock-derived facts included, see
`plan_inputs`) equal those of the last proven-optimal or heuristic plan, that plan is kept and
only reconciliation runs, so idle periodic passes and repeated heartbeats stay cheap; the plan
generation changes exactly when those inputs do.

Restart. Membership is not durable; after restoring a valid state, a grace period starting at
the first tick (rebased if the clock moves back) suppresses destructive work, and restored
commands of hosts that have not re-registered are not withdrawn, so an incomplete fleet view
cannot cause unloads.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import ValidationError

from grid.demand import DemandTracker, Observation
from grid.fleet.actions import (
    DESTRUCTIVE_KINDS,
    Action,
    ActionKind,
    Deferral,
    Mode,
    ReconcileResult,
    Tombstone,
)
from grid.fleet.errors import GridError
from grid.fleet.models import FleetSnapshot, ModelProfile, Plan, Policy
from grid.planner.plan import make_plan
from grid.runtime.controller import outbox
from grid.runtime.controller.commands import AckOutcome, AckResult, CommandBook
from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.generation import GenerationCounter, PlanGeneration, input_digest
from grid.runtime.controller.lease import LeaseFile
from grid.runtime.controller.planning import describe, grace_deferral, plan_inputs
from grid.runtime.controller.profiles import validate_profile
from grid.runtime.controller.registry import Registry
from grid.runtime.controller.reports import Counters, Delivery, NodeReply, TickReport
from grid.runtime.controller.state import ControllerDocument
from grid.runtime.controller.store import Store
from grid.runtime.controller.timings import Phase, TimingTable
from grid.runtime.controller.wire import NodeUpdate
from grid.runtime.reconcile import reconcile
from grid.runtime.reconcile.modes import parse_mode

Planner = Callable[..., Plan]
MAX_WARNINGS = 32
REUSABLE_STATUSES = frozenset({"OPTIMAL", "HEURISTIC"})


class Controller:
    def __init__(
        self,
        store: Store,
        *,
        now: float,
        config: ControllerConfig | None = None,
        lease: LeaseFile | None = None,
        planner: Planner = make_plan,
    ) -> None:
        self.config = config or ControllerConfig()
        self.store = store
        self.lease = lease
        self.planner = planner
        self.controller_id = lease.controller_id if lease is not None else secrets.token_hex(8)
        self.lock = threading.RLock()
        self._tick_lock = threading.RLock()
        self.registry = Registry()
        self.warnings: dict[str, str] = {}
        self.counters = Counters()
        self.dirty_revision = 1
        self.safety_revision = 1
        self.processed_revision = 0
        self.success_revision = 0
        self.success_safety_revision = 0
        self.last_plan: Plan | None = None
        self.last_result: ReconcileResult | None = None
        self.last_generation: PlanGeneration | None = None
        self.last_plan_digest = ""
        self.last_solved_at = 0.0
        self.last_tick: TickReport | None = None
        self.last_success_at: float | None = None
        self.last_deferred: list[Deferral] = []
        self.proposed: list[Action] = []
        self.delivery_safety_error: dict[str, Any] | None = None
        self.grace_anchor: float | None = None
        self._restore(now)

    # ------------------------------------------------------------------------ restore, save
    def _restore(self, now: float) -> None:
        loaded = self.store.load()
        if loaded.warning_code:
            self.warn(loaded.warning_code, loaded.warning)
        doc: ControllerDocument | None = None
        if loaded.document is not None:
            try:
                doc = ControllerDocument.model_validate(loaded.document)
            except ValidationError:
                again = self.store.quarantine("it does not match the controller state schema")
                self.warn(again.warning_code, again.warning)
        self.restored = doc is not None
        doc = doc or ControllerDocument()
        self.mode = doc.mode
        self.policy: Policy = doc.policy
        self.profiles: dict[str, ModelProfile] = {p.model_id: p for p in doc.profiles}
        self.tombstones: dict[str, Tombstone] = {
            t.model_id: t for t in doc.tombstones if t.model_id not in self.profiles
        }
        self.generation = (
            GenerationCounter.from_state(doc.generation)
            if doc.generation
            else GenerationCounter.fresh()
        )
        self.max_term = doc.max_term
        self.book = CommandBook(doc.records, doc.commands, doc.issued_seq)
        self.timings = TimingTable.from_state(doc.timings)
        self.model_last_used_at = dict(doc.model_last_used_at)
        self.tracker = self._restore_tracker(doc.demand)
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

    def _restore_tracker(self, state: dict[str, Any]) -> DemandTracker:
        tracker: DemandTracker | None = None
        if state:
            try:
                tracker = DemandTracker.from_state(state, self.config.demand)
            except GridError as err:
                self.warn("demand_state_dropped", f"the demand history was dropped: {err.message}")
        tracker = tracker or DemandTracker(config=self.config.demand)
        tracker.configure(self.profiles, retiring=self.tombstones)
        return tracker

    def document(self, now: float) -> dict[str, Any]:
        self.book.trim()
        doc = ControllerDocument(
            saved_at=now,
            mode=self.mode,
            policy=self.policy,
            profiles=[self.profiles[m] for m in sorted(self.profiles)],
            tombstones=[self.tombstones[m] for m in sorted(self.tombstones)],
            generation=self.generation.to_state(),
            max_term=self.max_term,
            issued_seq=self.book.issued_seq,
            records=self.book.history(),
            commands=[c for _r, c in self.book.pending_commands()]
            + [
                self.book.commands[r.action_id]
                for r in self.book.withdrawn_destructive()
                if r.action_id in self.book.commands
            ],
            timings=self.timings.to_state(),
            demand=self.tracker.to_state(),
            model_last_used_at=self.model_last_used_at,
        )
        return doc.model_dump(mode="json")

    def save(self, now: float) -> None:
        self.store.save(self.document(now))

    def warn(self, code: str, message: str) -> None:
        if not code:
            return
        if code not in self.warnings and len(self.warnings) >= MAX_WARNINGS:
            return
        self.warnings[code] = message

    def _bump(self, *, safety: bool) -> int:
        self.dirty_revision += 1
        if safety:
            self.safety_revision += 1
        return self.dirty_revision

    # ------------------------------------------------------------------------ lease
    def ensure_lease(self, now: float) -> bool:
        if self.lease is None:
            self.warn("no_lease", "no lease file is configured, so automatic commands are held")
            return False
        held = self.lease.held
        ttl = self.config.lease_ttl_s
        if held is not None and held.expires_at - now > ttl * self.config.lease_renew_fraction:
            return True
        try:
            decision = self.lease.acquire(now, floor_term=self.max_term)
        except GridError as err:
            self.warn(err.code, err.message)
            return False
        if not decision.granted or self.lease.held is None:
            self.warn(
                "lease_held",
                f"another controller holds the mutation lease: "
                f"{decision.reason}; automatic commands are held",
            )
            return False
        self.warnings.pop("lease_held", None)
        self.max_term = max(self.max_term, self.lease.held.term)
        return True

    def lease_ttl(self, now: float) -> float:
        if self.lease is None or self.lease.held is None:
            return 0.0
        return max(0.0, self.lease.held.expires_at - now)

    # ------------------------------------------------------------------------ grace
    def in_grace(self, now: float) -> bool:
        if not self.restored:
            return False
        if self.grace_anchor is None:
            return True
        return now < self.grace_anchor + self.config.membership_grace_s

    def _anchor_grace(self, now: float) -> None:
        # The anchor starts at the first tick; a clock that moved back rebases it.
        if self.restored and (self.grace_anchor is None or now < self.grace_anchor):
            self.grace_anchor = now

    # ------------------------------------------------------------------------ inputs
    def node_update(
        self, node_id: str, auth_host: str, update: NodeUpdate, now: float
    ) -> NodeReply:
        with self.lock:
            applied = self.registry.apply(node_id, auth_host, update, now)
            outcomes = [self._acknowledge(applied.host_id, a, now) for a in update.acknowledgements]
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
            profile = self.profiles.get(record.model_id)
            digest = (profile.artifact_sha256 or "") if profile is not None else ""
            if record.kind is ActionKind.WARM:
                self.timings.record(
                    Phase.WARM, host_id, record.model_id, digest, ack.duration_seconds, now
                )
            elif record.kind is ActionKind.LOAD and ack.artifact_fetched:
                self.timings.record(
                    Phase.LOAD, host_id, record.model_id, digest, ack.duration_seconds, now
                )
        return outcome

    def put_profile(self, model_id: str, body: dict[str, Any], now: float) -> ModelProfile:
        profile = validate_profile(model_id, body, now=now)
        with self.lock:
            previous = self.profiles.get(model_id)
            tomb = self.tombstones.pop(model_id, None)
            self.profiles[model_id] = profile
            self._after_profiles_changed()
            try:
                self.save(now)
            except GridError:
                self._restore_profile(model_id, previous, tomb)
                raise
            self._bump(safety=True)
            return profile

    def remove_profile(self, model_id: str, now: float) -> Tombstone:
        with self.lock:
            previous = self.profiles.pop(model_id, None)
            if previous is None:
                raise GridError(
                    "unknown_model",
                    f"no model profile named {model_id!r}",
                    fix="list the profiles with `grid allocator status`",
                    next_command="grid allocator status",
                )
            tomb = Tombstone(model_id=model_id, created_at=now)
            self.tombstones[model_id] = tomb
            self.model_last_used_at.pop(model_id, None)
            self._after_profiles_changed()
            try:
                self.save(now)
            except GridError:
                self._restore_profile(model_id, previous, None)
                raise
            self._bump(safety=True)
            return tomb

    def _restore_profile(
        self, model_id: str, previous: ModelProfile | None, tomb: Tombstone | None
    ) -> None:
        if previous is None:
            self.profiles.pop(model_id, None)
        else:
            self.profiles[model_id] = previous
            self.tombstones.pop(model_id, None)
        if tomb is not None:
            self.tombstones[model_id] = tomb
        self._after_profiles_changed()

    def _after_profiles_changed(self) -> None:
        self.tracker.configure(self.profiles, retiring=self.tombstones)
        self.timings.forget_other_revisions(
            {m: p.artifact_sha256 or "" for m, p in self.profiles.items()}
        )

    def set_mode(self, value: str | Mode, now: float) -> dict[str, Any]:
        chosen = parse_mode(value)
        with self.lock:
            if chosen is Mode.AUTOMATIC:
                if not self.store.durable:
                    raise GridError(
                        "automatic_refused",
                        "automatic mode needs a durable controller state file, and this "
                        "controller has none (or could not quarantine a corrupt one)",
                        fix="restart the controller with a writable --state-dir",
                    )
                if not self.ensure_lease(now):
                    raise GridError(
                        "lease_held",
                        "another controller holds the mutation lease for this state file",
                        fix="stop the other controller, or wait for its lease to expire",
                    )
            previous = self.mode
            withdrawn: list[str] = []
            if previous is Mode.AUTOMATIC and chosen is not Mode.AUTOMATIC:
                withdrawn = self.book.withdraw_undelivered(now)
            self.mode = chosen
            try:
                self.save(now)
            except GridError:
                if chosen is Mode.AUTOMATIC:
                    self.mode = previous
                    raise
                self.warn("state_write_failed", "the mode change could not be saved")
            if previous is Mode.AUTOMATIC and chosen is not Mode.AUTOMATIC and self.lease:
                self.lease.release()
            self._bump(safety=True)
            return {"mode": chosen.value, "previous": previous.value, "withdrawn": withdrawn}

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

    def request_tick(self) -> int:
        with self.lock:
            return self._bump(safety=False)

    # ------------------------------------------------------------------------ ticks
    def snapshot(self, now: float) -> FleetSnapshot:
        hosts = self.registry.snapshot_hosts()
        models = [self.profiles[m] for m in sorted(self.profiles)]
        learned = self.timings.learned_startup(self.profiles, [h.host_id for h in hosts], now)
        self.tracker.prune(now)
        demand = self.tracker.forecast(now, models)
        return FleetSnapshot(
            now=now,
            policy=self.policy,
            hosts=hosts,
            models=models,
            demand=demand,
            learned_startup=learned,
        )

    def tick(self, now: float) -> TickReport:
        """One coalesced pass; concurrent callers queue and each sees a tick that started later."""
        with self._tick_lock:
            started = time.perf_counter()
            with self.lock:
                self._anchor_grace(now)
                revision, safety = self.dirty_revision, self.safety_revision
                snap = self.snapshot(now)
            report = TickReport(ok=False, at=now, revision=revision)
            digest = input_digest(plan_inputs(snap))
            solved_at = self.last_solved_at
            plan = self._reusable_plan(digest, now)
            if plan is not None:
                report.reused_plan = True
            else:
                plan = self._plan(snap, report)
                solved_at = now
            with self.lock:
                self.counters.ticks += 1
                self.processed_revision = max(self.processed_revision, revision)
                if plan is not None:
                    self._commit(plan, snap, digest, now, report)
                report.duration_ms = round((time.perf_counter() - started) * 1000, 2)
                if report.ok:
                    self.last_solved_at = solved_at
                    self.success_revision = max(self.success_revision, revision)
                    self.success_safety_revision = safety
                    self.last_success_at = now
                    self.counters.tick_ms.append(report.duration_ms)
                    self.warnings.pop("tick_failed", None)
                else:
                    self.counters.tick_failures += 1
                    self.warn("tick_failed", f"the last tick failed: {report.error}")
                self.last_tick = report
            return report

    def ensure_success(self, revision: int, clock: Callable[[], float]) -> bool:
        """Make sure a successful tick covers `revision` (coalesced: one tick serves many)."""
        with self._tick_lock:
            if self.success_revision >= revision:
                return True
            self.tick(clock())
            return self.success_revision >= revision

    def _reusable_plan(self, digest: str, now: float) -> Plan | None:
        """The last plan, when its complete inputs (clock-derived facts included) are unchanged.

        A proven-optimal or deterministic heuristic plan is kept for as long as its inputs stay
        the same: re-solving could not improve it. A merely feasible plan (budget exhausted) is
        kept for `resolve_interval_s`, then solved again in case more time finds a better one.
        A heuristic fallback after a failed engine is never kept.
        """
        with self.lock:
            plan = self.last_plan
            if plan is None or digest != self.last_plan_digest:
                return None
            if plan.solver.status in REUSABLE_STATUSES:
                return plan
            fresh = abs(now - self.last_solved_at) < self.config.resolve_interval_s
            return plan if fresh and plan.solver.status != "HEURISTIC_FALLBACK" else None

    def _plan(self, snap: FleetSnapshot, report: TickReport) -> Plan | None:
        cfg = self.config
        try:
            return self.planner(
                snap,
                engine=cfg.engine,
                time_limit_s=cfg.plan_budget_s,
                deterministic=cfg.deterministic,
                soft_stage_limit_s=cfg.soft_stage_budget_s or None,
            )
        except Exception as first:  # the solver must never stop the loop: fall back
            try:
                plan = self.planner(snap, engine="heuristic", time_limit_s=cfg.plan_budget_s)
            except Exception as second:
                report.error = f"planning failed: {describe(first)}; heuristic: {describe(second)}"
                return None
            plan.solver.status = "HEURISTIC_FALLBACK"
            plan.solver.message = f"the {cfg.engine} engine failed: {describe(first)}"
            return plan

    def _commit(
        self, plan: Plan, snap: FleetSnapshot, digest: str, now: float, report: TickReport
    ) -> None:
        mode = self.mode
        try:
            result = reconcile(
                plan,
                snap,
                self.book.history(),
                mode=mode,
                tombstones=list(self.tombstones.values()),
                now=now,
            )
        except Exception as exc:
            report.error = f"reconciliation failed: {describe(exc)}"
            return
        generation, fresh = self.generation.advance(digest)
        grace = self.in_grace(now)
        registered = set(self.registry.hosts)
        for withdrawal in result.withdrawn:
            record = self.book.records.get(withdrawal.action_id)
            if grace and record is not None and record.host_id not in registered:
                continue  # restored command of a host that has not re-registered yet
            if self.book.withdraw(withdrawal.action_id, now):
                report.withdrawn.append(withdrawal.action_id)
        actions, deferred = list(result.actions), list(result.deferred)
        if grace:
            held = [a for a in actions if a.kind in DESTRUCTIVE_KINDS]
            actions = [a for a in actions if a.kind not in DESTRUCTIVE_KINDS]
            deferred += [grace_deferral(a, self.grace_anchor, self.config) for a in held]
        self.proposed = actions if mode is Mode.RECOMMEND else []
        if mode is Mode.AUTOMATIC and self.store.durable:
            for action in actions:
                if action.executable and self.book.issue(action, str(generation), now):
                    report.issued.append(action.action_id)
        self.last_plan, self.last_result, self.last_deferred = plan, result, deferred
        self.last_generation = generation
        self.last_plan_digest = digest
        try:
            self.save(now)
        except GridError as err:
            report.error = err.message
            return
        self.counters.issued += len(report.issued)
        report.ok = True
        report.generation, report.new_generation = str(generation), fresh
        report.engine, report.solver_status = plan.solver.engine, plan.solver.status

    # ------------------------------------------------------------------------ delivery
    def poll_commands(self, host_id: str, poll_revision: int, now: float) -> Delivery:
        """Commands for `host_id` after a poll at `poll_revision` (see `outbox.py`)."""
        return outbox.poll_commands(self, host_id, poll_revision, now)

    def last_used_for(self, host_id: str) -> dict[str, float]:
        with self.lock:
            entry = self.registry.hosts.get(host_id)
            if entry is None:
                return {}
            models = {r.model_id for r in entry.host.residencies}
            return {m: t for m, t in sorted(self.model_last_used_at.items()) if m in models}

    def _save_quietly(self, now: float, what: str) -> None:
        try:
            self.save(now)
        except GridError as err:
            self.warn("state_write_failed", f"a {what} could not be saved: {err.message}")
