"""Feasibility uses the placement's hard rules: one blocked and one feasible candidate per family,
and the admission state of every kind of row."""

from __future__ import annotations

from typing import Any

import pytest

from tests.planner.portfolio.builders import host, model, resident, work, wsnapshot
from tests.planner.portfolio.helpers import candidate, hosts_of, planned, row

pytestmark = pytest.mark.unit

Y = model("Y", 2048, workload_scores={"coding": 0.5})  # fits everywhere below


def _x(**fields: Any) -> dict[str, Any]:
    return model("X", fields.pop("memory_mb", 2048), workload_scores={"coding": 1.0}, **fields)


FAMILIES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], str]] = {
    "runtime": ([host("h1")], [_x(runtimes=["vllm"])], "no_eligible_host: runtime_mismatch"),
    "data_tier": ([host("h1")], [_x(data_tier="secret")], "no_eligible_host: data_tier"),
    "tags": ([host("h1")], [_x(required_tags=["gpu"])], "no_eligible_host: missing_tag"),
    "memory": ([host("h1", 16384)], [_x(memory_mb=20000)], "no_headroom: live_memory"),
    "slots": (
        [host("h1", max_models=1, residencies=[resident("base", 1024)]), host("h2")],
        [model("base", 1024, min_replicas=1), _x(allowed_hosts=["h1"])],
        "no_headroom: slots",
    ),
    "colocation_ceiling": (
        [host("h1", residencies=[resident("base", 1024)])],
        [model("base", 1024, min_replicas=1), _x(max_colocated_models=1)],
        "no_headroom: colocation",
    ),
    "disk": (
        [host("h1", disk_free_mb=3000)],
        [
            _x(artifact_size_mb=5000),
            model("Y", 2048, artifact_size_mb=1000, workload_scores={"coding": 0.5}),
        ],
        "no_headroom: disk",
    ),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_blocked_candidate_is_rejected_and_the_feasible_one_chosen(family: str) -> None:
    hosts, models, reason = FAMILIES[family]
    if not any(m["model_id"] == "Y" for m in models):
        models = [*models, Y]
    plan, report = planned(wsnapshot(hosts, models, {"coding": work(5, 0.5)}))
    assert report.mapping == {"coding": "Y"}
    x = candidate(report, "coding", "X")
    assert x.feasible is False and x.eligible_hosts == 0 and x.best_host is None
    assert x.rejection is not None and x.rejection.startswith(reason), x.rejection
    assert candidate(report, "coding", "Y").feasible
    assert hosts_of(plan, "X") == []


def test_colocation_exclusion_with_a_live_model_blocks_by_residency() -> None:
    snap = wsnapshot(
        [host("h1", residencies=[resident("base", 1024)])],
        [model("base", 1024, min_replicas=1), _x(colocation_excludes=["base"])],
        {"coding": work(5, 0.5)},
    )
    _plan, report = planned(snap)
    r = row(report, "coding")
    assert r.state == "blocked-by-residency"
    assert r.reason.startswith("no_eligible_host: colocation_excluded")


def test_admission_rows_for_ready_starting_and_planned_models() -> None:
    snap = wsnapshot(
        [
            host("h1", residencies=[resident("r", 1024)]),
            host("h2", residencies=[resident("s", 1024, state="warming")]),
            host("h3"),
        ],
        [
            model("r", 1024, workload_scores={"coding": 1.0}),
            model("s", 1024, workload_scores={"research": 1.0}),
            model("p", 1024, workload_scores={"general": 1.0}),
        ],
        {"coding": work(5, 0.3), "research": work(5, 0.3), "general": work(5, 0.3)},
    )
    plan, report = planned(snap)
    assert report.mapping == {"coding": "r", "general": "p", "research": "s"}
    assert (row(report, "coding").state, row(report, "coding").ready) == ("ready", 1)
    assert row(report, "research").state == "starting"
    planned_row = row(report, "general")
    assert planned_row.state == "planned" and planned_row.reason.startswith("placed: p on ")
    assert planned_row.startup_s == 80.0  # default load 60 s + warm 20 s
    existing = {a.model_id: a.existing for a in plan.assignments}
    assert existing == {"r": True, "s": True, "p": False}


def test_a_workload_no_profile_scores_is_infeasible() -> None:
    _plan, report = planned(wsnapshot([host("h1")], [Y], {"coding": work(5), "sales": work(5)}))
    r = row(report, "sales")
    assert (r.state, r.model_id) == ("infeasible", None)
    assert r.reason == "no_candidate_model: no model profile scores sales"


def test_a_candidate_no_live_host_can_run_is_excluded_not_blocking_a_fallback() -> None:
    snap = wsnapshot(
        [host("h1"), host("h2", state="paused")],
        [_x(allowed_hosts=["h2"]), Y],
        {"coding": work(5, 0.5)},
    )
    _plan, report = planned(snap)
    assert report.mapping == {"coding": "Y"}
    assert candidate(report, "coding", "X").rejection == (
        "no_eligible_host: host_not_admitting on 1 host(s), host_not_allowed on 1 host(s)"
    )
