"""Properties of the protection loop over arbitrary telemetry sequences.

The oracle of each property is computed from the raw readings and the default thresholds
(critical heat at thermal state `critical` or 100 °C, memory exhausted at 97 %, critical battery
at 10 % off AC), not from the loop's own intermediate results.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.fleet.models import ADMITTING_STATES, HostState
from grid.node.protection import (
    LocalOverride,
    OverrideKind,
    ProtectionPolicy,
    ProtectionState,
    Telemetry,
    ThermalState,
    UnknownSensors,
    evaluate,
)

pytestmark = pytest.mark.property

RANK = {
    HostState.ACCEPTING: 0,
    HostState.THROTTLED: 1,
    HostState.DRAINING: 2,
    HostState.PAUSED: 3,
    HostState.UNHEALTHY: 4,
    HostState.QUARANTINED: 5,
}
OVERRIDE_FLOOR = {
    OverrideKind.DRAIN: HostState.DRAINING,
    OverrideKind.PAUSE: HostState.PAUSED,
    OverrideKind.QUARANTINE: HostState.QUARANTINED,
}


def maybe(strategy: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.one_of(st.none(), strategy)


percent = st.floats(min_value=0, max_value=100, allow_nan=False)
overrides = st.builds(
    LocalOverride,
    kind=st.sampled_from(list(OverrideKind)),
    reason=st.just("test"),
    expires_at=maybe(st.floats(min_value=0, max_value=2_000, allow_nan=False)),
)
telemetry = st.builds(
    Telemetry,
    user_active=maybe(st.booleans()),
    idle_seconds=maybe(st.floats(min_value=0, max_value=1_000, allow_nan=False)),
    battery_percent=maybe(percent),
    on_ac_power=maybe(st.booleans()),
    thermal_state=maybe(st.sampled_from(list(ThermalState))),
    temperature_c=maybe(st.floats(min_value=20, max_value=120, allow_nan=False)),
    cpu_percent=maybe(percent),
    memory_percent=maybe(percent),
    gpu_memory_percent=maybe(percent),
    load_per_core=maybe(st.floats(min_value=0, max_value=6, allow_nan=False)),
    network_up=maybe(st.booleans()),
    override=st.one_of(st.none(), overrides),
    dedicated=st.booleans(),
)
policies = st.builds(
    ProtectionPolicy,
    debounce_samples=st.integers(min_value=1, max_value=5),
    recovery_cooldown_s=st.floats(min_value=0, max_value=120, allow_nan=False),
    unknown_sensors=st.sampled_from(list(UnknownSensors)),
)
gaps = st.floats(min_value=0.0, max_value=40.0, allow_nan=False)
# Arbitrary readings with one critical condition forced in, so confirmed runs are common.
critical_updates = st.one_of(
    st.fixed_dictionaries({"thermal_state": st.just(ThermalState.CRITICAL)}),
    st.fixed_dictionaries({"temperature_c": st.floats(min_value=100, max_value=120)}),
    st.fixed_dictionaries({"memory_percent": st.floats(min_value=97, max_value=100)}),
    st.fixed_dictionaries(
        {
            "battery_percent": st.floats(min_value=0, max_value=10),
            "on_ac_power": st.just(False),
            "dedicated": st.just(False),
        }
    ),
)
any_sample = st.one_of(
    telemetry,
    st.builds(lambda base, update: base.model_copy(update=update), telemetry, critical_updates),
)


def critical(sample: Telemetry) -> bool:
    """A confirmed-unsafe reading under the default thresholds."""
    hot = sample.thermal_state is ThermalState.CRITICAL or (
        sample.temperature_c is not None and sample.temperature_c >= 100.0
    )
    exhausted = sample.memory_percent is not None and sample.memory_percent >= 97.0
    flat = (
        not sample.dedicated
        and sample.on_ac_power is False
        and sample.battery_percent is not None
        and sample.battery_percent <= 10.0
    )
    return hot or exhausted or flat


@dataclass
class Step:
    now: float
    protective: HostState  # the state's lifecycle (telemetry only)
    final: HostState  # the decision's lifecycle (with the override)


def replay(samples: list[Telemetry], times: list[float], policy: ProtectionPolicy) -> list[Step]:
    state = ProtectionState()
    steps = []
    for sample, now in zip(samples, times, strict=True):
        decision, state = evaluate(sample, state, policy, now)
        steps.append(Step(now, state.lifecycle, decision.lifecycle))
    return steps


def clock(gap_list: list[float]) -> list[float]:
    now, times = 0.0, []
    for gap in gap_list:
        now += gap
        times.append(now)
    return times


@settings(derandomize=True, max_examples=300, deadline=None)
@given(
    policy=policies,
    samples_and_gaps=st.lists(st.tuples(any_sample, gaps), min_size=1, max_size=30),
)
def test_a_confirmed_critical_condition_is_never_accepting(
    policy: ProtectionPolicy, samples_and_gaps: list[tuple[Telemetry, float]]
) -> None:
    samples = [sample for sample, _ in samples_and_gaps]
    steps = replay(samples, clock([gap for _, gap in samples_and_gaps]), policy)
    n = policy.debounce_samples
    for i, step in enumerate(steps):
        confirmed = i + 1 >= n and all(critical(s) for s in samples[i + 1 - n : i + 1])
        if confirmed:
            assert step.final not in ADMITTING_STATES
            assert RANK[step.final] >= RANK[HostState.PAUSED]


@settings(derandomize=True, max_examples=300, deadline=None)
@given(
    policy=policies,
    samples_and_gaps=st.lists(st.tuples(any_sample, gaps), min_size=1, max_size=30),
)
def test_no_recovery_comes_sooner_than_the_cooldown_and_overrides_always_hold(
    policy: ProtectionPolicy, samples_and_gaps: list[tuple[Telemetry, float]]
) -> None:
    samples = [sample for sample, _ in samples_and_gaps]
    steps = replay(samples, clock([gap for _, gap in samples_and_gaps]), policy)
    last_change: float | None = None
    previous = HostState.DRAINING  # a fresh state
    for sample, step in zip(samples, steps, strict=True):
        if step.protective is not previous:
            if RANK[step.protective] < RANK[previous] and last_change is not None:
                assert step.now - last_change >= policy.recovery_cooldown_s
            last_change = step.now
        previous = step.protective
        assert step.protective is not HostState.QUARANTINED  # only an operator quarantines
        assert RANK[step.final] >= RANK[step.protective]
        override = sample.override
        if override is not None and (override.expires_at is None or step.now < override.expires_at):
            assert RANK[step.final] >= RANK[OVERRIDE_FLOOR[override.kind]]
        else:
            assert step.final is step.protective


# Samples whose lifecycle is known by construction: one condition far past its entry threshold
# and far from every other threshold (including the recovery thresholds of other levels).
CALM = Telemetry(
    user_active=False,
    idle_seconds=3600.0,
    battery_percent=100.0,
    on_ac_power=True,
    thermal_state=ThermalState.NOMINAL,
    temperature_c=40.0,
    cpu_percent=10.0,
    memory_percent=20.0,
    gpu_memory_percent=0.0,
    load_per_core=0.1,
    network_up=True,
)
KNOWN = {
    HostState.ACCEPTING: CALM,
    HostState.THROTTLED: CALM.model_copy(update={"cpu_percent": 99.0}),
    HostState.DRAINING: CALM.model_copy(update={"load_per_core": 5.0}),
    HostState.PAUSED: CALM.model_copy(update={"user_active": True, "idle_seconds": 0.0}),
    HostState.UNHEALTHY: CALM.model_copy(update={"network_up": False}),
}


@settings(derandomize=True, max_examples=300, deadline=None)
@given(
    policy=policies,
    levels=st.lists(st.sampled_from(list(KNOWN)), min_size=1, max_size=40),
    gap_list=st.lists(gaps, min_size=40, max_size=40),
)
def test_state_changes_need_the_debounce_count(
    policy: ProtectionPolicy, levels: list[HostState], gap_list: list[float]
) -> None:
    samples = [KNOWN[level] for level in levels]
    steps = replay(samples, clock(gap_list[: len(levels)]), policy)
    n = policy.debounce_samples
    previous = HostState.DRAINING
    for i, step in enumerate(steps):
        window = levels[max(0, i + 1 - n) : i + 1]
        if step.protective is not previous:
            assert len(window) == n, "changed before the debounce window filled"
            if RANK[step.protective] > RANK[previous]:
                assert all(RANK[level] > RANK[previous] for level in window)
                # the restriction held throughout the window, no more
                assert step.protective is min(window, key=RANK.__getitem__)
            else:
                assert all(RANK[level] < RANK[previous] for level in window)
                assert step.protective is max(window, key=RANK.__getitem__)
        elif len(window) == n and all(RANK[level] > RANK[previous] for level in window):
            pytest.fail("a danger confirmed for the whole window was not obeyed")
        previous = step.protective
