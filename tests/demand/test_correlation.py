"""Inferred demand from model correlations: maturity, threshold, caps, max not sum, no chains.

The scenarios use `correlation_config` (level_alpha=1, 20 buckets) so that a model is quiet as
soon as one complete bucket passes without its requests. `now` is 30 s into bucket 10, so
bucket 9 is the last complete bucket and bucket 10 is unfinished.
"""

from __future__ import annotations

import pytest

from grid.demand import DemandTracker, RelationKind
from grid.demand.correlation import groups
from grid.fleet.models import Evidence

from .helpers import BUCKET_S, correlation_config, fill_bucket, profiles

pytestmark = pytest.mark.unit

NOW = 10 * BUCKET_S + 30.0


def _active(tracker: DemandTracker, model_id: str, buckets: list[int], count: int = 1) -> None:
    for bucket in buckets:
        fill_bucket(tracker, model_id, bucket, count)


def test_co_active_peer_receives_confidence_weighted_inferred_demand() -> None:
    tracker = DemandTracker(["a", "b"], config=correlation_config())
    _active(tracker, "a", [1, 2, 3], count=2)
    _active(tracker, "a", [9], count=2)  # a is current
    _active(tracker, "b", [1, 2, 3], count=1)  # b is quiet now
    forecast = tracker.explain(NOW, profiles("a", "b"))
    b = forecast["b"]
    assert b.entry.evidence is Evidence.INFERRED
    assert b.inferred_from is not None
    assert b.inferred_from.kind is RelationKind.CO_ACTIVE
    # association 3 both / 4 either = 0.75; b ran at half a's rate; a runs at 2/min now.
    assert b.entry.rpm == pytest.approx(0.75 * 0.5 * 2.0)
    assert b.entry.offered_concurrency == pytest.approx(b.entry.rpm / 60.0 * 1.0)  # 1 s service
    # Target-local queue, latency and errors are not refreshed by an association.
    assert (b.entry.queue_depth, b.entry.p95_ms, b.entry.error_rate) == (0.0, 0.0, 0.0)
    assert forecast["a"].entry.evidence is Evidence.DIRECT


def test_two_supporting_buckets_are_not_enough() -> None:
    tracker = DemandTracker(["a", "b"], config=correlation_config())
    _active(tracker, "a", [1, 2, 9])
    _active(tracker, "b", [1, 2])
    assert "b" not in tracker.forecast(NOW, profiles("a", "b"))
    assert tracker.correlations(NOW) == []


def test_association_must_reach_the_threshold() -> None:
    now = 20 * BUCKET_S + 30.0  # window: buckets 0..19; even buckets only, so no next-bucket pair
    shared = [0, 2, 4, 6, 8, 10, 12]
    at_threshold = DemandTracker(["a", "b"], config=correlation_config())
    # 7 shared buckets out of 10 where either is active: exactly 0.70.
    _active(at_threshold, "a", [*shared, 14, 19])
    _active(at_threshold, "b", [*shared, 16])
    relations = at_threshold.correlations(now)
    assert [r.kind for r in relations] == [RelationKind.CO_ACTIVE, RelationKind.CO_ACTIVE]
    assert relations[0].share == pytest.approx(0.7)
    assert at_threshold.forecast(now, profiles("a", "b"))["b"].evidence is Evidence.INFERRED

    below = DemandTracker(["a", "b"], config=correlation_config())
    # One more bucket where only a is active: 7 / 11 < 0.70.
    _active(below, "a", [*shared, 14, 18, 19])
    _active(below, "b", [*shared, 16])
    assert below.correlations(now) == []
    assert "b" not in below.forecast(now, profiles("a", "b"))


def test_directional_pair_excludes_the_unfinished_next_bucket() -> None:
    tracker = DemandTracker(["a", "b"], config=correlation_config())
    # a -> b one bucket later at 1->2, 3->4, 5->6; a at 7 with no b after (a real failure).
    # a at 9: its next bucket (10) is unfinished, so it is not a failure: share 3/4, not 3/5.
    _active(tracker, "a", [1, 3, 5, 7, 9])
    _active(tracker, "b", [2, 4, 6])
    forecast = tracker.explain(NOW, profiles("a", "b"))
    b = forecast["b"]
    assert b.inferred_from is not None
    assert b.inferred_from.kind is RelationKind.NEXT_BUCKET
    assert b.inferred_from.share == pytest.approx(0.75)
    assert b.inferred_from.support == 3


