"""Local host protection: telemetry → lifecycle.

The face of this package: the pure decision (`evaluate`, its state and verdict), the vocabulary
it judges (telemetry, overrides, policy) and the real-host telemetry reader, the package's only
side-effect part.

    model.py       telemetry, overrides, thresholds and the policy (pydantic, pure)
    conditions.py  one sample → conditions and the sample's observed lifecycle (pure)
    evaluate.py    debounce, hysteresis, cooldown and the override (pure, `now` passed in)
    telemetry.py   real Linux readings → `Telemetry`
"""

from __future__ import annotations

from grid.node.protection.conditions import least_restrictive, most_restrictive
from grid.node.protection.evaluate import (
    AWAITING_SAMPLES,
    ESCALATION_PENDING,
    OVERRIDE_EXPIRED,
    RECOVERY_COOLDOWN,
    RECOVERY_PENDING,
    Decision,
    ProtectionState,
    evaluate,
)
from grid.node.protection.model import (
    LocalOverride,
    OverrideKind,
    ProtectionPolicy,
    Sensor,
    Telemetry,
    ThermalState,
    Threshold,
    UnknownSensors,
    load_policy,
)
from grid.node.protection.telemetry import HostPaths, TelemetryReader, read_memory_percent

__all__ = [
    "AWAITING_SAMPLES",
    "ESCALATION_PENDING",
    "OVERRIDE_EXPIRED",
    "RECOVERY_COOLDOWN",
    "RECOVERY_PENDING",
    "Decision",
    "HostPaths",
    "LocalOverride",
    "OverrideKind",
    "ProtectionPolicy",
    "ProtectionState",
    "Sensor",
    "Telemetry",
    "TelemetryReader",
    "ThermalState",
    "Threshold",
    "UnknownSensors",
    "evaluate",
    "least_restrictive",
    "load_policy",
    "most_restrictive",
    "read_memory_percent",
]
