"""Inputs of the local host-protection loop: telemetry, local override, and policy.

Every sensor reading is optional: `None` means *unknown* (the machine has no such sensor, or
reading it failed), never zero. The policy decides whether an unknown sensor is ignored or
conservatively throttles the host; it never counts as a healthy reading, and it never counts as
evidence that an earlier condition has recovered.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from itertools import pairwise

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from grid.fleet import GridError, HostState


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class ThermalState(StrEnum):
    """Operating-system thermal pressure, mildest first (the macOS vocabulary of the spec)."""

    NOMINAL = "nominal"
    FAIR = "fair"
    SERIOUS = "serious"
    CRITICAL = "critical"


THERMAL_ORDER: dict[ThermalState, int] = {
    ThermalState.NOMINAL: 0,
    ThermalState.FAIR: 1,
    ThermalState.SERIOUS: 2,
    ThermalState.CRITICAL: 3,
}


class OverrideKind(StrEnum):
    DRAIN = "drain"
    PAUSE = "pause"
    QUARANTINE = "quarantine"


OVERRIDE_STATE: dict[OverrideKind, HostState] = {
    OverrideKind.DRAIN: HostState.DRAINING,
    OverrideKind.PAUSE: HostState.PAUSED,
    OverrideKind.QUARANTINE: HostState.QUARANTINED,
}


class LocalOverride(_Frozen):
    """An operator's local fence; `expires_at` None means until explicitly released."""

    kind: OverrideKind
    reason: str = ""
    set_at: float | None = Field(default=None, ge=0)
    expires_at: float | None = Field(default=None, ge=0)

    def active_at(self, now: float) -> bool:
        return self.expires_at is None or now < self.expires_at


class Telemetry(_Frozen):
    """One sample of the host's own readings. None: unknown, never zero."""

    user_active: bool | None = None
    idle_seconds: float | None = Field(default=None, ge=0)
    battery_percent: float | None = Field(default=None, ge=0, le=100)
    on_ac_power: bool | None = None
    thermal_state: ThermalState | None = None
    temperature_c: float | None = Field(default=None, ge=-100, le=250)
    cpu_percent: float | None = Field(default=None, ge=0, le=100)
    memory_percent: float | None = Field(default=None, ge=0, le=100)
    gpu_memory_percent: float | None = Field(default=None, ge=0, le=100)
    load_per_core: float | None = Field(default=None, ge=0)
    network_up: bool | None = None
    override: LocalOverride | None = None
    # Configuration rather than a reading: an always-on server ignores user activity and battery.
    dedicated: bool = False


class Sensor(StrEnum):
    """Sensor groups, as named in `ProtectionPolicy.conservative_sensors` and `unknown_*` codes."""

    USER_ACTIVITY = "user_activity"
    BATTERY = "battery"
    THERMAL = "thermal"
    CPU = "cpu"
    MEMORY = "memory"
    GPU_MEMORY = "gpu_memory"
    LOAD = "load"
    NETWORK = "network"


# Sensors a dedicated (always-on server) host never consults.
DEDICATED_IGNORED = frozenset({Sensor.USER_ACTIVITY, Sensor.BATTERY})


class UnknownSensors(StrEnum):
    IGNORE = "ignore"  # an unknown reading triggers nothing (it still never proves recovery)
    THROTTLE = "throttle"  # an unknown watched sensor throttles the host


class Threshold(_Frozen):
    """Enter a condition at `enter`; leave it only once the reading is past `recover`.

    For readings where high is bad (memory, temperature, load) `recover <= enter`; for readings
    where low is bad (battery percent, idle seconds) `recover >= enter`. The gap between them is
    the hysteresis that stops a reading hovering at one threshold from flapping the host.
    """

    enter: float
    recover: float


_HIGH_IS_BAD = (
    "temperature_throttle",
    "temperature_drain",
    "temperature_critical",
    "cpu_throttle",
    "memory_throttle",
    "memory_drain",
    "memory_critical",
    "gpu_memory_throttle",
    "gpu_memory_drain",
    "load_throttle",
    "load_drain",
)
_LOW_IS_BAD = ("battery_throttle", "battery_pause", "battery_critical", "user_idle")
# Escalating levels of one reading: each must be at least as strict as the one before.
_HIGH_LADDERS = (
    ("temperature_throttle", "temperature_drain", "temperature_critical"),
    ("memory_throttle", "memory_drain", "memory_critical"),
    ("gpu_memory_throttle", "gpu_memory_drain"),
    ("load_throttle", "load_drain"),
)
_LOW_LADDERS = (("battery_throttle", "battery_pause", "battery_critical"),)
_USER_STATES = frozenset({HostState.THROTTLED, HostState.DRAINING, HostState.PAUSED})


