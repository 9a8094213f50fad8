"""The operations the HTTP layer calls on the controller, one method each (mixed into
`Controller`): saving, profiles and the mode, external endpoints, evaluations, the metrics view,
the UI's facts, and the heartbeat, whose whole reply is assembled here.

Each takes the controller's lock itself; no caller outside `grid/runtime/controller` takes it
or reads the registry (tests/test_architecture.py). What changes the routes republishes the
routing view (views.py) before the lock is released.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

from grid.fleet import (
    AckAnswer,
    ExternalEndpoint,
    ExternalHealth,
    FleetSnapshot,
    GridError,
    Mode,
    ModelProfile,
    ReplyAllocator,
    Tombstone,
    WireLaunch,
)
from grid.fleet import NodeReply as WireNodeReply
from grid.fleet.operator import ExternalView, RecordedEvaluation, StatusDocument
from grid.runtime.controller.engine_restarts import serving_view, stage_restarts
from grid.runtime.controller.evidence_store import (
    EvaluationRequest,
    keeper_for,
)
from grid.runtime.controller.live_state import ControllerState
from grid.runtime.controller.profiles import validate_profile
from grid.runtime.controller.registry import Registry
from grid.runtime.controller.views import MetricsView, ViewPublisher, unmet_replicas
from grid.runtime.controller.wire import NodeUpdate
from grid.runtime.reconcile import parse_mode

if TYPE_CHECKING:
    from grid.runtime.controller.authority import LeaseKeeper
    from grid.runtime.controller.config import ControllerConfig
    from grid.runtime.controller.gatekeeper import Gatekeeper
    from grid.runtime.controller.reports import Delivery, NodeReply
    from grid.runtime.controller.status import StatusView
    from grid.runtime.controller.store import Store


class TickDriver(Protocol):
    """The wall clock and the background loop (ControllerService is one)."""

    def clock(self) -> float: ...
    def ensure_tick(self, revision: int) -> bool: ...
    def notify(self) -> None: ...


class Reachability(Protocol):
    """Background probes of a host's advertised engine routes (grid.api.reachability)."""

    def submit(self, host_id: str, address: str | None, ports: list[int]) -> object: ...
    def problems(self, host_id: str) -> list[str]: ...


