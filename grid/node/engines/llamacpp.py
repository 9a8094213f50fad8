"""The one side-effect wrapper for llama-server children: spawn, prove, adopt, probe, stop.

Safety rules (spec, "Managed host actuator"):
- PID and port are persisted right after spawn, then the executable and birth marker, before
  readiness is awaited; if either write fails the child is stopped at once.
- After an agent restart a surviving child is adopted only when its birth marker, executable and
  exact argv (model path, alias, port, key file) match the record. A live process that cannot be
  proved stays FAILED: it is never signalled and its model is never started a second time.
- Stop drains first (busy or unknown activity refuses unless forced), then SIGTERM, a bounded
  wait, and SIGKILL only for a process proved to be ours immediately before the signal.
- The engine key reaches the child only through the 0600 key file (`--api-key-file`); the child
  gets a scrubbed environment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from grid.fleet.errors import GridError
from grid.node.engines.adapters import LLAMA_CPP, LaunchSpec, adapter_for
from grid.node.engines.base import EngineState, EngineStatus, StopResult
from grid.node.engines.binary import llama_server_binary
from grid.node.engines.launch import (
    LlamaCppConfig,
    allocate_port,
    argv_contradiction,
    child_env,
    launch_spec,
    log_path,
    log_tail,
    where,
)
from grid.node.engines.probes import Activity, ActivityState, auth_headers
from grid.node.engines.proc import identity_mismatch, is_alive, read_identity
from grid.node.engines.state import BirthRecord, EngineRecord, EngineStateStore

__all__ = ["LlamaCppConfig", "LlamaCppSupervisor"]


@dataclass
class _Engine:
    record: EngineRecord
    state: EngineState
    proven: bool
    reason: str = ""
    stopping: bool = False  # a stop is signalling it: warm must not join it
    spec: LaunchSpec | None = None  # what it was started with (None: adopted)
    # Set only when this instance spawned the child: the handle itself proves identity and
    # lets us reap it. Adopted children are proved through /proc instead.
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)


class LlamaCppSupervisor:
    """Supervises one llama-server child per model on this host."""

    def __init__(
        self,
        config: LlamaCppConfig,
        *,
        store: EngineStateStore | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        # Absolute paths: the child runs in the state folder, and its argv must stay exact.
        self._config = dataclasses.replace(config, state_dir=config.state_dir.absolute())
        self._store = store or EngineStateStore(self._config.state_dir)
        self._lock = threading.RLock()
        self._doc = self._store.load_or_init()
        self._engines: dict[str, _Engine] = {}
        self._failures: dict[str, str] = {}  # crashed children whose handle was released
        self._http = http or httpx.Client(trust_env=False)
        self._recover()

    # ------------------------------------------------------------------ public surface

    @property
    def engine_key(self) -> str:
        return self._doc.engine_key

    @property
    def key_file(self) -> Path:
        return self._store.key_path

    def base_url(self, port: int) -> str:
        host = self._config.host
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def status(self, model_id: str) -> EngineStatus | None:
        with self._lock:
            engine = self._engines.get(model_id)
            if engine is not None:
                return self._status_of(engine)
            if model_id in self._failures:
                return EngineStatus(model_id, EngineState.FAILED, reason=self._failures[model_id])
            return None

    def statuses(self) -> dict[str, EngineStatus]:
        with self._lock:
            out = {
                model_id: EngineStatus(model_id, EngineState.FAILED, reason=reason)
                for model_id, reason in self._failures.items()
            }
            out.update({mid: self._status_of(e) for mid, e in self._engines.items()})
            return out

    def warm(
        self,
        model_id: str,
        model_path: Path,
        *,
        chat_template: str | None = None,
        spec: LaunchSpec | None = None,
    ) -> EngineStatus:
        """Start (or join) the child for `model_id` and return once it answers readiness.

        A running child whose command line differs from the one `spec` gives now (its engine
        settings changed) is drained and stopped first, then started again with the new one."""
        model_path = model_path.absolute()
        launch = launch_spec(self._config, model_id, model_path, chat_template, spec)
        if self.settings_changed(model_id, launch):
            self.stop(model_id, drain_timeout_s=self._config.stop_grace_s)
        with self._lock:
            engine = self._engines.get(model_id)
            if engine is not None:
                self._refresh(engine)
                engine = self._engines.get(model_id)
            if engine is None:
                engine = self._spawn(model_id, model_path, launch)
            elif not engine.proven:
                raise self._unproven_error(engine)
            elif engine.stopping:
                raise GridError(
                    code="engine_stopping",
                    message=f"The {model_id} engine is being stopped.",
                    fix="Warm it again once the stop has finished.",
                )
            elif Path(engine.record.model_path) != model_path:
                raise GridError(
                    code="engine_model_mismatch",
                    message=(
                        f"{model_id} already runs from {engine.record.model_path}, "
                        f"not {model_path}."
                    ),
                    fix="Stop the running engine first, then warm the new artifact.",
                )
        return self._await_ready(engine)

    def wanted_argv(self, model_id: str, launch: LaunchSpec, port: int) -> list[str]:
        """The command line `launch` gives on `port` (an uninstalled runtime: empty)."""
        adapter = adapter_for(launch.runtime)
        place = where(self._config, port, self._store.key_path)
        try:
            binary = self._binary_for(adapter.runtime, launch, port)
        except GridError:
            return []
        argv = adapter.argv(binary, launch, place)
        return argv + list(self._config.extra_args) if adapter.runtime == LLAMA_CPP else argv

    def settings_changed(self, model_id: str, launch: LaunchSpec) -> bool:
        """Does the running, proven child of `model_id` run another command line than the one
        `launch` gives (settings, kind, pooling or runtime changed)?"""
        with self._lock:
            engine = self._engines.get(model_id)
            if engine is None or not engine.proven or engine.stopping:
                return False
            record = engine.record
        if Path(record.model_path) != Path(launch.model_path):
            return False  # another artifact: warm refuses it (engine_model_mismatch)
        return self.wanted_argv(model_id, launch, record.port) != record.argv

    def activity(self, model_id: str) -> Activity:
        with self._lock:
            engine = self._engines.get(model_id)
            if engine is None:
                return Activity(ActivityState.UNKNOWN, reason="no engine for this model")
            if not engine.proven:
                return Activity(ActivityState.UNKNOWN, reason="engine identity not proved")
            port, runtime = engine.record.port, engine.record.runtime
        return adapter_for(runtime).activity(
            self._http, self.base_url(port), self.engine_key, self._config.probe_timeout_s
        )

    def poll(self) -> dict[str, EngineStatus]:
        """Liveness of every child: crashes become FAILED (handle released), adopted children
        that were waiting are promoted to READY, unproven ones are proved again."""
        with self._lock:
            snapshot = list(self._engines.values())
        for engine in snapshot:
            promote = (
                engine.proven and engine.state is EngineState.STARTING and engine.popen is None
            )
            ready = promote and self._probe_ready(engine.record)
            with self._lock:
                if self._engines.get(engine.record.model_id) is not engine:
                    continue  # replaced or stopped while we probed: commit nothing
                self._refresh(engine)
                if ready and engine.proven and engine.state is EngineState.STARTING:
                    engine.state = EngineState.READY
        return self.statuses()

    def stop(
        self, model_id: str, *, force: bool = False, drain_timeout_s: float = 0.0
    ) -> StopResult:
        """Drain check, SIGTERM, bounded wait, SIGKILL for a proven child; idempotent."""
        with self._lock:
            engine = self._engines.get(model_id)
            if engine is not None:
                self._refresh(engine)
                engine = self._engines.get(model_id)
            if engine is None:
                self._failures.pop(model_id, None)
                return StopResult(model_id, stopped=False, reason="no running engine")
            if not engine.proven:
                raise self._unproven_error(engine)
        if not force:
            self._require_idle(model_id, drain_timeout_s)
        with self._lock:
            if self._engines.get(model_id) is not engine:
                return StopResult(model_id, stopped=False, reason="engine changed during drain")
            engine.stopping = True
        # Signals and waits run outside the lock so heartbeats (poll, status) stay responsive.
        return self._terminate(engine, forced=force)

    def stop_all(self, *, force: bool = True) -> list[StopResult]:
        with self._lock:
            model_ids = [mid for mid, e in self._engines.items() if e.proven]
        return [self.stop(mid, force=force) for mid in model_ids]

    def close(self) -> None:
        """Release the HTTP client; children keep running (a restarted agent adopts them)."""
        self._http.close()

    # ------------------------------------------------------------------ spawn

    def _binary_path(self) -> Path:
        return self._config.binary if self._config.binary is not None else llama_server_binary()

    def _binary_for(self, runtime: str, launch: LaunchSpec, port: int) -> Path:
        if runtime == LLAMA_CPP:
            return self._binary_path()
        place = where(self._config, port, self._store.key_path)
        return adapter_for(runtime).binary(None, launch, place)

    def _spawn(self, model_id: str, model_path: Path, launch: LaunchSpec) -> _Engine:
        if not model_path.is_file():
            raise GridError(
                code="engine_model_missing",
                message=f"The weights file {model_path} does not exist.",
                fix="Load (fetch and verify) the artifact before warming it.",
                next_command=f"ls -l {model_path}",
            )
        adapter = adapter_for(launch.runtime)
        port = allocate_port(self._config, {e.record.port for e in self._engines.values()})
        binary = self._binary_for(adapter.runtime, launch, port)
        argv = self.wanted_argv(model_id, launch, port)
        adapter.prepare(launch, where(self._config, port, self._store.key_path), self.engine_key)
        log_file = log_path(self._config.state_dir, model_id)
        log_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            with log_file.open("wb") as log:
                popen = subprocess.Popen(
                    argv,
                    env=child_env(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    close_fds=True,
                    start_new_session=True,  # survives the agent; a terminal ^C does not reach it
                    cwd=self._config.state_dir,
                )
        except OSError as exc:
            raise GridError(
                code="engine_spawn_failed",
                message=f"Cannot start {binary}: {exc}.",
                fix="Run scripts/install-engine.sh, or configure the llama-server path.",
                next_command="bash scripts/install-engine.sh",
            ) from exc
        record = EngineRecord(
            model_id=model_id,
            pid=popen.pid,
            port=port,
            argv=argv,
            model_path=str(model_path),
            spawned_at=time.time(),
            runtime=adapter.runtime,
        )
        engine = _Engine(
            record=record, state=EngineState.STARTING, proven=True, popen=popen, spec=launch
        )
        self._engines[model_id] = engine
        self._failures.pop(model_id, None)
        self._publish_or_stop(engine, "pid and port")
        identity = read_identity(popen.pid)
        if identity is None or identity.argv != tuple(argv):
            exited = popen.poll() is not None
            self._kill_own(engine)
            self._forget(engine, "child exited at once" if exited else "identity unreadable")
            raise GridError(
                code="engine_exited" if exited else "engine_identity_unreadable",
                message=f"The llama-server child for {model_id} could not be identified "
                f"right after spawn. {self._log_tail(model_id)}",
                fix="Check the engine log in the state folder.",
                next_command=f"tail -n 50 {log_path(self._config.state_dir, model_id)}",
            )
        record.executable = identity.executable
        record.birth = BirthRecord(
            start_ticks=identity.birth.start_ticks, boot_id=identity.birth.boot_id
        )
        self._publish_or_stop(engine, "executable and birth marker")
        return engine

    def _publish_or_stop(self, engine: _Engine, what: str) -> None:
        self._doc.engines[engine.record.model_id] = engine.record
        try:
            self._store.save(self._doc)
        except OSError as exc:
            self._kill_own(engine)
            self._forget(engine, f"state write failed: {exc}")
            raise GridError(
                code="engine_state_write_failed",
                message=(
                    f"Could not persist the {what} of the {engine.record.model_id} engine "
                    f"({exc}); the child was stopped."
                ),
                fix="Free disk space or fix permissions of the node state folder, then retry.",
                details={"pid": engine.record.pid, "port": engine.record.port},
                next_command=f"df -h {self._config.state_dir}",
            ) from exc

    def _await_ready(self, engine: _Engine) -> EngineStatus:
        cfg = self._config
        deadline = time.monotonic() + cfg.ready_timeout_s
        model_id = engine.record.model_id
        while True:
            with self._lock:
                if self._engines.get(model_id) is not engine:
                    raise GridError(
                        code="engine_exited",
                        message=f"The {model_id} engine stopped while it was warming.",
                        fix="Retry the warm.",
                    )
                self._refresh(engine)
                if self._engines.get(model_id) is not engine:
                    raise GridError(
                        code="engine_exited",
                        message=f"The {model_id} engine exited before it became ready: "
                        f"{self._failures.get(model_id, '')}. {self._log_tail(model_id)}",
                        fix="Check the engine log; a new warm starts a fresh child.",
                        next_command=f"tail -n 50 {log_path(self._config.state_dir, model_id)}",
                    )
                if engine.state is EngineState.READY:
                    return self._status_of(engine)
            if self._probe_ready(engine.record):
                with self._lock:
                    if self._engines.get(model_id) is engine:
                        engine.state = EngineState.READY
                        engine.reason = ""
                continue
            if time.monotonic() > deadline:
                with self._lock:
                    current = self._engines.get(model_id) is engine
                    engine.stopping = True
                if current:
                    self._terminate(engine, forced=True)
                raise GridError(
                    code="engine_not_ready",
                    message=(
                        f"The {model_id} engine did not answer readiness within "
                        f"{cfg.ready_timeout_s:.0f} s; it was stopped."
                    ),
                    fix="Check the engine log, or raise the readiness timeout.",
                    next_command=f"tail -n 50 {log_path(cfg.state_dir, model_id)}",
                )
            time.sleep(cfg.poll_interval_s)

    def _probe_ready(self, record: EngineRecord) -> bool:
        """The adapter's readiness probe answers 200 with the engine key."""
        path = adapter_for(record.runtime).ready_path
        try:
            reply = self._http.get(
                f"{self.base_url(record.port)}{path}",
                headers=auth_headers(self.engine_key),
                timeout=self._config.probe_timeout_s,
            )
        except httpx.HTTPError:
            return False
        return reply.status_code == 200

    # ------------------------------------------------------------------ identity and liveness

    def _alive(self, engine: _Engine) -> bool:
        if engine.popen is not None:
            return engine.popen.poll() is None
        return is_alive(engine.record.pid)

    def _mismatch(self, record: EngineRecord) -> str | None:
        """Why the live PID of `record` is not provably our child, or None when it is."""
        birth = record.birth.marker() if record.birth is not None else None
        observed = read_identity(record.pid)
        reason = identity_mismatch(record.executable, tuple(record.argv), birth, observed)
        if reason is not None:
            return reason
        return argv_contradiction(record, self._store.key_path, self._config.state_dir)

    def _proven_now(self, engine: _Engine) -> bool:
        """Proof right before a signal: our own unreaped child, or an exact /proc match."""
        if engine.popen is not None:
            return engine.popen.poll() is None
        return self._mismatch(engine.record) is None

    def _refresh(self, engine: _Engine) -> None:
        """Under the lock: release a dead child, or try again to prove an unproven one."""
        if not self._alive(engine):
            code = engine.popen.returncode if engine.popen is not None else None
            if code is None:
                why = "the engine process is gone"
            elif code < 0:
                why = f"the engine was killed by signal {-code}"
            else:
                why = f"the engine exited with status {code}"
            self._forget(engine, why)
            return
        if not engine.proven:
            reason = self._mismatch(engine.record)
            if reason is None:
                engine.proven = True
                engine.state = EngineState.STARTING
                engine.reason = "adopted after identity proof"
            else:
                engine.reason = f"live process not proved: {reason}"

    def _forget(self, engine: _Engine, why: str) -> None:
        """Release the handle of a confirmed-gone child; it reports FAILED until rewarmed."""
        model_id = engine.record.model_id
        if self._engines.get(model_id) is engine:
            del self._engines[model_id]
        self._failures[model_id] = why
        if self._doc.engines.get(model_id) is engine.record:
            del self._doc.engines[model_id]
            # A stale record for a dead PID is harmless: recovery releases it again.
            with contextlib.suppress(OSError):
                self._store.save(self._doc)

    def _recover(self) -> None:
        """Classify records left by a previous agent: released, adopted, or retained FAILED."""
        for model_id, record in list(self._doc.engines.items()):
            engine = _Engine(record=record, state=EngineState.FAILED, proven=False)
            self._engines[model_id] = engine
            if not is_alive(record.pid):
                self._forget(engine, "the engine exited while the agent was down")
                continue
            reason = self._mismatch(record)
            if reason is not None:
                engine.reason = f"live process not proved: {reason}"
                continue
            engine.proven = True
            ready = self._probe_ready(record)
            engine.state = EngineState.READY if ready else EngineState.STARTING
            engine.reason = "adopted after identity proof"

    def _unproven_error(self, engine: _Engine) -> GridError:
        record = engine.record
        return GridError(
            code="engine_unproven_process",
            message=(
                f"PID {record.pid} (port {record.port}) is recorded for {record.model_id} but "
                f"cannot be proved to be its engine ({engine.reason}); it is left untouched."
            ),
            fix="Inspect that process by hand; once it is gone the record is released.",
            details={"pid": record.pid, "port": record.port},
            next_command=f"ps -o pid,lstart,args -p {record.pid}",
        )

    def _status_of(self, engine: _Engine) -> EngineStatus:
        record = engine.record
        return EngineStatus(
            model_id=record.model_id,
            state=engine.state if engine.proven else EngineState.FAILED,
            pid=record.pid,
            port=record.port,
            proven=engine.proven,
            reason=engine.reason,
            base_url=self.base_url(record.port),
            runtime=record.runtime,
            settings=engine.spec.settings.shown() if engine.spec is not None else {},
        )

    # ------------------------------------------------------------------ stop

    def _require_idle(self, model_id: str, drain_timeout_s: float) -> None:
        deadline = time.monotonic() + drain_timeout_s
        while True:
            activity = self.activity(model_id)
            if activity.idle:
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(self._config.poll_interval_s)
        if activity.state is ActivityState.BUSY:
            raise GridError(
                code="engine_busy",
                message=(
                    f"The {model_id} engine still processes {activity.processing} "
                    f"request(s); it was left running."
                ),
                fix="Wait for the drain to finish, or stop with force to cut the requests.",
                next_command="grid allocator node stop --force",
            )
        raise GridError(
            code="engine_activity_unknown",
            message=(
                f"The activity of the {model_id} engine cannot be read ({activity.reason}); "
                "it was left running."
            ),
            fix="Retry once the engine answers /slots, or stop with force.",
            next_command="grid allocator node stop --force",
        )

    def _signal_if_proven(self, engine: _Engine, signum: int) -> bool:
        if not self._proven_now(engine):
            return False
        try:
            os.kill(engine.record.pid, signum)
        except ProcessLookupError:
            return False
        return True

    def _wait_gone(self, engine: _Engine, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self._alive(engine):
            if time.monotonic() >= deadline:
                return False
            time.sleep(self._config.poll_interval_s)
        return True

    def _terminate(self, engine: _Engine, *, forced: bool) -> StopResult:
        """SIGTERM, bounded wait, SIGKILL; releases the record once gone (takes the lock last).

        Identity is proved again right before each signal, so a PID recycled during the wait
        is never hit; a process that fails that proof is kept FAILED and untouched.
        """
        model_id, pid = engine.record.model_id, engine.record.pid
        killed = False
        terminated = self._signal_if_proven(engine, signal.SIGTERM)
        if terminated and not self._wait_gone(engine, self._config.stop_grace_s):
            killed = self._signal_if_proven(engine, signal.SIGKILL)
            if killed and not self._wait_gone(engine, self._config.kill_wait_s):
                self._keep_failed(engine, proven=True, why="survived SIGTERM and SIGKILL")
                raise GridError(
                    code="engine_stop_failed",
                    message=f"PID {pid} of {model_id} is still alive after SIGKILL.",
                    fix="Inspect the process by hand.",
                    next_command=f"ps -o pid,stat,args -p {pid}",
                )
        if self._alive(engine):
            self._keep_failed(engine, proven=False, why="identity proof failed before a signal")
            raise self._unproven_error(engine)
        with self._lock:
            self._forget(engine, "stopped")
            self._failures.pop(model_id, None)
        return StopResult(model_id, stopped=True, pid=pid, killed=killed, forced=forced)

    def _keep_failed(self, engine: _Engine, *, proven: bool, why: str) -> None:
        with self._lock:
            engine.stopping = False
            engine.proven = proven
            engine.state = EngineState.FAILED
            engine.reason = why

    def _kill_own(self, engine: _Engine) -> None:
        """Stop a child this instance just spawned (used when a post-spawn step fails)."""
        popen = engine.popen
        if popen is None or popen.poll() is not None:
            return
        popen.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=self._config.kill_wait_s)

    def _log_tail(self, model_id: str) -> str:
        return log_tail(log_path(self._config.state_dir, model_id))
