"""At most one preemption-only model per tick, and only over stale speculative capacity."""

from __future__ import annotations

from typing import Any

import pytest

from tests.planner.portfolio.builders import NOW, host, model, resident, work, wsnapshot
from tests.planner.portfolio.helpers import hosts_of, planned, row

pytestmark = pytest.mark.unit

CODER = model("coder", 4096, workload_scores={"coding": 1.0})


def _old(**fields: Any) -> dict[str, Any]:
    doc = {"loaded_at": NOW - 3600, "active_requests": 0}
    doc.update(fields)
    return resident("old", 4096, **doc)


def _fleet(
    old: dict[str, Any],
    old_profile: dict[str, Any] | None = None,
    demand: dict[str, Any] | None = None,
) -> Any:
    return wsnapshot(
        [host("h1", 16384, max_models=1, residencies=[old])],
        [old_profile or model("old", 4096), CODER],
        {"coding": work(5, 0.5)},
        demand=demand,
    )


def test_an_idle_stale_model_is_replaced_for_an_uncovered_workload() -> None:
    plan, report = planned(_fleet(_old()))
    assert [(p.victim_model_id, p.host_id, p.beneficiary_model_id) for p in plan.preemptions] == [
        ("old", "h1", "coder")
    ]
    r = row(report, "coding")
    assert r.state == "awaiting-plan"
    assert r.reason == "preemption_staged: coder loads on h1 once old drain"
    assert hosts_of(plan, "coder") == []  # placed once a later snapshot shows the memory free


@pytest.mark.parametrize(
    ("old", "profile", "demand"),
    [
        (_old(active_requests=1), None, None),  # busy
        (_old(loaded_at=NOW - 10), None, None),  # younger than its minimum residency
        (_old(), model("old", 4096, min_replicas=1), None),  # baseline
        (_old(), model("old", 4096, pinned_hosts=["h1"]), None),  # pinned
        (_old(), None, {"old": {"offered_concurrency": 0.3, "rpm": 4}}),  # direct demand
    ],
    ids=["busy", "young", "baseline", "pinned", "direct"],
)
def test_protected_residencies_are_never_victims(
    old: dict[str, Any], profile: dict[str, Any] | None, demand: dict[str, Any] | None
) -> None:
    plan, report = planned(_fleet(old, profile, demand))
    assert plan.preemptions == []
    assert row(report, "coding").state == "capacity-contended"


def test_only_one_preemption_only_model_per_tick() -> None:
    snap = wsnapshot(
        [
            host("h1", 16384, max_models=1, residencies=[_old()]),
            host(
                "h2",
                16384,
                max_models=1,
                residencies=[resident("old2", 4096, loaded_at=NOW - 3600)],
            ),
        ],
        [
            model("old", 4096),
            model("old2", 4096),
            CODER,
            model("writer", 4096, workload_scores={"research": 1.0}),
        ],
        {"coding": work(5, 0.5), "research": work(5, 1.0)},
    )
    plan, report = planned(snap)
    # research has more pressure (1.0 > 0.5 units): it takes the one preemption of the tick.
    assert [p.beneficiary_model_id for p in plan.preemptions] == ["writer"]
    assert row(report, "research").state == "awaiting-plan"
    assert row(report, "coding").state == "capacity-contended"
