"""The controller-side collaborators: the evaluation gate and `RequestSignals` (pure parts)."""

from __future__ import annotations

import pytest

from grid.demand import DemandConfig, Observation
from grid.fleet.errors import GridError
from grid.fleet.models import FleetSnapshot
from grid.fleet.workloads import PortfolioPolicy
from grid.runtime.controller.evidence_store import (
    EvaluationRequest,
    EvidenceKeeper,
    RequestSignals,
    keeper_for,
)
from tests.demand.helpers import obs, profile

pytestmark = pytest.mark.unit

P = PortfolioPolicy()
SHA = "e" * 64
VOCABULARY = ["general", "coding", "research"]
PROFILES = {"coder": profile("coder", artifact_sha256=SHA), "general": profile("general")}


def evaluation(**fields: object) -> EvaluationRequest:
    return EvaluationRequest.model_validate(
        {"model": "coder", "workload": "coding", "quality": 0.9, **fields}
    )


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"model": "ghost"}, "unknown_model"),
        ({"workload": "cooking"}, "unknown_workload"),
        ({"quality": 1.01}, "invalid_quality"),
        ({"quality": float("inf")}, "invalid_quality"),
        ({"artifact_sha256": "f" * 64}, "artifact_mismatch"),
        ({"model": "general", "artifact_sha256": SHA}, "artifact_mismatch"),
    ],
)
def test_a_refused_evaluation_records_nothing(fields: dict[str, object], code: str) -> None:
    keeper = EvidenceKeeper()
    with pytest.raises(GridError) as caught:
        keeper.record_evaluation(
            evaluation(**fields), profiles=PROFILES, vocabulary=VOCABULARY, policy=P, now=10.0
        )
    assert caught.value.code == code and caught.value.fix
    assert keeper.to_state()["entries"] == []


def test_an_evaluation_without_a_digest_is_about_the_configured_revision() -> None:
    keeper = EvidenceKeeper()
    done = keeper.record_evaluation(
        evaluation(quality=0.25), profiles=PROFILES, vocabulary=VOCABULARY, policy=P, now=10.0
    )
    assert (done.artifact_sha256, done.quality, done.quality_samples) == (SHA, 0.25, 1.0)
    assert done.quality_confidence == pytest.approx(1 / 8)
    (row,) = keeper.outcomes(20.0, PROFILES)
    assert (row.model_id, row.artifact_sha256, row.quality_age_s) == ("coder", SHA, 10.0)
    again = EvidenceKeeper.from_state(keeper.to_state())
    assert again.outcomes(20.0, PROFILES) == [row]


def test_keeper_for_is_one_keeper_per_controller() -> None:
    class Plain:
        pass

    class Holding:
        def __init__(self) -> None:
            self.evidence = EvidenceKeeper()

    first, second = Plain(), Plain()
    assert keeper_for(first) is keeper_for(first)
    assert keeper_for(first) is not keeper_for(second)
    holder = Holding()
    assert keeper_for(holder) is holder.evidence


def auto_request(timestamp: float, **fields: object) -> Observation:
    return obs("auto", timestamp, workload="coding", served_model_id="coder", **fields)


def test_request_signals_keep_workload_demand_apart_and_feed_evidence_and_workflows() -> None:
    signals = RequestSignals(DemandConfig(), secret=b"k" * 32)
    unbound = auto_request(8 * 60 + 45, service_time_s=30.0)
    named = obs("coder", 8 * 60 + 50, workload="coding", served_model_id="coder")
    first = signals.observe(
        unbound,
        profiles=PROFILES,
        policy=P,
        now=8 * 60 + 45,
        served_sha256=SHA,
        affinity_digest="d",
    )
    second = signals.observe(
        named, profiles=PROFILES, policy=P, now=8 * 60 + 50, served_sha256=SHA, affinity_digest="d"
    )
    assert (first.workload_demand, first.evidence, first.workflow.value) == (True, True, "first")
    # The named request started at 530 s, after the first completed (525 s): the same workload.
    assert (second.workload_demand, second.evidence, second.workflow.value) == (
        False,
        True,
        "repeat",
    )
    workloads, outcomes = signals.snapshot_fields(9 * 60 + 1, PROFILES)
    # Only the unbound request is workload demand: 30 busy s in bucket 8 -> 0.5 in service.
    assert workloads["coding"].observations == 1
    assert workloads["coding"].offered_concurrency == pytest.approx(0.5)
    (row,) = outcomes
    assert (row.model_id, row.artifact_sha256) == ("coder", SHA)
    assert row.requests == pytest.approx(0.5 ** (5 / (7 * 86_400)) + 1)  # 5 s of decay, then 1
    snap = FleetSnapshot(
        now=9 * 60 + 1, models=list(PROFILES.values()), workloads=workloads, outcomes=outcomes
    )
    assert snap.workloads["coding"].observations == 1


def test_an_old_revision_response_is_not_evidence_for_the_configured_one() -> None:
    signals = RequestSignals(DemandConfig(), secret=b"k" * 32)
    signals.observe(
        auto_request(100.0), profiles=PROFILES, policy=P, now=100.0, served_sha256="a" * 64
    )
    _workloads, outcomes = signals.snapshot_fields(101.0, PROFILES)
    assert outcomes == []  # evidence for revision a..., the profile configures e...


def test_five_sessions_teach_a_workflow_edge() -> None:
    signals = RequestSignals(DemandConfig(), secret=b"k" * 32)
    t = 1000.0
    for _ in range(5):
        for word in ("research", "coding"):
            request = obs("auto", t + 10, workload=word, service_time_s=10.0)
            signals.observe(request, profiles=PROFILES, policy=P, now=t + 10, affinity_digest="s")
            t += 20
    (edge,) = [e for e in signals.edges(t) if e.source == "research"]
    assert (edge.target, edge.count, edge.confidence) == ("coding", 5, 1.0)
