"""FakeEngineSupervisor: a fake of the engine supervisor, without processes, for unit tests of
the decision code that calls it (the node agent loop); the real one is `LlamaCppSupervisor`.

It follows the same rules as the real one (stop refuses busy or unknown activity unless forced,
an unproven engine is never stopped nor started twice, a crash shows as FAILED until a new warm)
and exposes knobs to steer it:

- `set_ready(model_id, ready)`: whether the next warm becomes READY (False: engine_not_ready);
- `crash(model_id)`: the child dies; the next poll reports FAILED;
- `set_activity(model_id, activity)`: what the slots probe answers;
- `set_unproven(model_id)`: a live process that cannot be proved holds the record;
- `restarted()`: a second supervisor over the same `FakeMachine` (children survive, adopted).

`calls` records every side effect in order, e.g. ("warm", "m1") or ("signal", "m1", "SIGTERM").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from grid.fleet.errors import GridError
from grid.node.engines.adapters import LaunchSpec
from grid.node.engines.base import EngineState, EngineStatus, EngineSupervisor, StopResult
from grid.node.engines.probes import Activity, ActivityState


@dataclass
class _FakeEngine:
    model_id: str
    model_path: Path
    pid: int
    port: int
    state: EngineState
    proven: bool = True
    crashed: bool = False
    reason: str = ""


@dataclass
class FakeMachine:
    """What outlives one supervisor: the child processes and their durable records. A second
    supervisor over the same machine is a restarted agent: it adopts the proven children."""

    next_port: int = 39100
    next_pid: int = 10_000
    engines: dict[str, _FakeEngine] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)


class FakeEngineSupervisor:
    def __init__(
        self,
        *,
        first_port: int = 39100,
        engine_key: str = "fake-engine-key",
        machine: FakeMachine | None = None,
    ) -> None:
        self._engine_key = engine_key
        self.machine = machine or FakeMachine(next_port=first_port)
        self._engines = self.machine.engines
        self._failures = self.machine.failures
        self._ready: dict[str, bool] = {}
        self._activity: dict[str, Activity] = {}
        self.calls: list[tuple[str, ...]] = []
        self.chat_templates: dict[str, str | None] = {}  # the template each warm named
        self.specs: dict[str, LaunchSpec | None] = {}  # the launch spec each warm gave
        self.changed: set[str] = set()  # knob: models whose settings count as changed

    def restarted(self) -> FakeEngineSupervisor:
        """A new supervisor over the same machine and durable key (an agent restart)."""
        return FakeEngineSupervisor(engine_key=self._engine_key, machine=self.machine)

    # ------------------------------------------------------------------ knobs

    def set_ready(self, model_id: str, ready: bool = True) -> None:
        self._ready[model_id] = ready
        engine = self._engines.get(model_id)
        if engine is not None and engine.proven and not engine.crashed:
            engine.state = EngineState.READY if ready else EngineState.STARTING

    def crash(self, model_id: str) -> None:
        engine = self._engines[model_id]
        engine.crashed = True

    def set_activity(self, model_id: str, activity: Activity) -> None:
        self._activity[model_id] = activity

    def set_unproven(self, model_id: str, *, pid: int = 4242, port: int = 39999) -> None:
        self._engines[model_id] = _FakeEngine(
            model_id, Path("/unknown"), pid, port, EngineState.FAILED, proven=False,
            reason="live process not proved: fake",
        )  # fmt: skip

    # ------------------------------------------------------------------ supervisor surface

    def settings_changed(self, model_id: str, launch: LaunchSpec) -> bool:
        return model_id in self.changed

    @property
    def engine_key(self) -> str:
        return self._engine_key

    def warm(
        self,
        model_id: str,
        model_path: Path,
        *,
        chat_template: str | None = None,
        spec: LaunchSpec | None = None,
    ) -> EngineStatus:
        self.calls.append(("warm", model_id))
        self.chat_templates[model_id] = chat_template
        self.specs[model_id] = spec
        self._reap(model_id)
        engine = self._engines.get(model_id)
        if engine is not None and not engine.proven:
            raise GridError(
                code="engine_unproven_process",
                message=f"PID {engine.pid} of {model_id} cannot be proved; left untouched.",
            )
        if engine is None:
            machine = self.machine
            engine = _FakeEngine(
                model_id, model_path, machine.next_pid, machine.next_port, EngineState.STARTING
            )
            machine.next_pid += 1
            machine.next_port += 1
            self._engines[model_id] = engine
            self._failures.pop(model_id, None)
        if not self._ready.get(model_id, True):
            self.calls.append(("signal", model_id, "SIGTERM"))
            del self._engines[model_id]
            self._failures[model_id] = "did not become ready"
            raise GridError(
                code="engine_not_ready", message=f"The {model_id} engine did not become ready."
            )
        engine.state = EngineState.READY
        return self._status_of(engine)

    def stop(
        self, model_id: str, *, force: bool = False, drain_timeout_s: float = 0.0
    ) -> StopResult:
        self.calls.append(("stop", model_id))
        self._reap(model_id)
        engine = self._engines.get(model_id)
        if engine is None:
            self._failures.pop(model_id, None)
            return StopResult(model_id, stopped=False, reason="no running engine")
        if not engine.proven:
            raise GridError(
                code="engine_unproven_process",
                message=f"PID {engine.pid} of {model_id} cannot be proved; left untouched.",
            )
        if not force:
            activity = self.activity(model_id)
            if activity.state is ActivityState.BUSY:
                raise GridError(code="engine_busy", message=f"{model_id} is processing.")
            if activity.state is ActivityState.UNKNOWN:
                raise GridError(
                    code="engine_activity_unknown", message=f"{model_id} activity is unknown."
                )
        self.calls.append(("signal", model_id, "SIGTERM"))
        del self._engines[model_id]
        return StopResult(model_id, stopped=True, pid=engine.pid, forced=force)

    def activity(self, model_id: str) -> Activity:
        engine = self._engines.get(model_id)
        if engine is None or engine.crashed:
            return Activity(ActivityState.UNKNOWN, reason="no engine for this model")
        if not engine.proven:
            return Activity(ActivityState.UNKNOWN, reason="engine identity not proved")
        return self._activity.get(model_id, Activity(ActivityState.IDLE, slots=1))

    def poll(self) -> dict[str, EngineStatus]:
        for model_id in list(self._engines):
            self._reap(model_id)
        out = {m: EngineStatus(m, EngineState.FAILED, reason=r) for m, r in self._failures.items()}
        out.update({m: self._status_of(e) for m, e in self._engines.items()})
        return out

    def status(self, model_id: str) -> EngineStatus | None:
        return self.poll().get(model_id)

    def close(self) -> None:
        self.calls.append(("close",))

    # ------------------------------------------------------------------ internals

    def _reap(self, model_id: str) -> None:
        engine = self._engines.get(model_id)
        if engine is not None and engine.crashed:
            del self._engines[model_id]
            self._failures[model_id] = "the engine was killed by signal 9"

    def _status_of(self, engine: _FakeEngine) -> EngineStatus:
        return EngineStatus(
            model_id=engine.model_id,
            state=engine.state if engine.proven else EngineState.FAILED,
            pid=engine.pid,
            port=engine.port,
            proven=engine.proven,
            reason=engine.reason,
            base_url=f"http://127.0.0.1:{engine.port}",
        )


if TYPE_CHECKING:  # the fake satisfies the protocol the node agent depends on
    _FAKE: type[EngineSupervisor] = FakeEngineSupervisor
