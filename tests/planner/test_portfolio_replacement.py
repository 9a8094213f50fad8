"""The mature-beneficiary replacement and its authorization carried in the forecast
(replace.py), on hand-worked fleets.

One one-slot host holds the only READY replica of `gen` (serving research at 0.5 units); video
(2.0 units, 25 observations: mature) has no feasible candidate. Confidence-weighted pressures
by hand: video 2.0 × min(1, 25/20) = 2.0, research 0.5 × 1 = 0.5; 2.0 ≥ 1.5 × 0.5, and video
beats research on (failures, pressure), so the plan may replace gen with vid on h1. Then the
three later snapshots of that replacement: gen draining (the host stays held and the
preemption is staged again), gen gone (vid is placed there, one canary replica, although a
competing workload now presses harder), vid READY (the authorization ends).
"""

from __future__ import annotations

from typing import Any

import pytest

from grid.demand import LearnedEdge
from grid.fleet.models import DemandEntry, Evidence
from grid.fleet.workloads import ReplacementAuthorization, WorkloadForecast
from grid.runtime.controller import mapped_inputs, prewarm_demand
from tests.planner.portfolio.builders import NOW, host, model, resident, work, wsnapshot
from tests.planner.portfolio.helpers import hosts_of, planned, row

pytestmark = pytest.mark.unit

GEN = model("gen", 4096, workload_scores={"research": 1.0}, max_replicas=4)
VID = model("vid", 8192, workload_scores={"video": 1.0})
PIC = model("pic", 8192, workload_scores={"image": 1.0})
OLD = {"loaded_at": NOW - 3600, "last_used_at": NOW - 5, "active_requests": 1}
AUTH = {"model_id": "vid", "host_id": "h1", "victims": ["gen"]}


def _snap(
    residencies: list[dict[str, Any]],
    workloads: dict[str, Any] | None = None,
    gen: dict[str, Any] | None = None,
    demand: dict[str, Any] | None = None,
    extra_hosts: list[dict[str, Any]] | None = None,
) -> Any:
    return wsnapshot(
        [host("h1", 16384, max_models=1, residencies=residencies), *(extra_hosts or [])],
        [gen or GEN, VID, PIC],
        workloads or {"research": work(25, 0.5), "video": work(25, 2.0)},
        demand=demand,
    )


def _gen(state: str = "ready", **fields: Any) -> dict[str, Any]:
    doc = dict(OLD)
    doc.update(fields)
    return resident("gen", 4096, state, **doc)


def test_a_mature_beneficiary_replaces_the_only_copy() -> None:
    plan, report = planned(_snap([_gen()]))
    staged = [(p.victim_model_id, p.host_id, p.beneficiary_model_id) for p in plan.preemptions]
    assert staged == [("gen", "h1", "vid")]
    assert "mature beneficiary" in plan.preemptions[0].reason
    assert report.replacements == {
        "video": ReplacementAuthorization(model_id="vid", host_id="h1", victims=["gen"])
    }
    assert hosts_of(plan, "gen") == []  # the victim leaves the plan: the reconciler drains it
    assert "research" not in report.mapping  # the replaced workload loses its model
    assert row(report, "video").state == "awaiting-plan"
    codes = {(u.code, u.model_id) for u in plan.unsatisfied}
    assert ("portfolio_replaced", "gen") in codes and ("preemption_staged", "vid") in codes


@pytest.mark.parametrize(
    ("workloads", "gen", "demand"),
    [
        # research at 1.5 units: 2.0 < 1.5 × 1.5
        ({"research": work(25, 1.5), "video": work(25, 2.0)}, None, None),
        # video has 2 observations: weak evidence (the 1.5-unit gate admits it): not mature
        ({"research": work(25, 0.1), "video": work(2, 2.0)}, None, None),
        (None, model("gen", 4096, workload_scores={"research": 1.0}, min_replicas=1), None),
        (None, model("gen", 4096, workload_scores={"research": 1.0}, pinned_hosts=["h1"]), None),
        (None, None, {"gen": {"offered_concurrency": 0.4, "rpm": 6}}),
    ],
    ids=["below-ratio", "weak-beneficiary", "min-replicas", "pinned", "direct"],
)
def test_fences_and_the_ratio_hold(
    workloads: dict[str, Any] | None, gen: dict[str, Any] | None, demand: dict[str, Any] | None
) -> None:
    plan, report = planned(_snap([_gen()], workloads, gen, demand))
    assert plan.preemptions == []
    assert report.replacements == {}
    assert hosts_of(plan, "gen") == ["h1"]


