"""What callers (the node agent, the logical fleet) see of an engine supervisor.

`LlamaCppSupervisor` is the real one; the fake in tests/support/fake_engine.py has the same
surface with knobs, for pure tests of callers. Error codes raised by both (GridError):

- engine_unproven_process   a live process holds the record but its identity cannot be proved:
                            no signal is sent and no second child is started;
- engine_busy               stop refused: slots are processing (use force to cut them);
- engine_activity_unknown   stop refused: activity could not be read (fails safe);
- engine_exited             the child exited before it became ready;
- engine_not_ready          the child did not answer readiness within the deadline;
- engine_state_write_failed the post-spawn record could not be persisted; the child was stopped;
- engine_no_free_port       every port of the configured range is taken;
- engine_model_missing      the GGUF path does not exist;
- engine_binary_missing     llama-server cannot be found;
- runtime_not_installed     the adapter's runtime (vLLM) is not installed: the message and
                            details carry the command it would run;
- engine_flag_refused       an extra flag is not on the engine kind's allow-list.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from grid.node.engines.adapters import LaunchSpec
from grid.node.engines.probes import Activity


class EngineState(StrEnum):
    STARTING = "starting"  # spawned and recorded, waiting for readiness
    READY = "ready"
    FAILED = "failed"  # crashed (pid None) or retained because it cannot be proved/answer


@dataclass(frozen=True)
class EngineStatus:
    model_id: str
    state: EngineState
    pid: int | None = None
    port: int | None = None
    proven: bool = False  # identity proved: the supervisor may signal this PID
    reason: str = ""
    base_url: str | None = None
    runtime: str = "llama.cpp"
    settings: dict[str, object] = field(default_factory=dict)  # effective engine settings


@dataclass(frozen=True)
class StopResult:
    model_id: str
    stopped: bool  # a process was signalled and is gone
    pid: int | None = None
    killed: bool = False  # SIGKILL was needed after the SIGTERM grace period
    forced: bool = False
    reason: str = ""


class EngineSupervisor(Protocol):
    @property
    def engine_key(self) -> str: ...

    def warm(
        self,
        model_id: str,
        model_path: Path,
        *,
        chat_template: str | None = None,
        spec: LaunchSpec | None = None,
    ) -> EngineStatus: ...

    def settings_changed(self, model_id: str, launch: LaunchSpec) -> bool: ...

    def stop(
        self, model_id: str, *, force: bool = False, drain_timeout_s: float = 0.0
    ) -> StopResult: ...

    def activity(self, model_id: str) -> Activity: ...

    def poll(self) -> dict[str, EngineStatus]: ...

    def status(self, model_id: str) -> EngineStatus | None: ...

    def close(self) -> None: ...
