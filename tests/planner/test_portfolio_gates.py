"""Evidence gates, the weak-evidence canary cap, queue-only backlog, the media canary band.

Defaults used in the hand-worked numbers: replica_concurrency 1.0, target_utilization 0.75,
demand headroom 0.2, so one replica serves 0.75 units and an arrival load L asks for
⌈1.2·L / 0.75⌉ replicas.
"""

from __future__ import annotations

import pytest

from tests.planner.portfolio.builders import NOW, host, model, work, wsnapshot
from tests.planner.portfolio.helpers import hosts_of, planned, row

pytestmark = pytest.mark.unit

HOSTS = [host("h1"), host("h2"), host("h3")]


def coder(**fields: object) -> dict[str, object]:
    return model("coder", 4096, max_replicas=3, workload_scores={"coding": 1.0}, **fields)


def test_below_the_gate_is_deferred_with_the_stable_reason() -> None:
    _plan, report = planned(wsnapshot(HOSTS, [coder()], {"coding": work(2, 0.5)}))
    r = row(report, "coding")
    assert r.state == "deferred"
    assert r.reason == "below_evidence_gate: 2 of 3 observations"
    assert report.mapping == {} and r.planned == 0


def test_three_observations_pass_the_gate() -> None:
    plan, report = planned(wsnapshot(HOSTS, [coder()], {"coding": work(3, 0.5)}))
    assert report.mapping == {"coding": "coder"}
    assert len(hosts_of(plan, "coder")) == 1  # ⌈1.2·0.5/0.75⌉ = 1


def test_device_time_passes_the_gate_but_only_earns_one_canary() -> None:
    # 1.5 units: ⌈1.2·1.5/0.75⌉ = 3 replicas asked, weak evidence (1 observation) caps at 1.
    plan, report = planned(wsnapshot(HOSTS, [coder()], {"coding": work(1, 1.5)}))
    assert report.mapping == {"coding": "coder"}
    assert len(hosts_of(plan, "coder")) == 1
    r = row(report, "coding")
    assert (r.desired, r.planned, r.missing, r.state) == (1, 1, 0, "planned")
    assert "(canary)" in r.reason


def test_repeated_arrivals_lift_the_cap() -> None:
    plan, _report = planned(wsnapshot(HOSTS, [coder()], {"coding": work(3, 1.5)}))
    assert len(hosts_of(plan, "coder")) == 3


def _outcome(age_s: float) -> dict[str, object]:
    return {
        "model_id": "coder",
        "workload": "coding",
        "requests": 1,
        "successes": 1,
        "age_s": age_s,
    }


def test_a_fresh_success_lifts_the_cap_a_stale_one_does_not() -> None:
    fresh = wsnapshot(HOSTS, [coder()], {"coding": work(1, 1.5)}, outcomes=[_outcome(10)])
    stale = wsnapshot(HOSTS, [coder()], {"coding": work(1, 1.5)}, outcomes=[_outcome(7200)])
    assert len(hosts_of(planned(fresh)[0], "coder")) == 3
    assert len(hosts_of(planned(stale)[0], "coder")) == 1


def test_direct_demand_lifts_the_cap_on_top_of_its_own_replica() -> None:
    # Direct demand of 0.1 units: one base replica; the workload asks 3 more, room 3 − 1 = 2.
    snap = wsnapshot(
        HOSTS,
        [coder()],
        {"coding": work(1, 1.5)},
        demand={"coder": {"offered_concurrency": 0.1, "rpm": 1}},
    )
    plan, _report = planned(snap)
    assert len(hosts_of(plan, "coder")) == 3
    assert plan.desired_replicas["coder"] == 3


def test_queued_work_is_not_projected_onto_the_model() -> None:
    # 2.0 units, all of it queue: admitted, but arrival load 0 asks for one replica, not 3.
    queued = wsnapshot(HOSTS, [coder()], {"coding": work(3, 2.0, queue_depth=2.0)})
    arrivals = wsnapshot(HOSTS, [coder()], {"coding": work(3, 2.0, queue_depth=0)})
    assert len(hosts_of(planned(queued)[0], "coder")) == 1
    assert len(hosts_of(planned(arrivals)[0], "coder")) == 3  # ⌈2.4/0.75⌉ = 4, max 3


IMAGE = model("sdxl", 4096, max_replicas=2, workload_scores={"image": 1.0})


def test_image_in_the_canary_band_earns_one_replica_after_the_spare_proof() -> None:
    roomy = [host(f"h{i}", 65536, max_models=4) for i in range(1, 4)]
    plan, report = planned(wsnapshot(roomy, [IMAGE], {"image": work(2, 1.2, modality="image")}))
    assert report.mapping == {"image": "sdxl"}
    assert len(hosts_of(plan, "sdxl")) == 1
    assert row(report, "image").state == "planned"


@pytest.mark.parametrize(
    "hosts",
    [
        [host(f"h{i}", 65536) for i in range(1, 4)],  # unknown slot limits: no headroom proof
        [host("h1", 65536, max_models=8)],  # no second compatible host
        # After losing one host a single slot is left: not room for the canary and one unseen
        # workload.
        [host(f"h{i}", 65536, max_models=1) for i in range(1, 3)],
    ],
    ids=["unknown-slots", "one-host", "few-slots"],
)
def test_image_in_the_canary_band_is_deferred_without_the_proof(
    hosts: list[dict[str, object]],
) -> None:
    plan, report = planned(wsnapshot(hosts, [IMAGE], {"image": work(2, 1.2, modality="image")}))
    r = row(report, "image")
    assert r.state == "deferred"
    assert r.reason.startswith("spare_capacity_unproven:")
    assert hosts_of(plan, "sdxl") == []


def test_text_work_in_the_media_band_is_not_a_canary() -> None:
    _plan, report = planned(wsnapshot(HOSTS, [coder()], {"coding": work(2, 1.2)}))
    assert row(report, "coding").reason == "below_evidence_gate: 2 of 3 observations"


def test_now_is_the_snapshot_clock() -> None:
    snap = wsnapshot(HOSTS, [coder()], {"coding": work(3, 0.5)})
    assert snap.now == NOW


def test_the_media_band_without_any_feasible_model_reads_as_the_plain_gate() -> None:
    _plan, report = planned(wsnapshot(HOSTS, [coder()], {"image": work(2, 1.2, modality="image")}))
    assert row(report, "image").reason == "below_evidence_gate: 2 of 3 observations"


def test_the_gate_and_the_cap_are_policy_numbers() -> None:
    policy = {"portfolio": {"min_observations": 2, "canary_max_replicas": 2}}
    _plan, report = planned(wsnapshot(HOSTS, [coder()], {"coding": work(2, 0.5)}, policy=policy))
    assert report.mapping == {"coding": "coder"}
    plan, _report = planned(wsnapshot(HOSTS, [coder()], {"coding": work(1, 1.5)}, policy=policy))
    assert len(hosts_of(plan, "coder")) == 2  # weak evidence, cap 2 of the 3 asked


def test_an_unknown_policy_number_is_refused_with_its_path() -> None:
    from grid.fleet.errors import SnapshotError

    with pytest.raises(SnapshotError) as info:
        wsnapshot(HOSTS, [coder()], {"coding": work()}, policy={"portfolio": {"bonus": 3}})
    assert (info.value.code, info.value.path) == ("unknown_field", "policy.portfolio.bonus")
