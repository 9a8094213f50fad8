"""Engine supervisors: the real llama.cpp one and a fake with knobs for callers' tests."""

from __future__ import annotations

from typing import TYPE_CHECKING

from grid.node.engines.base import EngineState, EngineStatus, EngineSupervisor, StopResult
from grid.node.engines.fake import FakeEngineSupervisor
from grid.node.engines.llamacpp import LlamaCppConfig, LlamaCppSupervisor
from grid.node.engines.probes import Activity, ActivityState

__all__ = [
    "Activity",
    "ActivityState",
    "EngineState",
    "EngineStatus",
    "EngineSupervisor",
    "FakeEngineSupervisor",
    "LlamaCppConfig",
    "LlamaCppSupervisor",
    "StopResult",
]

if TYPE_CHECKING:  # both supervisors satisfy the protocol callers depend on
    _REAL: type[EngineSupervisor] = LlamaCppSupervisor
    _FAKE: type[EngineSupervisor] = FakeEngineSupervisor
