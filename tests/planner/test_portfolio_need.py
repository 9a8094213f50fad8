"""Replica needs from a serving model's own queue, and missing replicas beyond a model's ceiling
(gates.replicas_needed, score.evaluate / link.add_links), on hand-worked fleets."""

from __future__ import annotations

import pytest

from tests.planner.portfolio.builders import NOW, host, model, resident, work, wsnapshot
from tests.planner.portfolio.helpers import hosts_of, planned

pytestmark = pytest.mark.unit

FRESH = {"model_id": "vid", "workload": "video", "requests": 20, "successes": 20}
VID = model("vid", 4096, max_replicas=2, workload_scores={"video": 1.0})


def _video_fleet(*, ready: bool, outcomes: list[dict[str, object]]) -> object:
    residencies = [resident("vid", 4096, loaded_at=NOW - 3600)] if ready else []
    return wsnapshot(
        # two slots each: a second replica still leaves the spare-slot reserve free
        [host("h1", 16384, max_models=2, residencies=residencies), host("h2", 16384, max_models=2)],
        [VID],
        # offered 1.2 units, 0.9 of them queued: arrivals explain 0.3
        {"video": work(5, 1.2, queue_depth=0.9)},
        outcomes=outcomes,
    )


def test_the_serving_models_queue_asks_for_a_second_replica() -> None:
    # vid is READY on h1 and served video successfully: the queue is vid's own traffic.
    # need = ⌈offered 1.2 × (1 + 0.2 headroom) / (concurrency 1 × utilisation 0.75)⌉ = ⌈1.92⌉ = 2
    plan, _report = planned(_video_fleet(ready=True, outcomes=[FRESH]))
    assert hosts_of(plan, "vid") == ["h1", "h2"]


@pytest.mark.parametrize(
    ("ready", "outcomes"),
    [(True, []), (False, [FRESH])],
    ids=["no-fresh-success", "not-ready"],
)
def test_a_queue_the_model_has_not_served_stays_out(
    ready: bool, outcomes: list[dict[str, object]]
) -> None:
    # need = max(1, ⌈arrival 0.3 × 1.2 / 0.75⌉) = ⌈0.48⌉ = 1: one replica only
    plan, _report = planned(_video_fleet(ready=ready, outcomes=outcomes))
    assert len(hosts_of(plan, "vid")) == 1


def test_a_model_at_its_ceiling_does_not_absorb_another_workload_for_free() -> None:
    # gen (0.9 on both words) may hold one replica; research and sales ask one replica each
    # (0.5 units: ⌈0.5 × 1.2 / 0.75⌉ = 1). Both on gen leave one asked replica missing; sales on
    # writer (0.8) leaves none, and missing ranks above utility.
    snap = wsnapshot(
        [host("h1", 65536)],
        [
            model("gen", 4096, max_replicas=1, workload_scores={"research": 0.9, "sales": 0.9}),
            model("writer", 4096, workload_scores={"sales": 0.8}),
        ],
        {"research": work(5, 0.5), "sales": work(5, 0.5)},
    )
    plan, report = planned(snap)
    assert report.mapping == {"research": "gen", "sales": "writer"}
    assert hosts_of(plan, "writer") == ["h1"]
    missing = next(lv.value for lv in report.solver.objective if lv.level == "missing")
    assert missing == 0
