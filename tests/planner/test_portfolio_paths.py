"""The feasibility scan's ranked preemption paths (paths.py), on hand-worked fleets.

Several one-slot hosts each hold one idle stale residency (no workload, no demand, past its
minimum residency); `coder` (coding) fits any of them once its occupant is gone. The first host
in the fleet is not the whole fleet: the path the plan stages is the best ranked one (lowest
victim priority, then the victim's warm-back time), and the candidate row lists the paths the
scan kept, at most sixteen.
"""

from __future__ import annotations

from typing import Any

import pytest

from grid.fleet.models import LearnedStartup
from tests.planner.portfolio.builders import NOW, host, model, resident, work, wsnapshot
from tests.planner.portfolio.helpers import candidate, planned

pytestmark = pytest.mark.unit

CODER = model("coder", 4096, workload_scores={"coding": 1.0})
IDLE = {"loaded_at": NOW - 3600, "last_used_at": NOW - 3600, "active_requests": 0}


def _host(host_id: str, occupant: str) -> dict[str, Any]:
    return host(host_id, 16384, max_models=1, residencies=[resident(occupant, 4096, **IDLE)])


def _staged(plan: Any) -> list[tuple[str, str]]:
    return [(p.victim_model_id, p.host_id) for p in plan.preemptions]


def test_the_lowest_priority_victim_is_staged_not_the_first_host() -> None:
    snap = wsnapshot(
        [_host("h1", "important"), _host("h2", "spare")],
        [model("important", 4096, priority=5), model("spare", 4096, priority=0), CODER],
        {"coding": work(5, 0.5)},
    )
    plan, report = planned(snap)
    assert _staged(plan) == [("spare", "h2")]
    assert candidate(report, "coding", "coder").preemption_paths == [
        "h2: spare",
        "h1: important",
    ]


def test_equal_priority_victims_rank_by_warm_back_time() -> None:
    snap = wsnapshot(
        [_host("h1", "slow"), _host("h2", "quick")],
        [
            model("slow", 4096, warm_estimate_s=300.0),
            model("quick", 4096, warm_estimate_s=5.0),
            CODER,
        ],
        {"coding": work(5, 0.5)},
    )
    plan, _report = planned(snap)
    assert _staged(plan) == [("quick", "h2")]


def test_learned_warm_back_times_rank_before_configured_ones() -> None:
    # configured: a is quicker to restore; learned on h1: a takes 400 s there
    snap = wsnapshot(
        [_host("h1", "a"), _host("h2", "b")],
        [model("a", 4096, warm_estimate_s=5.0), model("b", 4096, warm_estimate_s=60.0), CODER],
        {"coding": work(5, 0.5)},
    )
    learned = snap.model_copy(
        update={"learned_startup": {"a": {"h1": LearnedStartup(warm_s=400.0, load_s=None)}}}
    )
    plan, _report = planned(learned)
    assert _staged(plan) == [("b", "h2")]


def test_the_scan_keeps_at_most_sixteen_paths() -> None:
    hosts = [_host(f"h{i:02d}", f"m{i:02d}") for i in range(20)]
    models = [model(f"m{i:02d}", 4096) for i in range(20)]
    snap = wsnapshot(hosts, [*models, CODER], {"coding": work(5, 0.5)})
    plan, report = planned(snap)
    paths = candidate(report, "coding", "coder").preemption_paths
    assert len(paths) == 16
    assert len(_staged(plan)) == 1
    assert f"{_staged(plan)[0][1]}: {_staged(plan)[0][0]}" == paths[0]
