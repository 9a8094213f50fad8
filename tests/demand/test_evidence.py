"""Outcome evidence: hand-worked half-life numbers, confidence ramps, revisions, bounds, state."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.demand.evidence import EvidenceStore
from grid.fleet.errors import GridError
from grid.fleet.models import FleetSnapshot
from grid.fleet.workloads import PortfolioPolicy
from tests.demand.helpers import obs, profile

pytestmark = pytest.mark.unit

DAY = 86_400.0
WEEK = 7 * DAY  # the default half-life of both records
P = PortfolioPolicy()
SHA_A = "a" * 64
SHA_B = "b" * 64


def respond(
    store: EvidenceStore,
    at: float,
    *,
    model: str = "coder",
    ok: bool = True,
    latency_ms: float = 100.0,
    sha: str | None = None,
    now: float | None = None,
) -> None:
    store.record_response(
        model,
        "coding",
        sha,
        ok=ok,
        latency_ms=latency_ms,
        at=at,
        now=at if now is None else now,
        policy=P,
    )


def evaluate(store: EvidenceStore, quality: float, now: float, sha: str | None = None) -> None:
    store.record_evaluation("coder", "coding", sha, quality, now=now, policy=P)


def test_service_confidence_reaches_full_weight_after_twenty_fresh_requests() -> None:
    store = EvidenceStore()
    for i in range(10):
        respond(store, 1000.0 + i * 0.001)
    entry = store.get("coder", "coding", None)
    assert entry is not None
    assert entry.service_confidence(1000.01, P) == pytest.approx(10 / 20, abs=1e-6)
    for i in range(15):
        respond(store, 1000.01 + i * 0.001)
    assert entry.service_confidence(1000.03, P) == 1.0  # 25 requests: capped at full weight


def test_quality_reaches_full_weight_after_eight_fresh_evaluations() -> None:
    store = EvidenceStore()
    for _ in range(4):
        evaluate(store, 0.9, now=5000.0)
    entry = store.get("coder", "coding", None)
    assert entry is not None
    assert entry.quality_confidence(5000.0, P) == pytest.approx(4 / 8)
    for _ in range(4):
        evaluate(store, 0.9, now=5000.0)
    assert entry.quality_confidence(5000.0, P) == 1.0


def test_evidence_halves_every_seven_days() -> None:
    store = EvidenceStore()
    for _ in range(10):
        respond(store, 0.0)
    entry = store.get("coder", "coding", None)
    assert entry is not None
    assert entry.effective_requests(WEEK, P) == pytest.approx(5.0)  # 10 x 0.5
    assert entry.service_confidence(WEEK, P) == pytest.approx(0.25)  # 5 / 20
    assert entry.effective_requests(2 * WEEK, P) == pytest.approx(2.5)
    row = entry.outcome(WEEK)
    # The row keeps counts at the newest sample and gives the age, for a reader that decays.
    assert (row.requests, row.age_s) == (pytest.approx(10.0), WEEK)
    assert row.requests * 0.5 ** (row.age_s / WEEK) == pytest.approx(5.0)


def test_a_new_sample_decays_the_record_to_its_own_time() -> None:
    store = EvidenceStore()
    for _ in range(4):
        respond(store, 0.0, latency_ms=100.0)
    respond(store, WEEK, latency_ms=400.0, ok=False)
    entry = store.get("coder", "coding", None)
    assert entry is not None
    assert entry.requests == pytest.approx(4 * 0.5 + 1)  # 3.0
    assert entry.successes == pytest.approx(4 * 0.5)  # 2.0
    # Weighted latency: (2.0 x 100 + 1 x 400) / 3.0 = 200 ms.
    assert entry.outcome(WEEK).mean_latency_ms == pytest.approx(200.0)
    assert entry.service_at == WEEK


def test_a_late_response_weighs_by_its_own_age_and_keeps_the_clock() -> None:
    store = EvidenceStore()
    respond(store, WEEK)
    respond(store, 0.0, now=WEEK)  # completed long ago, reported now
    entry = store.get("coder", "coding", None)
    assert entry is not None
    assert entry.requests == pytest.approx(1.0 + 0.5)
    assert entry.service_at == WEEK
    respond(store, 2 * WEEK + 10, now=2 * WEEK)  # stamped in the future: clamped to now
    assert entry.service_at == 2 * WEEK


def test_a_fresh_request_cannot_revive_stale_quality() -> None:
    store = EvidenceStore()
    for _ in range(8):
        evaluate(store, 1.0, now=0.0)
    respond(store, WEEK)  # a latency-only request, a week later
    entry = store.get("coder", "coding", None)
    assert entry is not None
    assert entry.quality_confidence(WEEK, P) == pytest.approx(0.5)  # 8 x 0.5 / 8
    assert entry.service_confidence(WEEK, P) == pytest.approx(1 / 20)
    row = entry.outcome(WEEK)
    assert row.quality_age_s == WEEK and row.age_s == 0.0


def test_quality_is_the_decay_weighted_mean_of_the_evaluations() -> None:
    store = EvidenceStore()
    evaluate(store, 1.0, now=0.0)
    evaluate(store, 0.0, now=WEEK)
    row = store.outcomes(WEEK, {"coder": None})[0]
    assert row.quality == pytest.approx((0.5 * 1.0 + 1.0 * 0.0) / 1.5)
    assert row.quality_samples == pytest.approx(1.5)
    assert row.requests == 0.0


def test_a_replaced_artifact_starts_uncertain_and_old_responses_stay_with_the_old_one() -> None:
    store = EvidenceStore()
    for _ in range(20):
        respond(store, 100.0, sha=SHA_A)
    assert [r.requests for r in store.outcomes(100.0, {"coder": SHA_A})] == [20.0]
    # The profile now names revision B: nothing is known about it.
    assert store.outcomes(200.0, {"coder": SHA_B}) == []
    respond(store, 150.0, sha=SHA_A, now=200.0)  # a late response of the previous revision
    assert store.get("coder", "coding", SHA_B) is None
    assert store.outcomes(200.0, {"coder": SHA_B}) == []
    respond(store, 210.0, sha=SHA_B)
    rows = store.outcomes(210.0, {"coder": SHA_B.upper()})  # digests compare case-blind
    assert [(r.artifact_sha256, r.requests) for r in rows] == [(SHA_B, 1.0)]


def test_observations_feed_the_model_that_served_them() -> None:
    store = EvidenceStore()
    served = obs("auto", 50.0, workload="coding", served_model_id="coder", service_time_s=0.8)
    unserved = obs("auto", 50.0, workload="coding")
    assert store.record_observation(served, None, 60.0, P)
    assert not store.record_observation(unserved, None, 60.0, P)
    row = store.outcomes(60.0, {"coder": None})[0]
    assert (row.model_id, row.requests, row.successes) == ("coder", 1.0, 1.0)
    assert row.mean_latency_ms == pytest.approx(800.0) and row.age_s == 10.0


def test_outcomes_are_a_valid_snapshot_field_and_skip_removed_models() -> None:
    store = EvidenceStore()
    respond(store, 10.0, model="coder")
    respond(store, 10.0, model="gone")
    evaluate(store, 0.7, now=10.0)
    rows = store.outcomes(20.0, {"coder": None})
    snap = FleetSnapshot(now=20.0, models=[profile("coder")], outcomes=rows)
    assert [(o.model_id, o.quality) for o in snap.outcomes] == [("coder", pytest.approx(0.7))]
    assert store.forget({"coder": None}) == 1 and len(store) == 1


def test_the_store_round_trips_through_json() -> None:
    store = EvidenceStore()
    respond(store, 10.0, sha=SHA_A)
    evaluate(store, 0.4, now=12.0, sha=SHA_A)
    text = json.dumps(store.to_state())
    again = EvidenceStore.from_state(json.loads(text))
    assert again.outcomes(30.0, {"coder": SHA_A}) == store.outcomes(30.0, {"coder": SHA_A})
    respond(again, 40.0, sha=SHA_A)  # the restored index is live
    entry = again.get("coder", "coding", SHA_A)
    assert entry is not None and entry.requests == pytest.approx(1.0 * 0.5 ** (30 / WEEK) + 1)


@pytest.mark.parametrize(
    "state",
    [
        {"version": 2, "entries": []},
        {"version": 1, "entries": [{"model_id": "m", "workload": "Coding"}]},
        {"version": 1, "entries": [{"model_id": "m", "workload": "coding", "requests": -1}]},
        {"version": 1, "entries": [{"model_id": "m", "workload": "x", "artifact_sha256": "z"}]},
    ],
)
def test_a_bad_state_is_a_clear_error(state: dict[str, object]) -> None:
    with pytest.raises(GridError) as caught:
        EvidenceStore.from_state(state)
    assert caught.value.code == "invalid_evidence_state" and caught.value.fix


def test_a_restore_applies_the_configured_cap_keeping_the_newest() -> None:
    store = EvidenceStore()
    for i in range(5):
        respond(store, float(i), model=f"m{i}")
    again = EvidenceStore.from_state(store.to_state(), max_entries=2)
    assert sorted(e.model_id for e in again.entries) == ["m3", "m4"]


KEYS = st.tuples(
    st.sampled_from([f"m{i}" for i in range(12)]),
    st.sampled_from(["coding", "general", "image"]),
    st.sampled_from([None, SHA_A, SHA_B]),
)


@settings(max_examples=80, deadline=None)
@given(
    cap=st.integers(min_value=1, max_value=8),
    events=st.lists(st.tuples(KEYS, st.booleans()), max_size=60),
)
def test_the_cap_is_never_exceeded_and_the_newest_record_is_kept(
    cap: int, events: list[tuple[tuple[str, str, str | None], bool]]
) -> None:
    store = EvidenceStore(max_entries=cap)
    for step, ((model, workload, sha), is_eval) in enumerate(events):
        now = float(step)
        if is_eval:
            store.record_evaluation(model, workload, sha, 0.5, now=now, policy=P)
        else:
            store.record_response(
                model, workload, sha, ok=True, latency_ms=1.0, at=now, now=now, policy=P
            )
        assert len(store) <= cap
        assert store.get(model, workload, sha) is not None
        assert len({e.key for e in store.entries}) == len(store)
