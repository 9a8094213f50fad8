from __future__ import annotations

import pytest

from grid.fleet.models import HostState, ResidencyState
from grid.router import (
    BreakerOutcome,
    CircuitBreakers,
    Measurements,
    RouteChoice,
    RouteRefusal,
    choose_route,
    hash_affinity_key,
)
from tests.router.builders import NOW, TTL, route

pytestmark = pytest.mark.unit


def choose(routes: list, **kwargs: object) -> RouteChoice:
    result = choose_route(routes, "m", NOW, lease_ttl_s=TTL, **kwargs)  # type: ignore[arg-type]
    assert isinstance(result, RouteChoice), result
    return result


def refuse(routes: list, **kwargs: object) -> RouteRefusal:
    result = choose_route(routes, "m", NOW, lease_ttl_s=TTL, **kwargs)  # type: ignore[arg-type]
    assert isinstance(result, RouteRefusal), result
    return result


@pytest.mark.parametrize(
    ("override", "code"),
    [
        ({"residency_state": ResidencyState.WARMING}, "model_not_ready"),
        ({"residency_state": ResidencyState.DRAINING}, "model_not_ready"),
        ({"host_state": HostState.DRAINING}, "host_not_admitting"),
        ({"host_state": HostState.QUARANTINED}, "host_not_admitting"),
        ({"lease_at": NOW - TTL - 1}, "lease_expired"),
        ({"lease_at": NOW + 60}, "lease_in_future"),
        ({"concurrency": 0}, "capacity_closed"),
    ],
)
def test_a_route_failing_a_hard_gate_is_never_chosen(override: dict, code: str) -> None:
    bad = route("bad", **override)
    assert refuse([bad]).reasons == {code: 1}
    assert choose([bad, route("good")]).route.host_id == "good"


def test_no_route_for_the_model_is_its_own_code() -> None:
    assert refuse([route("a", model_id="other")]).code == "no_route"
    assert refuse([route("a", residency_state=ResidencyState.FAILED)]).code == "not_admitted"


def test_accepting_hosts_win_over_throttled_even_when_busier() -> None:
    busy_accepting = route("acc", concurrency=4, active=3)
    idle_throttled = route(
        "thr", host_state=HostState.THROTTLED, throttle_fraction=1.0, concurrency=4
    )
    assert choose([idle_throttled, busy_accepting]).route.host_id == "acc"


def test_load_is_compared_as_a_fraction_of_effective_concurrency() -> None:
    wide = route("vllm", concurrency=32, active=8)  # 25% busy
    narrow = route("llama", concurrency=2, active=1)  # 50% busy
    assert choose([narrow, wide]).route.host_id == "vllm"


def test_advertised_queue_counts_in_the_expected_completion() -> None:
    backlog = route("backlog", concurrency=8, active=0, queued=40)
    clear = route("clear", concurrency=2, active=1)
    assert choose([backlog, clear]).route.host_id == "clear"


def test_active_concurrency_is_the_hard_admission_boundary() -> None:
    full = route("full", concurrency=2, active=2)
    assert refuse([full]).code == "at_capacity"
    throttled = route("half", host_state=HostState.THROTTLED, throttle_fraction=0.5,
                      concurrency=4, active=2)  # fmt: skip
    assert refuse([throttled]).reasons == {"at_capacity": 1}
    closed = route("zero", host_state=HostState.THROTTLED, throttle_fraction=0.0, concurrency=4)
    assert refuse([closed]).reasons == {"capacity_closed": 1}


def test_missing_capacity_is_conservative_raw_load() -> None:
    unknown = route("unknown", active=1)  # no concurrency: one request is a full wave
    known = route("known", concurrency=4, active=3)  # 3/4 busy: still below one full wave
    assert choose([unknown, known]).route.host_id == "known"
    assert choose([route("unknown", active=50)]).route.host_id == "unknown"  # no hard limit


def test_freshest_lease_breaks_ties_and_future_stamps_gain_nothing() -> None:
    old = route("old", lease_at=NOW - 30)
    fresh = route("fresh", lease_at=NOW - 2)
    assert choose([old, fresh]).route.host_id == "fresh"
    ahead = route("ahead", lease_at=NOW + 3)  # within the skew window: age zero
    now_exact = route("exact", lease_at=NOW)
    # Both are age zero: the deterministic engine-id order decides, not the future stamp.
    assert choose([ahead, now_exact]).route.host_id == "ahead"  # "ahead" < "exact"
    assert choose([route("zz", lease_at=NOW + 3), route("aa", lease_at=NOW)]).route.host_id == "aa"


def test_open_circuit_removes_a_route_until_it_cools_down() -> None:
    breakers = CircuitBreakers()
    a, b = route("a"), route("b")
    breakers.record(a.breaker_key, BreakerOutcome.FAILURE, NOW - 0.1)
    breakers.record(a.breaker_key, BreakerOutcome.FAILURE, NOW - 0.1)
    assert choose([a, b], breakers=breakers).route.host_id == "b"
    assert refuse([a], breakers=breakers).code == "circuit_open"


def test_measured_latency_steers_to_the_faster_engine_for_that_model_only() -> None:
    measurements = Measurements()
    slow, fast = route("slow"), route("fast")
    for _ in range(8):
        measurements.record(slow.host_id, slow.measure_key, 4.0, 40, NOW - 1)
        measurements.record(fast.host_id, fast.measure_key, 0.5, 40, NOW - 1)
        # another model's numbers on the slow engine must not help it
        measurements.record("slow", ("slow:39100", "other", ""), 0.01, 40, NOW - 1)
    assert choose([slow, fast], measurements=measurements).route.host_id == "fast"


def test_long_generations_favor_token_throughput() -> None:
    measurements = Measurements()
    snappy, wide = route("snappy"), route("wide")
    for _ in range(8):
        # 20 tok/s, low latency
        measurements.record(snappy.host_id, snappy.measure_key, 0.5, 10, NOW - 1)
        measurements.record(wide.host_id, wide.measure_key, 1.0, 200, NOW - 1)  # 200 tok/s
    assert choose([snappy, wide], measurements=measurements).route.host_id == "snappy"
    long = choose([snappy, wide], measurements=measurements, max_tokens=2000)
    assert long.route.host_id == "wide"


def test_affinity_keeps_a_session_among_near_equivalent_routes_only() -> None:
    routes = [route(f"h{i}") for i in range(6)]
    picks = {
        choose(routes, affinity=hash_affinity_key(f"session-{n}")).route.host_id for n in range(40)
    }
    assert len(picks) > 1  # sessions spread over equivalent engines
    key = hash_affinity_key("session-7")
    first = choose(routes, affinity=key)
    assert first.by_affinity
    assert all(choose(routes, affinity=key).route == first.route for _ in range(5))
    # A clearly busier engine (beyond the 20% band) is left even by its own sessions.
    loaded = [r if r.host_id != first.route.host_id else route(r.host_id, concurrency=1,
              active=0, queued=3) for r in routes]  # fmt: skip
    assert choose(loaded, affinity=key).route.host_id != first.route.host_id
