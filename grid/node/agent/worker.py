"""The worker: one side effect at a time, on its own thread, from the durable queue.

It persists `in_flight` before each side effect (the durable action-start boundary), checks
`start_check` (authority deadline, local protection, dependencies, local free memory for a WARM),
runs the command through the executor and persists the receipt with its monotonic duration.
The heartbeat thread stays responsive throughout; `finished` wakes it after each command.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from grid.fleet import ADMITTING_STATES, HostState, ReceiptStatus, WireCommand
from grid.node.agent.admission import start_check
from grid.node.agent.commands import CommandExecutor, Outcome
from grid.node.agent.inbox import CommandInbox
from grid.node.agent.state import AgentState, Keeper, receipt_for

log = logging.getLogger("grid.node")
IDLE_POLL_S = 0.5


class Worker:
    def __init__(
        self,
        keeper: Keeper,
        executor: CommandExecutor,
        inbox: CommandInbox,
        *,
        lifecycle: Callable[[], HostState],
        free_mb: Callable[[AgentState, str], int | None],
        finished: Callable[[], None],
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keeper = keeper
        self.executor = executor
        self.inbox = inbox
        self.lifecycle = lifecycle
        self.free_mb = free_mb
        self.finished = finished
        self.clock = clock
        self.monotonic = monotonic
        self.busy_model: str | None = None  # the model a side effect is running for now
        # Local jobs (a settings restart, docs/engines.md), one per model, run between commands.
        self._jobs: dict[str, Callable[[], Outcome]] = {}
        self._jobs_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ control

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="grid-node-worker", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end after the command it runs (it never cuts a side effect)."""
        self._stop.set()
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def submit(self, model_id: str, job: Callable[[], Outcome]) -> None:
        """Run `job` for `model_id` when no command is waiting (once, however often asked)."""
        with self._jobs_lock:
            self._jobs.setdefault(model_id, job)
        self._wake.set()

    def _run_job(self) -> bool:
        with self._jobs_lock:
            if not self._jobs:
                return False
            model_id = next(iter(self._jobs))
            job = self._jobs.pop(model_id)
        self.busy_model = model_id
        try:
            outcome = job()
            log.info("%s: %s %s", model_id, outcome.status.value, outcome.code or outcome.message)
        except Exception:
            log.exception("local job for %s crashed", model_id)
        finally:
            self.busy_model = None
            self.finished()
        return True

    @property
    def idle(self) -> bool:
        state = self.keeper.read()
        return state.in_flight is None and not state.queue

    def wait_idle(self, timeout_s: float) -> bool:
        deadline = self.monotonic() + timeout_s
        while not self.idle:
            if self.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    # ------------------------------------------------------------------ the thread

    def _work(self) -> None:
        while not self._stop.is_set():
            command = self._take_next()
            if command is None and self._run_job():
                continue
            if command is None:
                self._wake.wait(IDLE_POLL_S)
                self._wake.clear()
                continue
            try:
                self._execute(command)
            except Exception as exc:  # never leave in_flight set by a bug
                log.exception("command %s crashed", command.action_id)
                self._finish(command, Outcome(ReceiptStatus.FAILED, str(exc), "node_error"), 0.0)

    def _take_next(self) -> WireCommand | None:
        taken: list[WireCommand] = []

        def change(state: AgentState) -> None:
            if state.in_flight is None and state.queue:
                state.in_flight = state.queue.pop(0)
                taken.append(state.in_flight.command)

        with self.keeper.lock:
            try:
                self.keeper.update(change)
            except OSError as exc:
                log.error("cannot persist the action start; waiting: %s", exc)
                return None
            if taken:
                self.busy_model = taken[0].model_id
        return taken[0] if taken else None

    def _execute(self, command: WireCommand) -> None:
        state = self.keeper.read()
        lifecycle = self.lifecycle()
        verdict = start_check(
            command,
            now_mono=self.monotonic(),
            deadline_mono=self.inbox.take_deadline(command.action_id),
            admits_new_work=lifecycle in ADMITTING_STATES,
            lifecycle=lifecycle.value,
            dependency_status=state.dependency_outcome,
            free_mb=self.free_mb(state, command.model_id) if command.kind == "warm" else 0,
        )
        if not verdict.accepted:
            status = verdict.status or ReceiptStatus.CANCELLED
            self._finish(command, Outcome(status, verdict.message, verdict.code), 0.0)
            return
        log.info("starting %s %s %s", command.action_id, command.kind, command.model_id)
        started = self.monotonic()
        outcome = self.executor.run(command)
        self._finish(command, outcome, self.monotonic() - started)

    def _finish(self, command: WireCommand, outcome: Outcome, duration_s: float) -> None:
        receipt = receipt_for(
            command,
            outcome.status,
            outcome.code,
            outcome.message,
            self.clock(),
            duration_s=duration_s,
            fetched=outcome.artifact_fetched,
        )

        def change(state: AgentState) -> None:
            running = state.in_flight
            if running is not None and running.command.action_id == command.action_id:
                state.in_flight = None
            state.add_receipt(receipt)

        try:
            self.keeper.update(change)
        except OSError as exc:
            log.error("cannot persist the receipt of %s: %s", command.action_id, exc)
        self.busy_model = None
        level = logging.INFO if outcome.status is ReceiptStatus.SUCCEEDED else logging.WARNING
        log.log(
            level,
            "%s %s %s: %s %s (%.2f s)",
            command.action_id,
            command.kind,
            command.model_id,
            outcome.status.value,
            outcome.code or outcome.message,
            duration_s,
        )
        self.finished()
