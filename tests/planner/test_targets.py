"""Desired replica counts from demand: the arithmetic is worked out by hand in each test.

Defaults used below unless a test says otherwise: demand headroom 0.2, target utilization 0.75,
replica concurrency 1.0, so one replica carries 0.75 units and load = offered x 1.2 + queue.
"""

from __future__ import annotations

from typing import Any

import pytest

from grid.fleet.models import Evidence
from grid.planner.targets import Target, compute_targets
from tests.planner.fleets import NOW, host, model, resident, snapshot, want

pytestmark = pytest.mark.unit


def _target(
    profile: dict[str, Any],
    demand: dict[str, Any] | None = None,
    residencies: list[dict[str, Any]] | None = None,
    policy: dict[str, Any] | None = None,
) -> Target:
    hosts = [host("h1", 65536), host("h2", 65536), host("h3", 65536)]
    for i, res in enumerate(residencies or []):
        hosts[i]["residencies"] = [res]
    snap = snapshot(
        hosts,
        [profile],
        demand={profile["model_id"]: demand} if demand is not None else None,
        policy=policy,
    )
    return compute_targets(snap)[profile["model_id"]]


def _used(seconds_ago: float) -> dict[str, Any]:
    return resident("m", 4096, last_used_at=NOW - seconds_ago, loaded_at=NOW - 10_000)


def test_no_demand_and_no_bounds_wants_nothing() -> None:
    tgt = _target(model("m"))
    assert (tgt.desired, tgt.baseline, tgt.pins) == (0, 0, 0)


@pytest.mark.parametrize(
    ("offered", "expected"),
    [
        (0.5, 1),  # 0.6 / 0.75 = 0.8
        (1.0, 2),  # 1.2 / 0.75 = 1.6
        (2.5, 4),  # 3.0 / 0.75 = 4.0 exactly: no phantom fifth replica from rounding
        (5.0, 8),  # 6.0 / 0.75 = 8.0 exactly
    ],
)
def test_offered_concurrency_with_headroom_and_utilization(offered: float, expected: int) -> None:
    tgt = _target(model("m", max_replicas=20), {"offered_concurrency": offered})
    assert tgt.desired == expected
    assert tgt.reason == "demand"


def test_replica_concurrency_and_target_utilization_of_the_profile() -> None:
    # per replica 4 x 0.5 = 2 units; load 5 x 1.2 = 6 -> 3 replicas
    profile = model("m", max_replicas=20, replica_concurrency=4.0, target_utilization=0.5)
    assert _target(profile, {"offered_concurrency": 5.0}).desired == 3


def test_policy_demand_headroom_is_used() -> None:
    # offered 0.6: default headroom 0.72 / 0.75 -> 1 replica; headroom 0.5: 0.9 / 0.75 -> 2
    profile = model("m", max_replicas=20)
    assert _target(profile, {"offered_concurrency": 0.6}).desired == 1
    assert (
        _target(
            profile, {"offered_concurrency": 0.6}, policy={"demand_headroom_fraction": 0.5}
        ).desired
        == 2
    )


def test_requests_without_concurrency_still_want_one_replica() -> None:
    assert _target(model("m", max_replicas=5), {"rpm": 2.0}).desired == 1


def test_queue_adds_load_and_pressure() -> None:
    # load = 0 x 1.2 + 2 = 2 -> ceil(2.67) = 3; queue pressure asks ready + 1 = 1: 3 wins
    assert _target(model("m", max_replicas=9), {"queue_depth": 2}).desired == 3


def _quiet_ready() -> list[dict[str, Any]]:
    # two ready replicas used long ago: the cooldown hysteresis does not apply
    return [_used(5000), _used(5000)]


@pytest.mark.parametrize(
    ("pressure", "expected"),
    [
        ({}, 1),
        ({"p95_ms": 900.0}, 1),  # within the SLO
        ({"p95_ms": 1500.0}, 3),  # SLO missed: ready (2) + 1
        ({"error_rate": 0.2}, 3),  # above the 0.05 threshold
        ({"error_rate": 0.05}, 1),  # at the threshold: no pressure
        ({"queue_depth": 1}, 3),  # load 1.6 -> 3 (2.13), and ready + 1 = 3
    ],
)
def test_pressure_adds_a_replica_beyond_the_ready_set(
    pressure: dict[str, float], expected: int
) -> None:
    profile = model("m", max_replicas=9, latency_slo_ms=1000.0, scale_down_cooldown_s=600.0)
    demand = {"offered_concurrency": 0.5, **pressure}  # 0.6 / 0.75 -> 1 replica
    tgt = _target(profile, demand, residencies=_quiet_ready())
    assert tgt.desired == expected


def test_latency_without_an_slo_is_not_pressure() -> None:
    profile = model("m", max_replicas=9)
    demand = {"offered_concurrency": 0.5, "p95_ms": 99_999.0}
    assert _target(profile, demand, residencies=_quiet_ready()).desired == 1


