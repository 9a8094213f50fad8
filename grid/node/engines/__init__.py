"""Engine supervisors: the real llama.cpp one and the protocol its callers depend on.

(The fake supervisor for callers' unit tests lives in tests/support/fake_engine.py.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grid.node.engines.base import EngineState, EngineStatus, EngineSupervisor, StopResult
from grid.node.engines.llamacpp import LlamaCppConfig, LlamaCppSupervisor
from grid.node.engines.probes import Activity, ActivityState

__all__ = [
    "Activity",
    "ActivityState",
    "EngineState",
    "EngineStatus",
    "EngineSupervisor",
    "LlamaCppConfig",
    "LlamaCppSupervisor",
    "StopResult",
]

if TYPE_CHECKING:  # the real supervisor satisfies the protocol callers depend on
    _REAL: type[EngineSupervisor] = LlamaCppSupervisor