def test_inferred_demand_is_capped_at_twice_the_targets_observed_peak() -> None:
    tracker = DemandTracker(["a", "b"], config=correlation_config())
    _active(tracker, "a", [1, 2, 3], count=1)
    _active(tracker, "b", [1, 2, 3], count=1)  # b's peak: 1 request a minute
    _active(tracker, "a", [9], count=100)  # a surges to 100 a minute
    b = tracker.explain(NOW, profiles("a", "b"))["b"]
    # Uncapped it would be 0.75 x 1 x 100 = 75 a minute.
    assert b.entry.rpm == pytest.approx(2.0)
    assert b.capped
    assert b.entry.offered_concurrency <= 2 * b.peak_concurrency + 1e-12


def test_several_sources_give_the_maximum_not_the_sum() -> None:
    tracker = DemandTracker(["a", "c", "b"], config=correlation_config())
    _active(tracker, "a", [1, 2, 3], count=2)
    _active(tracker, "c", [1, 2, 3], count=1)
    _active(tracker, "b", [1, 2, 3], count=1)
    _active(tracker, "a", [9], count=4)  # suggests 0.75 x 0.5 x 4 = 1.5 a minute for b
    _active(tracker, "c", [9], count=1)  # suggests 0.75 x 1.0 x 1 = 0.75 a minute for b
    b = tracker.explain(NOW, profiles("a", "b", "c"))["b"]
    assert b.entry.rpm == pytest.approx(1.5)
    assert b.inferred_from is not None and b.inferred_from.source == "a"


def test_at_most_32_current_sources_are_consulted() -> None:
    def scenario(unrelated: int) -> DemandTracker:
        names = [f"s{i:02d}" for i in range(unrelated)]
        tracker = DemandTracker([*names, "weak", "b"], config=correlation_config())
        for name in names:  # strong current sources that never ran with b
            _active(tracker, name, [9], count=50)
        _active(tracker, "weak", [1, 2, 3, 9])
        _active(tracker, "b", [1, 2, 3])
        return tracker

    assert "b" in scenario(31).forecast(NOW, profiles("b"))  # weak is the 32nd source
    assert "b" not in scenario(32).forecast(NOW, profiles("b"))  # weak is the 33rd


def test_inferred_demand_never_propagates_transitively() -> None:
    def scenario(b_is_current: bool) -> dict[str, Evidence]:
        tracker = DemandTracker(["a", "b", "c"], config=correlation_config())
        # a -> b and b -> c are mature next-bucket pairs; a and c are never related.
        _active(tracker, "a", [0, 3, 6, 9])
        _active(tracker, "b", [1, 4, 7, *([9] if b_is_current else [])])
        _active(tracker, "c", [2, 5, 8])
        return {m: e.evidence for m, e in tracker.forecast(NOW, profiles("a", "b", "c")).items()}

    chain = scenario(b_is_current=False)
    assert chain.get("b") is Evidence.INFERRED
    assert "c" not in chain  # b's demand is itself inferred: it is no source
    direct_b = scenario(b_is_current=True)
    assert direct_b.get("c") is Evidence.INFERRED  # the same pair fires from direct demand


def test_direct_demand_wins_over_inference() -> None:
    with_peer = DemandTracker(["a", "b"], config=correlation_config())
    alone = DemandTracker(["a", "b"], config=correlation_config())
    for tracker in (with_peer, alone):
        _active(tracker, "b", [1, 2, 3, 9], count=1)
    _active(with_peer, "a", [1, 2, 3, 9], count=50)
    b = with_peer.forecast(NOW, profiles("a", "b"))["b"]
    assert b.evidence is Evidence.DIRECT
    assert b == alone.forecast(NOW, profiles("a", "b"))["b"]


def test_correlations_report_groups() -> None:
    tracker = DemandTracker(["a", "b", "c", "d"], config=correlation_config())
    _active(tracker, "a", [1, 2, 3, 4])
    _active(tracker, "b", [1, 2, 3, 4])
    _active(tracker, "c", [1, 2, 3, 4])
    _active(tracker, "d", [6, 7, 8])
    relations = tracker.correlations(NOW)
    assert groups(relations) == [["a", "b", "c"]]
    assert all("d" not in (r.source, r.target) for r in relations)
