"""Engine supervisors: the real one (llama.cpp and, through adapters.py, vLLM), the protocol
its callers depend on, and the process-identity checks (`proc`) the agent daemon and the lab share.

(The fake supervisor for callers' unit tests lives in tests/support/fake_engine.py.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grid.node.engines.adapters import LLAMA_CPP, VLLM, EngineAdapter, LaunchSpec, adapter_for
from grid.node.engines.base import EngineState, EngineStatus, EngineSupervisor, StopResult
from grid.node.engines.binary import llama_server_binary
from grid.node.engines.devices import detect_gpu_memory_mb
from grid.node.engines.discover import find_own_children
from grid.node.engines.llamacpp import LlamaCppConfig, LlamaCppSupervisor
from grid.node.engines.probes import Activity, ActivityState
from grid.node.engines.proc import (
    identity_mismatch,
    is_alive,
    read_argv,
    read_birth_marker,
    read_identity,
)
from grid.node.engines.state import EngineStateStore

__all__ = [
    "LLAMA_CPP",
    "VLLM",
    "Activity",
    "ActivityState",
    "EngineAdapter",
    "EngineState",
    "EngineStateStore",
    "EngineStatus",
    "EngineSupervisor",
    "LaunchSpec",
    "LlamaCppConfig",
    "LlamaCppSupervisor",
    "StopResult",
    "adapter_for",
    "detect_gpu_memory_mb",
    "find_own_children",
    "identity_mismatch",
    "is_alive",
    "llama_server_binary",
    "read_argv",
    "read_birth_marker",
    "read_identity",
]

if TYPE_CHECKING:  # the real supervisor satisfies the protocol callers depend on
    _REAL: type[EngineSupervisor] = LlamaCppSupervisor
