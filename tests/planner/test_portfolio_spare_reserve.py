"""The spare-slot reserve counts only the free slots a short workload can use (by hand).

Spec: "The objective preserves spare slots when two portfolios serve the same demand". A
video workload short of replicas whose model can only run where no slot is free does not make
the free slot elsewhere demanded: that slot stays spare instead of going to an upgrade of a
text workload the fleet already serves (measured in the scenario lab, 2 machines, seed 42:
the upgrade was drained again later, which is churn).
"""

from __future__ import annotations

from grid.fleet.models import FleetSnapshot
from tests.planner.portfolio.builders import host, model, plan_of, resident, work, wsnapshot

COMMON = {"replica_concurrency": 1, "target_utilization": 0.5, "warm_estimate_s": 4.0}


def _fleet(*, mac_mb: int) -> FleetSnapshot:
    """gpu: 40 GB, 2 slots, holding vid (16 GB) and small (2 GB), both configured minimums;
    mac: `mac_mb`, 2 slots, holding small. vid fits only on gpu (16 GB > 8 GB on the mac).

    need(video, vid) = ⌈1.2·1.2 / (1·0.5)⌉ = ⌈2.88⌉ = 3, and vid's one replica is the
    configured minimum (no idle surplus), so video asks 3 more; vid has no host with a free
    slot (gpu is full; an 8 GB mac is too small). general is served by small now (two base
    replicas, the configured minimum too) and asks ⌈0.2·1.2/0.5⌉ = 1; big (6 GB, 0.9 against
    small's 0.5) fits the mac's one free slot."""
    hosts = [
        host(
            "gpu",
            40960,
            max_models=2,
            residencies=[resident("vid", 16384), resident("small", 2048)],
            cached_models=["vid", "small"],
        ),
        host(
            "mac",
            mac_mb,
            max_models=2,
            residencies=[resident("small", 2048)],
            cached_models=["small"],
        ),
    ]
    models = [
        model(
            "vid", 16384, min_replicas=1, max_replicas=4, **COMMON, workload_scores={"video": 0.9}
        ),
        model(
            "small",
            2048,
            min_replicas=2,
            max_replicas=4,
            **COMMON,
            workload_scores={"general": 0.5},
        ),
        model("big", 6144, max_replicas=4, **COMMON, workload_scores={"general": 0.9}),
    ]
    workloads = {"video": work(10, 1.2), "general": work(10, 0.2)}
    return wsnapshot(hosts, models, workloads)


def test_a_free_slot_the_short_workload_cannot_use_stays_spare() -> None:
    """Free slots: 1 (the mac). Demand that slot can take: video's 3 replicas none (vid does
    not fit the mac), general's 1: 0 + 1 = 1 ≤ 1 free, not saturated, so the reserve stays 2:
    spare_slots = min(2, 1) = 1 with the slot empty, 0 with big in it. Coverage (2) and
    pressure (120 + 20) are equal both ways, so the slot stays empty (missing 3 + 1 = 4
    rather than big's 3 + 0 = 3, one level lower): general stays on small, big not loaded."""
    snap = _fleet(mac_mb=8192)
    plan = plan_of(snap)
    report = plan.portfolio
    assert report is not None
    assert report.mapping == {"general": "small", "video": "vid"}
    assert not any(a.model_id == "big" for a in plan.assignments)
    levels = {lv.level: lv.value for lv in report.solver.objective}
    assert (levels["covered"], levels["pressure"]) == (2, 140)
    assert (levels["spare_slots"], levels["missing"]) == (1, 4)


def test_a_free_slot_the_short_workload_can_use_is_not_spare() -> None:
    """The same fleet with a 24 GB mac: vid (16 GB) now fits the mac's free slot too, so the
    demand the slot can take is min(3, 1) + 1 = 2 > 1 free: saturated, the reserve is 0 and
    the slot serves demand (spare_slots 0). Missing: a second vid there 2 + 1 = 3, big there
    (general → big) 3 + 0 = 3, the slot empty 4; utility decides between the two 3s: general
    at 0.9 on big against 0.5 on small outweighs big's cold-start penalty, so big loads."""
    snap = _fleet(mac_mb=24576)
    plan = plan_of(snap)
    report = plan.portfolio
    assert report is not None
    assert report.mapping == {"general": "big", "video": "vid"}
    assert ("big", "mac") in {(a.model_id, a.host_id) for a in plan.assignments}
    levels = {lv.level: lv.value for lv in report.solver.objective}
    assert (levels["spare_slots"], levels["missing"]) == (0, 3)
