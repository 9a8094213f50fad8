"""The node agent: heartbeats on one thread, side effects one at a time on a worker thread.

Each heartbeat cycle (every `heartbeat_interval_s`, or sooner when the worker finishes):
1. local protection: the durable override and a telemetry sample go through the pure
   `protection.evaluate`; a decision that refuses admission cancels queued LOAD and WARM work;
2. engines: the supervisor's view of the children is compared with the durable residencies
   (a crashed child becomes FAILED, an adopted one READY again);
3. heartbeats, all carrying the complete registration (a restarted controller forgot this host):
   - an early lease heartbeat (the first one) and a fence heartbeat (whenever the lifecycle
     changes) go out with `request_commands: false`, so registry truth is updated at once;
   - while the worker is idle, one control heartbeat with `request_commands: true` consumes
     commands; while it is busy, a lease heartbeat keeps the route fresh without taking more.
   Every heartbeat carries the receipts the controller has not yet answered.
Accepted commands, the term fence and the plan generation are persisted before the worker may
start anything.

`NodeAgent` holds the state (the durable `Keeper`, the protection decision, whether it stops)
and wires named collaborators with explicit inputs: `ControllerLink` (the heartbeat exchange),
`CommandInbox` (admission, the durable queue, authority deadlines), `Worker` (one side effect at
a time), `CommandExecutor` (the side effects) and `status_document` (status.json).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from grid.fleet import (
    ADMITTING_STATES,
    CONSTRUCTIVE_KINDS,
    HostState,
    NodeReply,
    NodeUpdate,
    ReceiptStatus,
    ResidencyState,
)
from grid.node.agent.admission import local_free_mb, remaining_ttl
from grid.node.agent.commands import CommandExecutor, Outcome
from grid.node.agent.config import NodeConfig
from grid.node.agent.engine_launch import node_launch
from grid.node.agent.inbox import CommandInbox
from grid.node.agent.link import ControllerLink, NodeClient
from grid.node.agent.report import (
    CLAIMING,
    activity_of,
    capacity_mb,
    child_routes,
    disk_free_mb,
    engine_observations,
    envelope,
    external_mb,
    node_body,
    read_memory,
    residency_rows,
    resources_block,
)
from grid.node.agent.state import (
    AgentState,
    AgentStateStore,
    Keeper,
    clear_override,
    read_override,
    recover_after_restart,
)
from grid.node.agent.status import status_document, write_status
from grid.node.agent.telemetry import TelemetrySource
from grid.node.agent.worker import Worker
from grid.node.artifacts import ArtifactStore, predictive_rows
from grid.node.engines import EngineStatus, EngineSupervisor
from grid.node.protection import Decision, ProtectionPolicy, evaluate, most_restrictive

log = logging.getLogger("grid.node")


@dataclass
class AgentDeps:
    supervisor: EngineSupervisor
    artifacts: ArtifactStore
    telemetry: TelemetrySource
    client: NodeClient
    child_pids: Callable[[], list[int]] = field(default=lambda: [])


@dataclass
class HeartbeatResult:
    kind: str  # lease, fence or control
    ok: bool
    commands: int = 0
    error: str = ""


class NodeAgent:
    def __init__(
        self,
        config: NodeConfig,
        state_dir: Path,
        deps: AgentDeps,
        *,
        policy: ProtectionPolicy | None = None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.state_dir = state_dir
        self.deps = deps
        self.policy = policy or ProtectionPolicy.model_validate(config.protection)
        self.clock = clock
        self.monotonic = monotonic
        store = AgentStateStore(state_dir)
        state = store.load(config.host_id)
        ended = recover_after_restart(state, clock())
        self.keeper = Keeper(store, state, clock)
        self.keeper.update(lambda s: None)  # persist the recovery before anything else
        for receipt in ended:
            log.warning("action %s (%s): %s", receipt.action_id, receipt.status, receipt.message)
        self.decision: Decision | None = None
        self.stopping = False
        self.instance = ""  # the launch's instance id, proved by `node start` via status.json
        self.tunnel_status: Callable[[], dict[str, Any]] | None = None  # the relay, for status
        self._wake_loop = threading.Event()
        self.link = ControllerLink(deps.client, config.record_id, clock=clock, monotonic=monotonic)
        self.inbox = CommandInbox(self.keeper, config.host_id, clock=clock, monotonic=monotonic)
        self.executor = CommandExecutor(
            config, self.keeper, deps.supervisor, deps.artifacts, clock=clock
        )
        self.worker = Worker(
            self.keeper,
            self.executor,
            self.inbox,
            lifecycle=lambda: self._lifecycle(self.decision),
            free_mb=self.free_mb,
            finished=self.wake,
            clock=clock,
            monotonic=monotonic,
        )

    # ------------------------------------------------------------------ lifecycle

    def start_worker(self) -> None:
        self.worker.start()

    def run(self, stop: threading.Event, *, force_stop: Callable[[], bool] = lambda: False) -> None:
        """Heartbeat until `stop` is set, then shut down gracefully."""
        self.start_worker()
        while not stop.is_set():
            try:
                self.cycle()
            except Exception:  # the loop must outlive any one bad cycle
                log.exception("heartbeat cycle failed")
            self._wake_loop.wait(self.config.heartbeat_interval_s)
            self._wake_loop.clear()
        self.shutdown(force=force_stop())

    def wake(self) -> None:
        self._wake_loop.set()

    @property
    def worker_idle(self) -> bool:
        return self.worker.idle

    def wait_idle(self, timeout_s: float) -> bool:
        return self.worker.wait_idle(timeout_s)

    def shutdown(self, *, force: bool = False) -> list[Outcome]:
        """Graceful stop: fence, finish the running action, stop owned children, report."""
        self.stopping = True
        self.inbox.cancel_queued(lambda _c: True, "agent_stopping", "the node agent is stopping")
        self.wait_idle(self.config.ready_timeout_s + self.config.stop_grace_s + 5.0)
        self.worker.stop()
        self.cycle()  # the fence heartbeat: draining, no commands taken
        outcomes: list[Outcome] = []
        for model_id, record in sorted(self.keeper.read().residencies.items()):
            if record.state not in CLAIMING or record.state is ResidencyState.LOADING:
                continue
            if record.state is ResidencyState.READY:
                self.executor.drain(model_id)
            outcome = self.executor.unload(model_id)
            if outcome.status is not ReceiptStatus.SUCCEEDED and force:
                outcome = self.executor.unload(model_id, force=True)
            if outcome.status is not ReceiptStatus.SUCCEEDED:
                log.warning("left %s running: %s", model_id, outcome.message)
            outcomes.append(outcome)
        self.cycle()  # report the released memory
        return outcomes

    # ------------------------------------------------------------------ one cycle

    def cycle(self) -> list[HeartbeatResult]:
        now = self.clock()
        decision = self._protect(now)
        lifecycle = self._lifecycle(decision)
        if lifecycle not in ADMITTING_STATES:
            self.inbox.cancel_queued(
                lambda c: c.kind in CONSTRUCTIVE_KINDS,
                "local_protection",
                f"this host became {lifecycle.value} by its local protection",
            )
        statuses = self._observe_engines()
        results: list[HeartbeatResult] = []
        fence = self.link.reported_lifecycle != lifecycle.value
        if fence or not self.link.registered:
            results.append(self._send(lifecycle, decision, kind="fence" if fence else "lease"))
        # No commands while nothing can be made durable (the fence and the queue are durable).
        durable = not self.keeper.fault
        if self.link.registered and not self.stopping and self.worker_idle and durable:
            results.append(self._send(lifecycle, decision, kind="control"))
        elif not results:
            results.append(self._send(lifecycle, decision, kind="lease"))
        doc = status_document(
            config=self.config,
            instance=self.instance,
            lifecycle=lifecycle,
            decision=decision,
            stopping=self.stopping,
            link=self.link,
            state=self.keeper.read(),
            statuses=statuses,
            now=self.clock(),
        )
        if self.tunnel_status is not None:
            doc.relay = self.tunnel_status()
        try:
            write_status(self.state_dir, doc)
        except OSError as exc:
            log.error("cannot write status.json: %s", exc)
        return results

    def _protect(self, now: float) -> Decision:
        override = read_override(self.state_dir)
        if override is not None and not override.active_at(now):
            clear_override(self.state_dir)  # expired: the host returns to its own judgement
            override = None
        telemetry = self.deps.telemetry.read(override)
        decision, protection = evaluate(telemetry, self.keeper.read().protection, self.policy, now)

        def keep(state: AgentState) -> None:
            state.protection = protection

        try:
            self.keeper.update(keep)
        except OSError as exc:
            log.error("cannot persist the protection state: %s", exc)
        self.decision = decision
        return decision

    def _lifecycle(self, decision: Decision | None) -> HostState:
        """The protection verdict, tightened to draining while the agent stops (and before the
        first verdict exists)."""
        lifecycle = decision.lifecycle if decision is not None else HostState.DRAINING
        if self.stopping:
            lifecycle = most_restrictive(lifecycle, HostState.DRAINING)
        if self.keeper.fault:  # an unwritable state folder: report it, take no new work
            lifecycle = most_restrictive(lifecycle, HostState.UNHEALTHY)
        return lifecycle

    def _observe_engines(self) -> dict[str, EngineStatus]:
        """Poll the children once per cycle; returns what was seen (status.json reuses it)."""
        statuses = self.deps.supervisor.poll()
        changes = engine_observations(
            self.keeper.read().residencies, statuses, self.worker.busy_model
        )
        if not changes:
            return statuses

        def apply(state: AgentState) -> None:
            for change in changes:
                record = state.residencies.get(change.model_id)
                if record is None or change.model_id == self.worker.busy_model:
                    continue
                state.residencies[change.model_id] = record.model_copy(
                    update={"state": change.state, "reason": change.reason[:300]}
                )

        for change in changes:
            log.warning("%s is now %s: %s", change.model_id, change.state.value, change.reason)
        try:
            self.keeper.update(apply)
        except OSError as exc:  # reported as unhealthy; the heartbeats go on
            log.error("cannot persist engine observations: %s", exc)
        return statuses

    # ------------------------------------------------------------------ heartbeats

    def _activity(self, state: AgentState) -> dict[str, int | None]:
        active: dict[str, int | None] = {}
        for model_id, record in state.residencies.items():
            status = self.deps.supervisor.status(model_id)
            if activity_of(status, record):
                probe = self.deps.supervisor.activity(model_id)
                active[model_id] = probe.processing if probe.state.value != "unknown" else None
            elif record.state is ResidencyState.FAILED:
                # A retained live process we cannot read may be working: unknown, fail safe.
                active[model_id] = None if status is not None and status.pid is not None else 0
            else:
                active[model_id] = 0
        return active

    def build_body(
        self, lifecycle: HostState, decision: Decision, *, request: bool
    ) -> tuple[NodeUpdate, list[str]]:
        state = self.keeper.read()
        reading = read_memory(self.deps.child_pids())
        disk = disk_free_mb(self.state_dir, self.config.disk_share)
        cached = [m for m, a in state.artifacts.items() if Path(a.path).is_file()]
        cached += [e.model_id for e in self.config.catalog if Path(e.path).is_file()]
        present = [m for m, r in state.predictive.items() if Path(r.path).is_file()]
        rows = residency_rows(
            state.residencies, self._activity(state), state.model_last_used_at, self.clock()
        )
        throttle = decision.throttle_fraction if lifecycle is decision.lifecycle else 0.0
        supervisor = self.deps.supervisor
        routes = child_routes(
            state.residencies, {m: supervisor.status(m) for m in state.residencies}, state.grants
        )
        # Over the relay the engine key stays here (the tunnel adds it); the direct loopback
        # path hands it to the controller on this machine.
        relay = self.config.relay
        block = envelope(
            lifecycle=lifecycle.value,
            throttle_fraction=throttle,
            cached_models=cached,
            rows=rows,
            disk_free=disk,
            routes=routes,
            engine_key=supervisor.engine_key if routes and not relay else None,
            predictive=predictive_rows(state.predictive, present, self.clock()),
        )
        if relay:
            block.relay = True
        if self.keeper.fault:
            block.problems = [self.keeper.fault[:300]]
        if self.config.advertise_address:  # this host's address (status shows it)
            block.advertise_address = self.config.advertise_address
        if state.highest_term:  # the fence, so a controller without state can out-term it
            block.highest_term = state.highest_term
            block.controller_id = state.controller_id
            if state.term_proof:  # the controller's proof of it: only a proven term is adopted
                block.term_proof = state.term_proof
        acks = state.unacknowledged()
        busy = 1 if state.in_flight is not None else 0
        body = node_body(
            self.config,
            resources_block(self.config, reading, disk),
            block,
            rows,
            request_commands=request,
            acknowledgements=[r.wire() for r in acks],
            active_tasks=busy + len(state.queue),
        )
        return body, [r.action_id for r in acks]

    def _send(self, lifecycle: HostState, decision: Decision, *, kind: str) -> HeartbeatResult:
        request = kind == "control"
        body, ack_ids = self.build_body(lifecycle, decision, request=request)
        exchange = self.link.exchange(kind, body)
        if exchange is None:
            return HeartbeatResult(kind, False, error=self.link.last_error)
        reply = exchange.reply
        self._after_reply(reply, set(ack_ids))
        commands = reply.allocator.commands if request else []
        if commands:
            ttl = remaining_ttl(reply.allocator.controller_lease_ttl_seconds, exchange.duration_s)
            if self.inbox.accept([c for c in commands if isinstance(c, dict)], ttl):
                self.worker.wake()
        return HeartbeatResult(kind, True, commands=len(commands))

    def _after_reply(self, reply: NodeReply, ack_ids: set[str]) -> None:
        clean = {m: t for m, t in reply.model_last_used_at.items() if t >= 0}

        def change(state: AgentState) -> None:
            state.mark_acknowledged(ack_ids)
            for model_id, stamp in clean.items():
                # The watermark is monotonic: an older server answer never moves it back.
                if stamp > state.model_last_used_at.get(model_id, 0.0):
                    state.model_last_used_at[model_id] = stamp

        if ack_ids or clean:
            try:
                self.keeper.update(change)
            except OSError as exc:
                log.error("cannot persist acknowledgements: %s", exc)
        self._restart_changed_settings(reply)

    def _restart_changed_settings(self, reply: NodeReply) -> None:
        """A READY child whose launch facts (with this host's overrides) give another command
        line is restarted by the worker, between commands (docs/engines.md)."""
        residencies = self.keeper.read().residencies
        for model_id, launch in reply.launch.items():
            record = residencies.get(model_id)
            if record is None or record.state is not ResidencyState.READY or not record.model_path:
                continue
            spec = node_launch(
                self.config, model_id, launch, launch.chat_template, record.model_path
            )
            if self.deps.supervisor.settings_changed(model_id, spec):
                log.info("%s: engine settings changed; restarting it when idle", model_id)
                self.worker.submit(
                    model_id, partial(self.executor.restart_for_settings, model_id, launch)
                )

    def free_mb(self, state: AgentState, model_id: str) -> int | None:
        reading = read_memory(self.deps.child_pids())
        live = sum(
            r.memory_mb
            for m, r in state.residencies.items()
            if m != model_id and r.state in CLAIMING
        )
        return local_free_mb(
            capacity_mb=capacity_mb(self.config, reading),
            reserved_mb=self.config.reserved_mb,
            external_mb=external_mb(self.config, reading),
            managed_live_mb=live,
            physical_available_mb=reading.available_mb,
        )