class ProtectionPolicy(_Frozen):
    """Thresholds and timing of the protection loop. Percentages are 0-100."""

    debounce_samples: int = Field(default=3, ge=1, le=1000)
    recovery_cooldown_s: float = Field(default=60.0, ge=0)
    throttle_fraction: float = Field(default=0.5, gt=0.0, le=1.0)
    unknown_sensors: UnknownSensors = UnknownSensors.IGNORE
    # Watched under `unknown_sensors=throttle`. Battery is left out by default: a desktop or a
    # server simply has none, and that absence must not throttle it.
    conservative_sensors: frozenset[Sensor] = frozenset(
        {
            Sensor.USER_ACTIVITY,
            Sensor.THERMAL,
            Sensor.CPU,
            Sensor.MEMORY,
            Sensor.LOAD,
            Sensor.NETWORK,
        }
    )
    # The user counts as active when `user_active` is true or idle time is at most `enter`;
    # the host gives the machine back only after `recover` seconds of idleness.
    user_idle: Threshold = Threshold(enter=60.0, recover=300.0)
    user_active_state: HostState = HostState.PAUSED
    # Battery thresholds apply only when the host is confirmed off AC power.
    battery_throttle: Threshold = Threshold(enter=50.0, recover=60.0)
    battery_pause: Threshold = Threshold(enter=20.0, recover=30.0)
    battery_critical: Threshold = Threshold(enter=10.0, recover=15.0)
    temperature_throttle: Threshold = Threshold(enter=80.0, recover=75.0)
    temperature_drain: Threshold = Threshold(enter=90.0, recover=85.0)
    temperature_critical: Threshold = Threshold(enter=100.0, recover=95.0)
    cpu_throttle: Threshold = Threshold(enter=90.0, recover=70.0)
    memory_throttle: Threshold = Threshold(enter=85.0, recover=75.0)
    memory_drain: Threshold = Threshold(enter=92.0, recover=85.0)
    memory_critical: Threshold = Threshold(enter=97.0, recover=92.0)
    gpu_memory_throttle: Threshold = Threshold(enter=90.0, recover=80.0)
    gpu_memory_drain: Threshold = Threshold(enter=97.0, recover=92.0)
    load_throttle: Threshold = Threshold(enter=1.5, recover=1.0)
    load_drain: Threshold = Threshold(enter=3.0, recover=2.0)

    @model_validator(mode="after")
    def _consistent(self) -> ProtectionPolicy:
        for name in _HIGH_IS_BAD:
            band: Threshold = getattr(self, name)
            if band.recover > band.enter:
                raise _policy_error(
                    name, f"recover ({band.recover:g}) must not exceed enter ({band.enter:g})"
                )
        for name in _LOW_IS_BAD:
            band = getattr(self, name)
            if band.recover < band.enter:
                raise _policy_error(
                    name, f"recover ({band.recover:g}) must not be below enter ({band.enter:g})"
                )
        for ladder in _HIGH_LADDERS:
            for milder, stricter in pairwise(ladder):
                if getattr(self, stricter).enter < getattr(self, milder).enter:
                    raise _policy_error(stricter, f"enter must be at least {milder}.enter")
        for ladder in _LOW_LADDERS:
            for milder, stricter in pairwise(ladder):
                if getattr(self, stricter).enter > getattr(self, milder).enter:
                    raise _policy_error(stricter, f"enter must be at most {milder}.enter")
        if self.user_active_state not in _USER_STATES:
            raise _policy_error("user_active_state", "must be one of throttled, draining or paused")
        return self


def _policy_error(path: str, problem: str) -> GridError:
    return GridError(
        code="invalid_protection_policy",
        message=f"The host-protection policy is inconsistent: {path}: {problem}.",
        fix="Correct the protection thresholds in the node configuration.",
        path=path,
    )


def load_policy(data: Mapping[str, object]) -> ProtectionPolicy:
    """Build a policy from configuration, refusing bad input with a GridError."""
    try:
        return ProtectionPolicy.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in first["loc"])
        raise GridError(
            code="invalid_protection_policy",
            message=f"The host-protection policy is invalid at {path}: {first['msg']}.",
            fix="Correct the protection settings in the node configuration.",
            path=path,
        ) from None
