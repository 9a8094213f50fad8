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
import signal
import threading
import time
from pathlib import Path

import httpx

from grid.fleet import GridError
from grid.node.engines import refusals
from grid.node.engines.adapters import LLAMA_CPP, LaunchSpec, adapter_for
from grid.node.engines.base import EngineState, EngineStatus, StopResult
from grid.node.engines.binary import llama_server_binary
from grid.node.engines.child import (
    EngineChild,
    alive,
    identity_problem,
    kill_own,
    require_idle,
    signal_if_proven,
    spawn,
    unproven_error,
    wait_gone,
)
from grid.node.engines.launch import (
    LlamaCppConfig,
    allocate_port,
    launch_spec,
    log_path,
    log_tail,
    where,
)
from grid.node.engines.probes import Activity, ActivityState, auth_headers
from grid.node.engines.proc import is_alive, read_identity
from grid.node.engines.state import BirthRecord, EngineRecord, EngineStateStore

__all__ = ["LlamaCppConfig", "LlamaCppSupervisor"]


_Engine = EngineChild


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
            engine = self._live(model_id)
            if engine is None:
                engine = self._spawn(model_id, model_path, launch)
            elif not engine.proven:
                raise unproven_error(engine)
            elif engine.stopping:
                raise refusals.engine_stopping(model_id)
            elif Path(engine.record.model_path) != model_path:
                raise refusals.model_mismatch(model_id, engine.record.model_path, model_path)
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
            engine = self._live(model_id)
            if engine is None:
                self._failures.pop(model_id, None)
                return StopResult(model_id, stopped=False, reason="no running engine")
            if not engine.proven:
                raise unproven_error(engine)
        if not force:
            require_idle(
                model_id,
                lambda: self.activity(model_id),
                drain_timeout_s,
                self._config.poll_interval_s,
            )
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
            raise refusals.model_missing(model_path)
        adapter = adapter_for(launch.runtime)
        port = allocate_port(self._config, {e.record.port for e in self._engines.values()})
        binary = self._binary_for(adapter.runtime, launch, port)
        argv = self.wanted_argv(model_id, launch, port)
        adapter.prepare(launch, where(self._config, port, self._store.key_path), self.engine_key)
        log_file = log_path(self._config.state_dir, model_id)
        popen = spawn(argv, log_file, self._config.state_dir, binary)
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
            kill_own(engine, self._config.kill_wait_s)
            self._forget(engine, "child exited at once" if exited else "identity unreadable")
            raise refusals.not_identified(
                model_id, exited=exited, tail=self._log_tail(model_id), log=log_file
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
            kill_own(engine, self._config.kill_wait_s)
            self._forget(engine, f"state write failed: {exc}")
            record = engine.record
            raise refusals.state_write_failed(
                what, record.model_id, exc, record.pid, record.port, self._config.state_dir
            ) from exc

    def _await_ready(self, engine: _Engine) -> EngineStatus:
        cfg = self._config
        deadline = time.monotonic() + cfg.ready_timeout_s
        model_id = engine.record.model_id
        log = log_path(cfg.state_dir, model_id)
        while True:
            with self._lock:
                if self._engines.get(model_id) is not engine:
                    raise refusals.stopped_while_warming(model_id)
                self._refresh(engine)
                if self._engines.get(model_id) is not engine:
                    why, tail = self._failures.get(model_id, ""), self._log_tail(model_id)
                    raise refusals.exited_before_ready(model_id, why, tail, log)
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
                raise refusals.not_ready(model_id, cfg.ready_timeout_s, log)
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

    def _mismatch(self, record: EngineRecord) -> str | None:
        return identity_problem(record, *self._paths())

    def _paths(self) -> tuple[Path, Path]:
        """What an identity proof compares the argv with: the key file and the state folder."""
        return self._store.key_path, self._config.state_dir

    def _live(self, model_id: str) -> _Engine | None:
        """Under the lock: the model's engine after `_refresh` (None: none, or it died)."""
        engine = self._engines.get(model_id)
        if engine is not None:
            self._refresh(engine)
            engine = self._engines.get(model_id)
        return engine

    def _refresh(self, engine: _Engine) -> None:
        """Under the lock: release a dead child, or try again to prove an unproven one."""
        if not alive(engine):
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

    def _terminate(self, engine: _Engine, *, forced: bool) -> StopResult:
        """SIGTERM, bounded wait, SIGKILL; releases the record once gone (takes the lock last).

        Identity is proved again right before each signal, so a PID recycled during the wait
        is never hit; a process that fails that proof is kept FAILED and untouched.
        """
        model_id, pid = engine.record.model_id, engine.record.pid
        killed = False
        terminated = signal_if_proven(engine, signal.SIGTERM, *self._paths())
        if terminated and not wait_gone(
            engine, self._config.stop_grace_s, self._config.poll_interval_s
        ):
            killed = signal_if_proven(engine, signal.SIGKILL, *self._paths())
            if killed and not wait_gone(
                engine, self._config.kill_wait_s, self._config.poll_interval_s
            ):
                self._keep_failed(engine, proven=True, why="survived SIGTERM and SIGKILL")
                raise refusals.stop_failed(model_id, pid)
        if alive(engine):
            self._keep_failed(engine, proven=False, why="identity proof failed before a signal")
            raise unproven_error(engine)
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

    def _log_tail(self, model_id: str) -> str:
        return log_tail(log_path(self._config.state_dir, model_id))