class Operations:
    lock: threading.RLock
    state: ControllerState
    store: Store
    registry: Registry
    keeper: LeaseKeeper
    config: ControllerConfig
    gate: Gatekeeper
    views: ViewPublisher
    status_view: StatusView

    if TYPE_CHECKING:

        def ensure_lease(self, now: float) -> bool: ...
        def lease_ttl(self, now: float) -> float: ...
        def snapshot(self, now: float) -> FleetSnapshot: ...
        def node_update(
            self, node_id: str, auth_host: str, update: NodeUpdate, now: float
        ) -> NodeReply: ...
        def poll_commands(self, host_id: str, poll_revision: int, now: float) -> Delivery: ...
        def set_unreachable(self, host_id: str, problems: list[str]) -> None: ...
        def last_used_for(self, host_id: str) -> dict[str, float]: ...

    # ------------------------------------------------------------------------ state, save
    def document(self, now: float) -> dict[str, Any]:
        return self.state.document(now)

    def save(self, now: float) -> None:
        self.store.save(self.state.document(now))

    def warn(self, code: str, message: str) -> None:
        self.state.warnings.warn(code, message)

    def _bump(self, *, safety: bool) -> int:
        return self.state.revisions.bump(safety=safety)

    def _save_quietly(self, now: float, what: str) -> None:
        try:
            self.save(now)
        except GridError as err:
            self.warn("state_write_failed", f"a {what} could not be saved: {err.message}")

    def publish_views(self) -> None:
        """Republish every view from the current state (after a bulk change to the registry)."""
        with self.lock:
            self.views.publish_all(self.registry, self.state.externals)
            last = self.state.last
            self.views.publish_plan(last.plan, last.generation)

    # ------------------------------------------------------------------------ profiles, mode
    def put_profile(self, model_id: str, body: dict[str, Any], now: float) -> ModelProfile:
        state = self.state
        profile = validate_profile(
            model_id, body, now=now, vocabulary=state.policy.workload_vocabulary
        )
        with self.lock:
            previous = state.profiles.get(model_id)
            tomb = state.tombstones.pop(model_id, None)
            state.profiles[model_id] = profile
            state.configure_tracking()
            try:
                self.save(now)
            except GridError:
                self._restore_profile(model_id, previous, tomb)
                raise
            self._bump(safety=True)
            return profile

    def remove_profile(self, model_id: str, now: float) -> Tombstone:
        state = self.state
        with self.lock:
            previous = state.profiles.pop(model_id, None)
            if previous is None:
                raise GridError(
                    "unknown_model",
                    f"no model profile named {model_id!r}",
                    fix="list the profiles with `grid allocator status`",
                    next_command="grid allocator status",
                )
            tomb = Tombstone(model_id=model_id, created_at=now)
            state.tombstones[model_id] = tomb
            state.model_last_used_at.pop(model_id, None)
            state.configure_tracking()
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
        state = self.state
        if previous is None:
            state.profiles.pop(model_id, None)
        else:
            state.profiles[model_id] = previous
            state.tombstones.pop(model_id, None)
        if tomb is not None:
            state.tombstones[model_id] = tomb
        state.configure_tracking()

    def set_mode(self, value: str | Mode, now: float) -> dict[str, Any]:
        chosen, state = parse_mode(value), self.state
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
                    raise self.keeper.refusal_error()
            previous = state.mode
            withdrawn: list[str] = []
            if previous is Mode.AUTOMATIC and chosen is not Mode.AUTOMATIC:
                withdrawn = state.book.withdraw_undelivered(now)
            state.mode = chosen
            try:
                self.save(now)
            except GridError:
                if chosen is Mode.AUTOMATIC:
                    state.mode = previous
                    raise
                self.warn("state_write_failed", "the mode change could not be saved")
            if previous is Mode.AUTOMATIC and chosen is not Mode.AUTOMATIC:
                self.keeper.release()
            self._bump(safety=True)
            return {"mode": chosen.value, "previous": previous.value, "withdrawn": withdrawn}

    # ------------------------------------------------------------------------ externals
    def put_external(self, endpoint: ExternalEndpoint, now: float) -> None:
        """Save an external endpoint (its health is probed afresh); refused when a registered
        node uses its name."""
        name = endpoint.name
        with self.lock:
            if name in self.registry.hosts:
                raise GridError(
                    "external_name_taken",
                    f"{name} is a registered node's host id",
                    fix="name the external endpoint differently",
                    next_command="grid node list-external",
                    details={"http_status": 409},
                )
            inventory = self.state.externals
            previous = inventory.records.get(name)
            inventory.records[name] = endpoint
            inventory.health.pop(name, None)
            try:
                self.save(now)
            except GridError:
                if previous is None:
                    del inventory.records[name]
                else:
                    inventory.records[name] = previous
                raise
            self._externals_changed()

    def remove_external(self, name: str, now: float) -> None:
        with self.lock:
            inventory = self.state.externals
            record = inventory.records.pop(name, None)
            if record is None:
                raise GridError(
                    "unknown_external",
                    f"no external endpoint named {name!r}",
                    fix="list them first",
                    next_command="grid node list-external",
                    details={"http_status": 404},
                )
            inventory.health.pop(name, None)
            try:
                self.save(now)
            except GridError:
                inventory.records[name] = record
                raise
            self._externals_changed()

    def _externals_changed(self) -> None:
        self._bump(safety=True)  # the snapshot's hosts changed
        self.views.publish_externals(self.registry, self.state.externals)

    def record_external_health(self, name: str, health: ExternalHealth) -> bool:
        """Keep a probe's (or a request's) verdict; True when what the planner sees changed.
        The routes are republished either way (a good probe renews their lease)."""
        with self.lock:
            changed = self.state.externals.record_health(name, health)
            if changed:
                self._bump(safety=True)
            self.views.publish_externals(self.registry, self.state.externals)
            return changed

    def external_records(self) -> list[ExternalEndpoint]:
        with self.lock:
            return list(self.state.externals.to_state())

    def external_rows(self, names: list[str] | None = None) -> list[ExternalView]:
        """Each endpoint (those in `names`, else all) with its health and the models routed."""
        with self.lock:
            inventory = self.state.externals
            return [
                ExternalView(
                    external=inventory.records[n].model_copy(deep=True),
                    health=inventory.health_of(n).model_copy(deep=True),
                    serving=inventory.serving(n),
                )
                for n in (sorted(inventory.records) if names is None else names)
                if n in inventory.records
            ]

    # ------------------------------------------------------------------------ evaluations
    def record_evaluation(
        self, body: EvaluationRequest, now: float
    ) -> tuple[RecordedEvaluation, int]:
        """Record an operator's labelled quality (refusals in evidence_store.py) and mark the
        plan dirty; the evaluation and the new revision."""
        with self.lock:  # the profiles and the policy cannot change under the check
            recorded = keeper_for(self).record_evaluation(
                body,
                profiles=self.state.profiles,
                vocabulary=self.state.policy.workload_vocabulary,
                policy=self.state.policy.portfolio,
                now=now,
            )
            return recorded, self._bump(safety=False)

    # ------------------------------------------------------------------------ read views
    def metrics_view(self, now: float) -> MetricsView:
        with self.lock:
            c, rev, state = self.state.counters, self.state.revisions, self.state
            return MetricsView(
                mode=state.mode.value,
                ticks=c.ticks,
                tick_failures=c.tick_failures,
                tick_ms=tuple(c.tick_ms),
                issued=c.issued,
                delivered=c.delivered,
                acks=tuple(sorted(c.acks.items())),
                observations_accepted=c.observations_accepted,
                observations_ignored=c.observations_ignored,
                hosts=len(self.registry.hosts),
                profiles=len(state.profiles),
                open_commands=len(state.book.open_records()),
                unmet_replicas=unmet_replicas(state.last.plan),
                revisions=(
                    ("dirty", rev.dirty),
                    ("processed", rev.processed),
                    ("success", rev.success),
                    ("safety", rev.safety),
                ),
                lease_ttl_s=round(self.lease_ttl(now), 3),
                warnings=len(state.warnings),
            )

    def fleet_facts(
        self, now: float, history: int
    ) -> tuple[StatusDocument, FleetSnapshot, dict[str, str]]:
        """The dashboard's inputs read together: the status document, the planning snapshot
        it was built from and the operator drains."""
        with self.lock:
            snap = self.snapshot(now)
            status = self.status_view.document(snap, self.config, now, history)
            return status, snap, dict(self.state.host_drains)

    # ------------------------------------------------------------------------ heartbeat
    def launch_for(self, host_id: str, now: float) -> dict[str, WireLaunch]:
        """The launch facts a reply carries for the host's models, staged (engine_restarts.py)."""
        state = self.state
        with self.lock:
            if host_id not in self.registry.hosts:
                return {}
            profiles = [state.profiles[m] for m in sorted(state.profiles)]
            hosts = state.drained(self.registry.snapshot_hosts())
            view = serving_view(hosts, profiles, state.policy, now)
            allowed, state.restart_grants = stage_restarts(
                view, host_id, state.restart_grants, self.config.restart_hold_s
            )
            return {m: WireLaunch.of(state.profiles[m]) for m in sorted(allowed)}

    def handle_heartbeat(
        self,
        node_id: str,
        auth_host: str,
        update: NodeUpdate,
        driver: TickDriver,
        reach: Reachability,
    ) -> WireNodeReply:
        """One PUT /nodes/{node_id}: fold the update, probe its routes in the background, run
        or ask for a pass, deliver the host's commands and assemble the whole reply."""
        reply = self.node_update(node_id, auth_host, update, driver.clock())
        host_id = reply.host_id
        if update.allocator is not None:  # the accepted routes are probed, never waited for
            with self.lock:
                entry = self.registry.hosts.get(host_id)
                ports = [r.port for r in entry.routes] if entry is not None else []
            # A relay node is never dialled (its engines are reached over its tunnel).
            envelope = update.allocator
            reach.submit(host_id, None if envelope.relay else envelope.advertise_address, ports)
            self.set_unreachable(host_id, reach.problems(host_id))  # cached verdicts
        commands: list[dict[str, Any]] = []
        held: list[str] = []
        if update.request_commands and self.gate.may_force_tick(auth_host, driver.clock()):
            driver.ensure_tick(reply.revision)
            delivery = self.poll_commands(auth_host, reply.revision, driver.clock())
            commands, held = delivery.commands, delivery.held
        elif not self.gate.suspect(auth_host, driver.clock()):
            driver.notify()  # a background pass soon (a suspect's updates wait for the periodic)
        now = driver.clock()
        return WireNodeReply(
            node_id=node_id,
            host_id=host_id,
            ttl_seconds=self.config.node_ttl_s,
            model_last_used_at=self.last_used_for(host_id),
            acknowledgements=[
                AckAnswer(action_id=o.action_id, result=o.result.value)
                for o in reply.acknowledgements
            ],
            allocator=ReplyAllocator(
                schema_version=1,
                mode=self.state.mode.value,
                controller_lease_ttl_seconds=round(self.lease_ttl(now), 3),
                revision=reply.revision,
                commands=commands,
                held_destructive=held,
            ),
            launch=self.launch_for(host_id, now),
        )
