"""Telemetry → the protective conditions present in one sample (pure, no debounce).

Each rule looks at one sensor group and answers *active*, *inactive* or *unknown*. A condition
that is latched (already in effect in the committed lifecycle) stays active until its reading
passes the separate recovery threshold; an unknown reading keeps a latched condition active,
because a missing reading is not evidence of recovery. A condition that is not latched needs its
reading to reach the entry threshold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from grid.fleet import HostState
from grid.node.protection.model import (
    DEDICATED_IGNORED,
    THERMAL_ORDER,
    ProtectionPolicy,
    Sensor,
    Telemetry,
    ThermalState,
    Threshold,
    UnknownSensors,
)

SEVERITY: dict[HostState, int] = {
    HostState.ACCEPTING: 0,
    HostState.THROTTLED: 1,
    HostState.DRAINING: 2,
    HostState.PAUSED: 3,
    HostState.UNHEALTHY: 4,
    HostState.QUARANTINED: 5,
}


def most_restrictive(*states: HostState) -> HostState:
    return max(states, key=SEVERITY.__getitem__, default=HostState.ACCEPTING)


def least_restrictive(*states: HostState) -> HostState:
    return min(states, key=SEVERITY.__getitem__, default=HostState.ACCEPTING)


class Verdict(Enum):
    ACTIVE = "active"
    INACTIVE = "inactive"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Condition:
    """One reason for restricting the host; `unsafe` ones can never be overridden away."""

    code: str
    severity: HostState
    sensor: Sensor
    unsafe: bool = False


# A rule judges one condition: (telemetry, policy, latched) -> verdict.
Judge = Callable[[Telemetry, ProtectionPolicy, bool], Verdict]


def _high(value: float | None, band: Threshold, latched: bool) -> Verdict:
    """High is bad: enter at `>= enter`; a latched condition holds while `> recover`."""
    if value is None:
        return Verdict.UNKNOWN
    bad = value > band.recover if latched else value >= band.enter
    return Verdict.ACTIVE if bad else Verdict.INACTIVE


def _low(value: float | None, band: Threshold, latched: bool) -> Verdict:
    """Low is bad: enter at `<= enter`; a latched condition holds while `< recover`."""
    if value is None:
        return Verdict.UNKNOWN
    bad = value < band.recover if latched else value <= band.enter
    return Verdict.ACTIVE if bad else Verdict.INACTIVE


def _either(*verdicts: Verdict) -> Verdict:
    """Any confirming reading makes the condition active; all unknown stays unknown."""
    if Verdict.ACTIVE in verdicts:
        return Verdict.ACTIVE
    if all(verdict is Verdict.UNKNOWN for verdict in verdicts):
        return Verdict.UNKNOWN
    return Verdict.INACTIVE


def _user_active(t: Telemetry, p: ProtectionPolicy, latched: bool) -> Verdict:
    if t.user_active is True:
        return Verdict.ACTIVE
    by_idle = _low(t.idle_seconds, p.user_idle, latched)
    if by_idle is Verdict.UNKNOWN and t.user_active is False:
        return Verdict.INACTIVE
    return by_idle


def _battery(band_name: str) -> Judge:
    def judge(t: Telemetry, p: ProtectionPolicy, latched: bool) -> Verdict:
        if t.on_ac_power is True:
            return Verdict.INACTIVE  # charging: the battery is not being drained by our work
        level = _low(t.battery_percent, getattr(p, band_name), latched)
        if t.on_ac_power is None and level is Verdict.ACTIVE:
            return Verdict.UNKNOWN  # low, but maybe charging: not confirmed
        return level

    return judge


def _thermal(level: ThermalState, band_name: str) -> Judge:
    def judge(t: Telemetry, p: ProtectionPolicy, latched: bool) -> Verdict:
        by_state = (
            Verdict.UNKNOWN
            if t.thermal_state is None
            else Verdict.ACTIVE
            if THERMAL_ORDER[t.thermal_state] >= THERMAL_ORDER[level]
            else Verdict.INACTIVE
        )
        return _either(by_state, _high(t.temperature_c, getattr(p, band_name), latched))

    return judge


def _reading(attribute: str, band_name: str) -> Judge:
    def judge(t: Telemetry, p: ProtectionPolicy, latched: bool) -> Verdict:
        value: float | None = getattr(t, attribute)
        return _high(value, getattr(p, band_name), latched)

    return judge


def _network_down(t: Telemetry, p: ProtectionPolicy, latched: bool) -> Verdict:
    if t.network_up is None:
        return Verdict.UNKNOWN
    return Verdict.INACTIVE if t.network_up else Verdict.ACTIVE


@dataclass(frozen=True)
class Rule:
    condition: Condition
    judge: Judge


def _rules(policy: ProtectionPolicy) -> tuple[Rule, ...]:
    def rule(
        code: str, severity: HostState, sensor: Sensor, judge: Judge, unsafe: bool = False
    ) -> Rule:
        return Rule(Condition(code, severity, sensor, unsafe), judge)

    s, u = HostState, Sensor
    return (
        rule("user_active", policy.user_active_state, u.USER_ACTIVITY, _user_active),
        rule("battery_low", s.THROTTLED, u.BATTERY, _battery("battery_throttle")),
        rule("battery_very_low", s.PAUSED, u.BATTERY, _battery("battery_pause")),
        rule("battery_critical", s.PAUSED, u.BATTERY, _battery("battery_critical"), True),
        rule(
            "thermal_fair",
            s.THROTTLED,
            u.THERMAL,
            _thermal(ThermalState.FAIR, "temperature_throttle"),
        ),
        rule(
            "thermal_serious",
            s.DRAINING,
            u.THERMAL,
            _thermal(ThermalState.SERIOUS, "temperature_drain"),
        ),
        rule(
            "thermal_critical",
            s.UNHEALTHY,
            u.THERMAL,
            _thermal(ThermalState.CRITICAL, "temperature_critical"),
            True,
        ),
        rule("cpu_busy", s.THROTTLED, u.CPU, _reading("cpu_percent", "cpu_throttle")),
        rule(
            "memory_pressure", s.THROTTLED, u.MEMORY, _reading("memory_percent", "memory_throttle")
        ),
        rule("memory_high", s.DRAINING, u.MEMORY, _reading("memory_percent", "memory_drain")),
        rule(
            "memory_exhausted",
            s.UNHEALTHY,
            u.MEMORY,
            _reading("memory_percent", "memory_critical"),
            True,
        ),
        rule(
            "gpu_memory_pressure",
            s.THROTTLED,
            u.GPU_MEMORY,
            _reading("gpu_memory_percent", "gpu_memory_throttle"),
        ),
        rule(
            "gpu_memory_high",
            s.DRAINING,
            u.GPU_MEMORY,
            _reading("gpu_memory_percent", "gpu_memory_drain"),
        ),
        rule("load_high", s.THROTTLED, u.LOAD, _reading("load_per_core", "load_throttle")),
        rule("load_overloaded", s.DRAINING, u.LOAD, _reading("load_per_core", "load_drain")),
        rule("network_down", s.UNHEALTHY, u.NETWORK, _network_down),
    )


def _sensor_unknown(t: Telemetry, sensor: Sensor) -> bool:
    readings: dict[Sensor, tuple[object, ...]] = {
        Sensor.USER_ACTIVITY: (t.user_active, t.idle_seconds),
        Sensor.BATTERY: (t.battery_percent,),
        Sensor.THERMAL: (t.thermal_state, t.temperature_c),
        Sensor.CPU: (t.cpu_percent,),
        Sensor.MEMORY: (t.memory_percent,),
        Sensor.GPU_MEMORY: (t.gpu_memory_percent,),
        Sensor.LOAD: (t.load_per_core,),
        Sensor.NETWORK: (t.network_up,),
    }
    return all(value is None for value in readings[sensor])


@dataclass(frozen=True)
class Observation:
    """The conditions present in one sample, before debounce."""

    conditions: tuple[Condition, ...]  # most severe first, then by code

    @property
    def target(self) -> HostState:
        return most_restrictive(*(c.severity for c in self.conditions))


def observe(telemetry: Telemetry, policy: ProtectionPolicy, latched: frozenset[str]) -> Observation:
    """Judge every rule that applies to this host; add `unknown_*` conditions if conservative."""
    ignored = DEDICATED_IGNORED if telemetry.dedicated else frozenset()
    found: list[Condition] = []
    for rule in _rules(policy):
        if rule.condition.sensor in ignored:
            continue
        is_latched = rule.condition.code in latched
        verdict = rule.judge(telemetry, policy, is_latched)
        if verdict is Verdict.ACTIVE or (verdict is Verdict.UNKNOWN and is_latched):
            found.append(rule.condition)
    if policy.unknown_sensors is UnknownSensors.THROTTLE:
        for sensor in sorted(policy.conservative_sensors - ignored):
            if _sensor_unknown(telemetry, sensor):
                found.append(Condition(f"unknown_{sensor.value}", HostState.THROTTLED, sensor))
    found.sort(key=lambda c: (-SEVERITY[c.severity], c.code))
    return Observation(tuple(found))
