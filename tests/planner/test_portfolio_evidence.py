"""Outcome confidence, half-lives, the optimism bonus, revisions, and the candidate utility.

Hand-worked: confidence = min(1, n·2^(−age/7d)/20) for service, min(1, k·2^(−age/7d)/8) for
labelled quality; bonus = 6·(1 − max of the two); utility = 100·suitability − penalty + bonus,
penalty = min(10, startup_s / 4) for a model with no ready or base replica.
"""

from __future__ import annotations

import pytest

from grid.fleet.workloads import Outcome, PortfolioPolicy
from grid.planner.portfolio.evidence import bonus_of, evidence_of
from tests.planner.portfolio.builders import host, model, resident, work, wsnapshot
from tests.planner.portfolio.helpers import candidate, planned

pytestmark = pytest.mark.unit

POLICY = PortfolioPolicy()
WEEK = 7 * 86400.0


def _ev(**fields: object) -> tuple[float, float, float]:
    e = evidence_of(Outcome(model_id="m", workload="coding", **fields), POLICY)  # type: ignore[arg-type]
    return e.service_confidence, e.quality_confidence, bonus_of(e, POLICY)


def test_service_confidence_is_full_after_twenty_fresh_requests() -> None:
    assert _ev(requests=10, successes=10) == pytest.approx((0.5, 0.0, 3.0))
    assert _ev(requests=20, successes=20) == pytest.approx((1.0, 0.0, 0.0))
    assert _ev(requests=40, successes=40)[0] == pytest.approx(1.0)


def test_service_evidence_halves_every_week() -> None:
    assert _ev(requests=20, successes=20, age_s=WEEK)[0] == pytest.approx(0.5)
    assert _ev(requests=20, successes=20, age_s=2 * WEEK)[0] == pytest.approx(0.25)


def test_labelled_quality_is_full_after_eight_evaluations_with_its_own_half_life() -> None:
    s, q, bonus = _ev(quality=0.9, quality_samples=8, quality_age_s=0)
    assert (s, q, bonus) == pytest.approx((0.0, 1.0, 0.0))
    # A fresh latency-only request does not revive stale quality.
    s, q, _bonus = _ev(
        requests=20, successes=20, age_s=0, quality=0.9, quality_samples=8, quality_age_s=2 * WEEK
    )
    assert (s, q) == pytest.approx((1.0, 0.25))


def test_cold_candidate_utility_penalty_and_bonus_by_hand() -> None:
    # score 0.8, startup 20 + 8 = 28 s → penalty 7; no evidence → bonus 6: 80 − 7 + 6 = 79.
    snap = wsnapshot(
        [host("h1")],
        [model("m", 2048, load_estimate_s=20, warm_estimate_s=8, workload_scores={"coding": 0.8})],
        {"coding": work(5, 0.5)},
    )
    _plan, report = planned(snap)
    c = candidate(report, "coding", "m")
    assert (c.feasible, c.startup_s, c.transition_penalty) == (True, 28.0, 7.0)
    assert (c.utility, c.confidence, c.exploration_bonus) == (79.0, 0.0, 6.0)
    assert c.best_host == "h1" and c.eligible_hosts == 1


def test_ready_candidate_has_no_penalty_and_measured_quality_replaces_the_score() -> None:
    # Full quality confidence at 0.7 replaces the configured 1.0: 100·0.7 = 70, no bonus.
    snap = wsnapshot(
        [host("h1", residencies=[resident("m", 2048)])],
        [model("m", 2048, workload_scores={"coding": 1.0})],
        {"coding": work(5, 0.5)},
        outcomes=[{"model_id": "m", "workload": "coding", "quality": 0.7, "quality_samples": 8}],
    )
    _plan, report = planned(snap)
    c = candidate(report, "coding", "m")
    assert (c.startup_s, c.transition_penalty, c.utility, c.exploration_bonus) == (
        0.0,
        0.0,
        70.0,
        0.0,
    )


SHA_A, SHA_B = "a" * 64, "b" * 64


@pytest.mark.parametrize(("sha", "bonus"), [(SHA_A, 0.0), (SHA_B, 6.0), (None, 6.0)])
def test_evidence_of_another_artifact_revision_is_ignored(sha: str | None, bonus: float) -> None:
    snap = wsnapshot(
        [host("h1")],
        [model("m", 2048, artifact_sha256=SHA_A, workload_scores={"coding": 1.0})],
        {"coding": work(5, 0.5)},
        outcomes=[
            {
                "model_id": "m",
                "workload": "coding",
                "artifact_sha256": sha,
                "requests": 20,
                "successes": 20,
            }
        ],
    )
    _plan, report = planned(snap)
    assert candidate(report, "coding", "m").exploration_bonus == bonus