def test_the_ratio_is_configurable() -> None:
    # 2.0 against 1.5: replaced at a ratio of 1.3, not at the default 1.5
    workloads = {"research": work(25, 1.5), "video": work(25, 2.0)}
    doc_policy = {"portfolio": {"mature_replacement_ratio": 1.3}}
    snap = wsnapshot(
        [host("h1", 16384, max_models=1, residencies=[_gen()])],
        [GEN, VID, PIC],
        workloads,
        policy=doc_policy,
    )
    plan, _report = planned(snap)
    assert [p.victim_model_id for p in plan.preemptions] == ["gen"]


def _carried(workloads: dict[str, Any]) -> dict[str, Any]:
    out = dict(workloads)
    out["video"] = {**out["video"], "replacement": AUTH}
    return out


def test_while_the_victim_drains_the_room_is_held_and_staged_again() -> None:
    # A second host with a free slot would take a coder; h1 (two slots now) would take it too
    # beside the draining gen, but the authorized room is held for vid.
    coder = model("coder", 4096, workload_scores={"coding": 1.0})
    snap = wsnapshot(
        [host("h1", 16384, max_models=2, residencies=[_gen("draining", active_requests=0)])],
        [GEN, VID, coder],
        _carried({"research": work(25, 0.5), "video": work(25, 2.0), "coding": work(25, 0.5)}),
    )
    plan, report = planned(snap)
    assert "h1" not in hosts_of(plan, "coder")
    assert [(p.victim_model_id, p.host_id) for p in plan.preemptions] == [("gen", "h1")]
    assert report.replacements["video"].host_id == "h1"
    assert row(report, "video").state == "awaiting-plan"


def test_once_the_victim_is_gone_the_beneficiary_takes_the_room() -> None:
    # The room two ticks later: gen unloaded, h1 empty. Image now presses harder than video
    # (3.0 against 0.8 units) and pic fits h1 as well as vid: without the authorization the
    # portfolio would give h1 to image. With it, vid is placed (one canary replica: no fresh
    # success yet, although 2.4 units would ask for two) and video is mapped to it.
    workloads = _carried(
        {"research": work(25, 0.5), "video": work(25, 2.4), "image": work(25, 3.0)}
    )
    plan, report = planned(_snap([], workloads))
    assert hosts_of(plan, "vid") == ["h1"]
    assert hosts_of(plan, "pic") == []
    assert report.mapping["video"] == "vid"
    assert plan.desired_replicas["vid"] == 1
    assert "video" in report.replacements  # still in effect until vid is READY


def test_without_the_authorization_the_room_goes_to_the_stronger_workload() -> None:
    # the same snapshot with no replacement carried: the check that the test above is not
    # passing by accident
    workloads = {"research": work(25, 0.5), "video": work(25, 2.4), "image": work(25, 3.0)}
    plan, _report = planned(_snap([], workloads))
    assert hosts_of(plan, "pic") == ["h1"]
    assert hosts_of(plan, "vid") == []


def test_the_authorization_ends_when_the_beneficiary_is_ready() -> None:
    workloads = _carried({"research": work(25, 0.5), "video": work(25, 2.0)})
    ready = resident("vid", 8192, loaded_at=NOW - 30, last_used_at=NOW - 5, active_requests=1)
    plan, report = planned(_snap([ready], workloads))
    assert report.replacements == {}
    assert report.mapping["video"] == "vid"
    assert hosts_of(plan, "vid") == ["h1"]


def test_an_authorization_lapses_with_its_evidence() -> None:
    # video below the evidence gate now: nothing is held or staged for it
    workloads = _carried({"research": work(25, 0.5), "video": work(1, 0.2)})
    plan, report = planned(_snap([_gen("draining", active_requests=0)], workloads))
    assert report.replacements == {}
    assert plan.preemptions == []


def test_the_controller_carries_it_and_the_prewarm_leaves_the_victim_alone() -> None:
    plan, _report = planned(_snap([_gen()]))
    raw = {
        "research": WorkloadForecast(offered_concurrency=0.5, observations=25),
        "video": WorkloadForecast(offered_concurrency=2.0, observations=25),
    }
    carried, mapping = mapped_inputs(raw, plan)
    assert carried["video"].replacement == ReplacementAuthorization(
        model_id="vid", host_id="h1", victims=["gen"]
    )
    assert carried["research"].replacement is None
    # a learned edge video -> research would pre-warm research's model, gen: not while a
    # replacement is removing gen
    edge = LearnedEdge(source="video", target="research", count=9, departures=10, confidence=0.9)
    profiles = {p.model_id: p for p in _snap([_gen()]).models}
    assert "gen" not in prewarm_demand([edge], carried, mapping, profiles, {})
    warmed = prewarm_demand([edge], raw, mapping, profiles, {})
    assert warmed["gen"] == DemandEntry(offered_concurrency=0.9 * 2.0, evidence=Evidence.INFERRED)
