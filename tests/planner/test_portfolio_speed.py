"""Missing replicas at measured speed (portfolio/speed.py, score.py, link.py), worked by hand.

A workload's offered concurrency is arrivals × the service time measured where its model
served, so a replica on a host g× as fast is worth g replicas (floor one; one replica for a
model that serves nowhere). Speeds: the hardware prior compute_gflops / 1000 (no bandwidth),
a measured tokens/s figure when the host has one, × the throttle fraction when THROTTLED.
"""

from __future__ import annotations

import pytest

from grid.planner.portfolio.context import build_context
from grid.planner.targets import compute_targets
from tests.planner.portfolio.builders import NOW, host, model, plan_of, resident, work, wsnapshot
from tests.planner.portfolio.helpers import hosts_of, planned

pytestmark = pytest.mark.unit

READY = {"loaded_at": NOW - 3600}


def _fresh(model_id: str, workload: str) -> dict[str, object]:
    return {"model_id": model_id, "workload": workload, "requests": 20, "successes": 20}


def test_replica_weights_by_hand() -> None:
    # a serves on slow (0.1) and fast (0.3): measured speed 0.2 → fast 10·0.3/0.2 = 15,
    # slow 10·0.1/0.2 = 5 → floor 10, hot (0.3 × throttle 0.5 = 0.15) → 7.5 → floor 10,
    # meas (tokens/s 0.8 for a, prior ignored) → 40. b serves only on slow: ref 0.1 →
    # fast 30, hot 15 (round(10·0.15/0.1)), meas 10·0.3/0.1 = 30 (its measured figure is
    # for a only). c serves nowhere: one replica everywhere.
    snap = wsnapshot(
        [
            host(
                "slow",
                65536,
                compute_gflops=100.0,
                residencies=[resident("a", 4096, **READY), resident("b", 4096, **READY)],
            ),
            host("fast", 65536, compute_gflops=300.0, residencies=[resident("a", 4096, **READY)]),
            host("hot", 65536, compute_gflops=300.0, state="throttled", throttle_fraction=0.5),
            host("meas", 65536, compute_gflops=300.0, measured_tokens_per_s={"a": 0.8}),
        ],
        [
            model("a", 4096, max_replicas=4, workload_scores={"coding": 1.0}),
            model("b", 4096, max_replicas=4, workload_scores={"coding": 0.9}),
            model("c", 4096, max_replicas=4, workload_scores={"coding": 0.8}),
        ],
        {"coding": work(5, 0.5)},
    )
    ctx = build_context(snap, plan_of(snap), compute_targets(snap))
    got = {k: ctx.weight(k) for k in ctx.problem.candidates}
    assert got == {
        ("a", "slow"): 10, ("a", "fast"): 15, ("a", "hot"): 10, ("a", "meas"): 40,
        ("b", "slow"): 10, ("b", "fast"): 30, ("b", "hot"): 15, ("b", "meas"): 30,
        ("c", "slow"): 10, ("c", "fast"): 10, ("c", "hot"): 10, ("c", "meas"): 10,
    }  # fmt: skip


def _swap_fleet(*, speeds: bool) -> object:
    # img serves image on s1 (speed 0.1), txt serves design on s2 (0.3); both hosts hold one
    # model. f (0.3, no slot limit, room for one 4 GB model) is the only open host; txt is
    # cached there (shorter start: the transition level prefers it). image asks
    # ⌈1.5 · 1.2 / 0.75⌉ = 3 replicas of img, design ⌈1.0 · 1.2 / 0.75⌉ = 2 of txt.
    #   img on f: img has 1 + 3 (f is 3× s1) ≥ 3, txt 1 of 2: missing 0 + 1 = 1
    #   txt on f: txt 1 + 1 ≥ 2, img 1 of 3:                   missing 0 + 2 = 2
    # Without speed figures both leave 2 missing and the cheaper start (txt) wins.
    def g(value: float) -> dict[str, float]:
        return {"compute_gflops": value} if speeds else {}

    return wsnapshot(
        [
            host("s1", 16384, max_models=1, residencies=[resident("img", 4096, **READY)], **g(100)),
            host("s2", 16384, max_models=1, residencies=[resident("txt", 4096, **READY)], **g(300)),
            host("f", 6144, cached_models=["txt"], **g(300)),
        ],
        [
            model("img", 4096, max_replicas=3, artifact_size_mb=4096, runtime_memory_mb={},
                  workload_scores={"image": 1.0}),
            model("txt", 4096, max_replicas=2, artifact_size_mb=4096,
                  workload_scores={"design": 1.0}),
        ],
        {"image": work(5, 1.5), "design": work(5, 1.0)},
        outcomes=[_fresh("img", "image"), _fresh("txt", "design")],
    )  # fmt: skip


@pytest.mark.parametrize(("speeds", "on_f", "missing"), [(True, "img", 1), (False, "txt", 2)])
def test_the_fast_host_goes_to_the_model_it_speeds_up_most(
    speeds: bool, on_f: str, missing: int
) -> None:
    plan, report = planned(_swap_fleet(speeds=speeds))
    assert report.mapping == {"design": "txt", "image": "img"}
    assert "f" in hosts_of(plan, on_f)
    assert [a.model_id for a in plan.assignments if a.host_id == "f"] == [on_f]
    got = next(lv.value for lv in report.solver.objective if lv.level == "missing")
    assert got == missing