def test_min_and_max_replicas_bound_the_forecast() -> None:
    assert _target(model("m", max_replicas=3), {"offered_concurrency": 50.0}).desired == 3
    floor = _target(model("m", min_replicas=2, max_replicas=4), {"offered_concurrency": 0.1})
    assert (floor.desired, floor.baseline) == (2, 2)


def test_baseline_is_the_minimum_replicas_without_demand() -> None:
    tgt = _target(model("m", min_replicas=1, max_replicas=3))
    assert (tgt.desired, tgt.baseline) == (1, 1)


def test_pins_are_a_floor_even_above_max_replicas() -> None:
    tgt = _target(model("m", pinned_hosts=["h1", "h2", "offline"], max_replicas=1))
    assert (tgt.desired, tgt.pins) == (3, 3)


def test_duplicate_pins_count_once() -> None:
    assert _target(model("m", pinned_hosts=["h1", "h1"], max_replicas=1)).pins == 1


def test_cooldown_keeps_recently_used_ready_replicas() -> None:
    profile = model("m", max_replicas=5, scale_down_cooldown_s=600.0)
    recent = _target(profile, {"offered_concurrency": 0.0}, residencies=[_used(60), _used(599)])
    assert (recent.desired, recent.reason) == (2, "cooldown")
    mixed = _target(profile, None, residencies=[_used(60), _used(601)])
    assert mixed.desired == 1, "only the replica used within the cooldown stays desired"
    stale = _target(profile, None, residencies=[_used(700), _used(900)])
    assert stale.desired == 0


def test_cooldown_falls_back_to_load_time_when_never_used() -> None:
    profile = model("m", max_replicas=5, scale_down_cooldown_s=600.0)
    fresh = resident("m", 4096, loaded_at=NOW - 100)
    assert _target(profile, None, residencies=[fresh]).desired == 1


def test_cooldown_counts_only_ready_replicas() -> None:
    profile = model("m", max_replicas=5, scale_down_cooldown_s=600.0)
    warming = resident("m", 4096, state="warming", last_used_at=NOW - 10)
    assert _target(profile, None, residencies=[warming]).desired == 0


def test_desired_replicas_overrides_the_forecast() -> None:
    profile = model("m", max_replicas=5)
    tgt = _target(profile, want(2, offered_concurrency=30.0, queue_depth=9))
    assert (tgt.desired, tgt.reason) == (2, "override")


def test_override_still_respects_bounds_and_pins() -> None:
    assert _target(model("m", max_replicas=3), want(7)).desired == 3
    assert _target(model("m", min_replicas=1, max_replicas=3), want(0)).desired == 1
    assert _target(model("m", pinned_hosts=["h1", "h2"]), want(0)).desired == 2


def test_positive_trend_projects_over_the_cold_start_path() -> None:
    # horizon = (60 + 20) s = 4/3 min; 1.2 + 0.3 x 4/3 = 1.6 -> 2.13 -> 3 (2 without trend)
    profile = model("m", max_replicas=20)
    assert _target(profile, {"offered_concurrency": 1.0}).desired == 2
    assert _target(profile, {"offered_concurrency": 1.0, "trend": 0.3}).desired == 3


def test_trend_lookahead_is_capped_at_five_minutes() -> None:
    # load 12; cold start of an hour, capped at 5 min: 12 + 0.2 x 5 = 13 -> 17.3 -> 18
    # (without the cap it would add min(0.2 x 61.3, 12) = 12 -> 32 replicas)
    profile = model("m", max_replicas=100, load_estimate_s=3600.0)
    assert _target(profile, {"offered_concurrency": 10.0, "trend": 0.2}).desired == 18


def test_trend_lookahead_never_more_than_doubles_the_load() -> None:
    # load 1.2 + min(100 x 4/3, 1.2) = 2.4 -> 3.2 -> 4
    profile = model("m", max_replicas=100)
    assert _target(profile, {"offered_concurrency": 1.0, "trend": 100.0}).desired == 4


def test_negative_trend_is_ignored() -> None:
    profile = model("m", max_replicas=20)
    base = _target(profile, {"offered_concurrency": 2.5}).desired
    assert base == 4
    assert _target(profile, {"offered_concurrency": 2.5, "trend": -50.0}).desired == base


def test_failure_domain_goal_raises_a_wanted_model_to_that_many_replicas() -> None:
    profile = model("m", max_replicas=3, min_failure_domains=2)
    assert _target(profile, {"offered_concurrency": 0.1}).desired == 2
    assert _target(profile).desired == 0, "a model nobody wants is not raised"
    capped = model("m", max_replicas=2, min_failure_domains=5)
    assert _target(capped, {"offered_concurrency": 0.1}).desired == 2


def test_evidence_comes_from_the_demand_entry() -> None:
    inferred = _target(model("m", max_replicas=3), {"rpm": 1.0, "evidence": "inferred"})
    assert inferred.evidence is Evidence.INFERRED
    assert _target(model("m", min_replicas=1)).evidence is Evidence.DIRECT
