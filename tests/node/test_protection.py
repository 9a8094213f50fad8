"""Local host-protection loop: debounce, hysteresis, cooldown, unknowns, overrides.

Default policy numbers used below (see `ProtectionPolicy`): 3-sample debounce, 60 s recovery
cooldown, throttle fraction 0.5; memory throttle enter 85 / recover 75, drain 92 / 85, exhausted
97 / 92; battery (off AC) pause 20 / 30, critical 10 / 15; user idle enter 60 s / recover 300 s;
temperature critical 100 / 95 °C.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from grid.fleet.errors import GridError
from grid.fleet.models import HostState
from grid.node.protection import (
    Decision,
    LocalOverride,
    OverrideKind,
    ProtectionPolicy,
    ProtectionState,
    Sensor,
    Telemetry,
    ThermalState,
    Threshold,
    UnknownSensors,
    evaluate,
    load_policy,
)

pytestmark = pytest.mark.unit

POLICY = ProtectionPolicy()
T0 = 1_000.0


def calm(**changes: Any) -> Telemetry:
    """Every sensor known and far from any threshold."""
    readings: dict[str, Any] = {
        "user_active": False,
        "idle_seconds": 3600.0,
        "battery_percent": 100.0,
        "on_ac_power": True,
        "thermal_state": ThermalState.NOMINAL,
        "temperature_c": 45.0,
        "cpu_percent": 10.0,
        "memory_percent": 30.0,
        "gpu_memory_percent": 10.0,
        "load_per_core": 0.2,
        "network_up": True,
    }
    readings.update(changes)
    return Telemetry(**readings)


class Host:
    """Feeds samples one second apart (unless told otherwise) and keeps the state."""

    def __init__(
        self, policy: ProtectionPolicy = POLICY, state: ProtectionState | None = None
    ) -> None:
        self.policy = policy
        self.state = state or ProtectionState()
        self.now = T0
        self.decision: Decision | None = None

    def feed(self, telemetry: Telemetry, times: int = 1, step_s: float = 1.0) -> Decision:
        for _ in range(times):
            self.now += step_s
            self.decision, self.state = evaluate(telemetry, self.state, self.policy, self.now)
        assert self.decision is not None
        return self.decision

    def lifecycles(self, samples: Iterable[Telemetry]) -> list[HostState]:
        return [self.feed(sample).lifecycle for sample in samples]


def accepting_host(policy: ProtectionPolicy = POLICY) -> Host:
    host = Host(policy)
    host.feed(calm(), times=policy.debounce_samples)
    assert host.decision is not None and host.decision.lifecycle is HostState.ACCEPTING
    host.now += policy.recovery_cooldown_s  # later samples are free of the start-up change
    return host


def test_a_fresh_host_admits_nothing_until_its_telemetry_is_confirmed() -> None:
    host = Host()
    first = host.feed(calm())
    assert first.lifecycle is HostState.DRAINING
    assert not first.admits_new_work
    assert "awaiting_samples" in first.reasons
    assert host.feed(calm()).lifecycle is HostState.DRAINING
    third = host.feed(calm())  # the third calm sample completes the debounce window
    assert third.lifecycle is HostState.ACCEPTING
    assert third.throttle_fraction == 1.0
    assert third.reasons == ()


def test_a_one_sample_spike_does_not_change_the_state() -> None:
    host = accepting_host()
    spike = host.feed(calm(memory_percent=99.0))
    assert spike.lifecycle is HostState.ACCEPTING
    assert spike.observed is HostState.UNHEALTHY  # seen, but not confirmed
    assert "escalation_pending" in spike.reasons
    assert host.lifecycles([calm()] * 5) == [HostState.ACCEPTING] * 5


def test_a_sustained_condition_changes_state_on_the_debounce_count() -> None:
    host = accepting_host()
    seen = host.lifecycles([calm(memory_percent=88.0)] * 3)
    assert seen == [HostState.ACCEPTING, HostState.ACCEPTING, HostState.THROTTLED]
    assert host.decision is not None
    assert host.decision.throttle_fraction == 0.5
    assert host.decision.admits_new_work
    assert "memory_pressure" in host.decision.reasons


def test_escalation_goes_to_the_restriction_held_throughout_the_window() -> None:
    host = accepting_host()
    # drain, throttle, drain: the host was at least throttled for all three samples.
    seen = host.lifecycles(
        [calm(memory_percent=93.0), calm(cpu_percent=95.0), calm(memory_percent=93.0)]
    )
    assert seen[-1] is HostState.THROTTLED
    # ...and draining once drain has held for three samples in a row.
    assert host.lifecycles([calm(memory_percent=93.0)] * 2)[-1] is HostState.DRAINING


def test_entering_needs_the_entry_threshold_but_leaving_needs_the_recovery_threshold() -> None:
    between = calm(memory_percent=80.0)  # below enter (85), above recover (75)
    host = accepting_host()
    assert host.lifecycles([between] * 10) == [HostState.ACCEPTING] * 10

    host.feed(calm(memory_percent=88.0), times=3)
    assert host.decision is not None and host.decision.lifecycle is HostState.THROTTLED
    host.now += 3600.0  # long past the cooldown: only the threshold holds it
    assert host.lifecycles([between] * 10) == [HostState.THROTTLED] * 10
    assert host.lifecycles([calm(memory_percent=70.0)] * 3)[-1] is HostState.ACCEPTING


def test_recovery_waits_for_the_cooldown_but_escalation_does_not() -> None:
    host = accepting_host()
    host.feed(calm(memory_percent=88.0), times=3)
    escalated_at = host.now
    assert host.state.lifecycle is HostState.THROTTLED

    held = host.feed(calm(), times=10)  # ten calm seconds: debounced, but inside 60 s
    assert held.lifecycle is HostState.THROTTLED
    assert "recovery_cooldown" in held.reasons
    at_cooldown_end = host.feed(calm(), step_s=escalated_at + 60.0 - host.now)
    assert at_cooldown_end.lifecycle is HostState.ACCEPTING
    recovered_at = host.now

    # A new danger right after recovery is obeyed after the debounce, with no cooldown.
    seen = host.lifecycles([calm(thermal_state=ThermalState.CRITICAL)] * 3)
    assert seen[-1] is HostState.UNHEALTHY
    assert host.now - recovered_at == 3.0


def test_a_clock_that_goes_backwards_gives_no_cooldown_credit() -> None:
    host = accepting_host()
    host.feed(calm(memory_percent=88.0), times=3)
    host.feed(calm(), times=3, step_s=-100.0)
    assert host.state.lifecycle is HostState.THROTTLED


def test_recovery_from_a_severe_state_stops_at_what_the_window_still_shows() -> None:
    host = accepting_host()
    host.feed(calm(network_up=False), times=3)
    assert host.state.lifecycle is HostState.UNHEALTHY
    host.now += 120.0
    seen = host.lifecycles([calm(cpu_percent=95.0), calm(), calm(cpu_percent=95.0)])
    assert seen[-1] is HostState.THROTTLED


def test_unknown_sensors_are_not_zero() -> None:
    nothing = Telemetry()
    ignoring = accepting_host()
    assert ignoring.lifecycles([nothing] * 3)[-1] is HostState.ACCEPTING

    conservative = ProtectionPolicy(unknown_sensors=UnknownSensors.THROTTLE)
    host = accepting_host(conservative)
    decision = host.feed(calm(memory_percent=None), times=3)
    assert decision.lifecycle is HostState.THROTTLED
    assert decision.throttle_fraction == conservative.throttle_fraction
    assert "unknown_memory" in decision.reasons


def test_a_missing_battery_does_not_throttle_even_a_conservative_host() -> None:
    conservative = ProtectionPolicy(unknown_sensors=UnknownSensors.THROTTLE)
    host = accepting_host(conservative)
    decision = host.feed(calm(battery_percent=None, on_ac_power=None), times=3)
    assert decision.lifecycle is HostState.ACCEPTING


def test_a_vanished_reading_does_not_prove_recovery() -> None:
    host = accepting_host()
    host.feed(calm(memory_percent=93.0), times=3)
    assert host.state.lifecycle is HostState.DRAINING
    host.now += 3600.0
    decision = host.feed(calm(memory_percent=None), times=10)
    assert decision.lifecycle is HostState.DRAINING
    assert "memory_high" in decision.reasons
    assert host.lifecycles([calm(memory_percent=50.0)] * 3)[-1] is HostState.ACCEPTING


def test_critically_low_battery_off_ac_pauses_the_host_and_is_unsafe() -> None:
    host = accepting_host()
    decision = host.feed(calm(battery_percent=5.0, on_ac_power=False), times=3)
    assert decision.lifecycle is HostState.PAUSED
    assert decision.unsafe
    assert {"battery_critical", "battery_very_low", "battery_low"} <= set(decision.reasons)


def test_low_battery_while_charging_or_unconfirmed_is_not_a_reason() -> None:
    charging = accepting_host()
    assert charging.feed(calm(battery_percent=5.0), times=3).lifecycle is HostState.ACCEPTING
    unsure = accepting_host()
    decision = unsure.feed(calm(battery_percent=5.0, on_ac_power=None), times=3)
    assert decision.lifecycle is HostState.ACCEPTING


def test_user_activity_pauses_until_the_machine_has_been_idle_long_enough() -> None:
    host = accepting_host()
    assert host.feed(calm(user_active=True), times=3).lifecycle is HostState.PAUSED
    host.now += 3600.0
    # Idle for 2 minutes: past the 60 s entry mark, short of the 300 s recovery mark.
    assert host.feed(calm(idle_seconds=120.0), times=5).lifecycle is HostState.PAUSED
    assert host.feed(calm(idle_seconds=400.0), times=3).lifecycle is HostState.ACCEPTING
    # Recent input alone (idle 30 s, no explicit flag) also counts as activity.
    assert host.feed(calm(idle_seconds=30.0), times=3).lifecycle is HostState.PAUSED


def test_a_dedicated_server_ignores_user_activity_and_battery() -> None:
    host = accepting_host()
    busy_laptop_readings = calm(
        user_active=True, idle_seconds=0.0, battery_percent=5.0, on_ac_power=False, dedicated=True
    )
    assert host.feed(busy_laptop_readings, times=5).lifecycle is HostState.ACCEPTING
    # ...but not heat.
    hot = busy_laptop_readings.model_copy(update={"temperature_c": 101.0})
    assert host.feed(hot, times=3).lifecycle is HostState.UNHEALTHY


def test_thermal_state_or_temperature_alone_confirms_critical_heat() -> None:
    for reading in (calm(thermal_state=ThermalState.CRITICAL), calm(temperature_c=101.0)):
        decision = accepting_host().feed(reading, times=3)
        assert decision.lifecycle is HostState.UNHEALTHY
        assert decision.unsafe
        assert "thermal_critical" in decision.reasons


def test_a_serious_thermal_state_drains_and_a_lost_network_is_unhealthy() -> None:
    drained = accepting_host().feed(calm(thermal_state=ThermalState.SERIOUS), times=3)
    assert drained.lifecycle is HostState.DRAINING
    assert not drained.unsafe
    offline = accepting_host().feed(calm(network_up=False), times=3)
    assert offline.lifecycle is HostState.UNHEALTHY
    assert "network_down" in offline.reasons


def test_an_override_applies_at_once_and_ends_at_its_expiry() -> None:
    host = accepting_host()
    expires = host.now + 10.0
    drain = LocalOverride(kind=OverrideKind.DRAIN, reason="maintenance", expires_at=expires)
    fenced = host.feed(calm(override=drain))
    assert fenced.lifecycle is HostState.DRAINING
    assert fenced.throttle_fraction == 0.0
    assert fenced.reasons[0] == "override_drain"
    host.feed(calm(override=drain), step_s=expires - host.now - 0.5)
    assert host.decision is not None and host.decision.lifecycle is HostState.DRAINING
    after = host.feed(calm(override=drain), step_s=0.5)  # exactly at the expiry time
    assert after.lifecycle is HostState.ACCEPTING
    assert "override_expired" in after.reasons


def test_an_override_never_loosens_a_confirmed_unsafe_condition() -> None:
    host = accepting_host()
    host.feed(calm(thermal_state=ThermalState.CRITICAL), times=3)
    pause = LocalOverride(kind=OverrideKind.PAUSE, reason="operator")
    decision = host.feed(calm(thermal_state=ThermalState.CRITICAL, override=pause))
    assert decision.lifecycle is HostState.UNHEALTHY  # stricter than the override
    assert decision.unsafe
    assert "override_pause" in decision.reasons

    quarantine = LocalOverride(kind=OverrideKind.QUARANTINE, reason="investigating")
    fenced = host.feed(calm(thermal_state=ThermalState.CRITICAL, override=quarantine))
    assert fenced.lifecycle is HostState.QUARANTINED
    assert {"override_quarantine", "thermal_critical"} <= set(fenced.reasons)


def test_quarantine_outranks_a_calm_host_until_released() -> None:
    host = accepting_host()
    quarantine = LocalOverride(kind=OverrideKind.QUARANTINE, reason="compromised")
    assert host.feed(calm(override=quarantine), times=20).lifecycle is HostState.QUARANTINED
    assert host.feed(calm()).lifecycle is HostState.ACCEPTING


def test_state_survives_a_json_round_trip() -> None:
    host = accepting_host()
    host.feed(calm(memory_percent=93.0), times=3)
    restored = ProtectionState.model_validate_json(host.state.model_dump_json())
    assert restored == host.state
    assert "memory_high" in restored.latched


def test_a_one_sample_debounce_reacts_immediately() -> None:
    host = accepting_host(ProtectionPolicy(debounce_samples=1, recovery_cooldown_s=0.0))
    assert host.lifecycles([calm(memory_percent=93.0), calm()]) == [
        HostState.DRAINING,
        HostState.ACCEPTING,
    ]


@pytest.mark.parametrize(
    ("settings", "path"),
    [
        ({"memory_throttle": {"enter": 85, "recover": 90}}, "memory_throttle"),
        ({"battery_pause": {"enter": 20, "recover": 10}}, "battery_pause"),
        ({"memory_drain": {"enter": 80, "recover": 70}}, "memory_drain"),
        ({"battery_critical": {"enter": 30, "recover": 40}}, "battery_critical"),
        ({"user_active_state": "accepting"}, "user_active_state"),
        ({"debounce_samples": 0}, "debounce_samples"),
        ({"throttle_fraction": 0}, "throttle_fraction"),
        ({"conservative_sensors": ["smell"]}, "conservative_sensors.0"),
        ({"no_such_setting": 1}, "no_such_setting"),
    ],
)
def test_an_inconsistent_policy_is_refused_with_a_stable_code(
    settings: dict[str, Any], path: str
) -> None:
    with pytest.raises(GridError) as refused:
        load_policy(settings)
    assert refused.value.code == "invalid_protection_policy"
    assert refused.value.path == path
    assert refused.value.fix


def test_a_consistent_policy_loads_from_configuration() -> None:
    policy = load_policy(
        {
            "debounce_samples": 5,
            "unknown_sensors": "throttle",
            "conservative_sensors": ["memory", "thermal"],
            "memory_throttle": {"enter": 70, "recover": 60},
        }
    )
    assert policy.debounce_samples == 5
    assert policy.conservative_sensors == frozenset({Sensor.MEMORY, Sensor.THERMAL})
    assert policy.memory_throttle == Threshold(enter=70, recover=60)
