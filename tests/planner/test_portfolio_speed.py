"""Missing replicas at measured speed (portfolio/speed.py, score.py, link.py), worked by hand.

A workload's offered concurrency is arrivals × the service time measured where its model
served, so a replica on a host g× as fast is worth g replicas (floor one; one replica for a
model that serves nowhere). Speeds: the hardware prior compute_gflops / 1000 (no bandwidth),
a measured tokens/s figure when the host has one, × the throttle fraction when THROTTLED.
The property test checks the top levels (covered, pressure, missing) against a brute force over
every map and replica layout that counts replica worth from the host speeds itself.
"""

from __future__ import annotations

import itertools
import math
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.fleet.models import FleetSnapshot
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


@pytest.mark.parametrize("engine", ["cpsat", "heuristic"])
def test_the_second_replica_goes_to_the_faster_host(engine: str) -> None:
    # a serves coding on s (100 gflops) and may hold 2 replicas; coding asks
    # ⌈2.0 · 1.2 / 0.75⌉ = 4. A second replica on z (400: worth 4) leaves 4 − 1 − 4 < 0 → 0
    # missing; on m (200: worth 2) 4 − 1 − 2 = 1. Both hosts are otherwise alike (the host id
    # alone would pick m).
    snap = wsnapshot(
        [
            host("s", 16384, compute_gflops=100.0, residencies=[resident("a", 4096, **READY)]),
            host("m", 16384, compute_gflops=200.0),
            host("z", 16384, compute_gflops=400.0),
        ],
        [model("a", 4096, max_replicas=2, workload_scores={"coding": 1.0})],
        {"coding": work(5, 2.0)},
    )
    plan, report = planned(snap, engine)
    assert hosts_of(plan, "a") == ["s", "z"]
    got = next(lv.value for lv in report.solver.objective if lv.level == "missing")
    assert got == 0


SPEEDS = [100.0, 200.0, 400.0]  # gflops: every ratio is a whole number of tenths (exact)


@st.composite
def speed_fleets(draw: st.DrawFn) -> FleetSnapshot:
    """Three roomy hosts of different speeds (memory and slots never bind), two models that
    each serve on at most one host (READY, idle, past minimum residency: the base plan keeps
    neither), two workloads with repeated arrivals and no queue."""
    names = ["a", "b"]
    ready_on = {m: draw(st.sampled_from([None, 0, 1, 2])) for m in names}
    hosts = [
        host(
            f"h{i}",
            65536,
            compute_gflops=draw(st.sampled_from(SPEEDS)),
            residencies=[resident(m, 4096, **READY) for m in names if ready_on[m] == i],
        )
        for i in range(3)
    ]
    models = [
        model(
            m,
            4096,
            max_replicas=draw(st.integers(1, 3)),
            workload_scores=draw(
                st.dictionaries(
                    st.sampled_from(["coding", "research"]),
                    st.sampled_from([0.6, 1.0]),
                    min_size=1,
                )
            ),
        )
        for m in names
    ]
    words = {
        w: work(5, draw(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0]))) for w in ("coding", "research")
    }
    policy = {"portfolio": {"exploration_bonus": 0.0}}
    return wsnapshot(hosts, models, words, policy=policy)


def _oracle_top_levels(snap: FleetSnapshot) -> tuple[int, int, int]:
    """Best (covered, pressure, −missing) over every workload → model map and every set of
    (model, host) replicas, missing counted at measured speed by hand: a replica on h is worth
    max(1, speed(h) / speed(where the model is READY)) replicas, one when it is READY nowhere;
    a model gets no replica beyond min(asked, max_replicas)."""
    speed = {h.host_id: h.compute_gflops for h in snap.hosts}
    home = {
        r.model_id: speed[h.host_id] for h in snap.hosts for r in h.residencies
    }  # one host per model

    def worth(m: str, h: str) -> float:
        return max(1.0, speed[h] / home[m]) if m in home else 1.0

    models = {m.model_id: m for m in snap.models}
    need = {
        (w, m): max(1, math.ceil(f.offered_concurrency * 1.2 / 0.75 - 1e-9))
        for w, f in snap.workloads.items()
        for m in models
    }
    options = {
        w: [None, *[m for m in sorted(models) if w in models[m].workload_scores]]
        for w in sorted(snap.workloads)
    }
    pairs = [(m, h) for m in sorted(models) for h in sorted(speed)]
    best = (0, 0, 0)
    for choice in itertools.product(*options.values()):
        mapping = {w: m for w, m in zip(options, choice, strict=True) if m is not None}
        asked: dict[str, int] = {}
        for w, m in mapping.items():
            asked[m] = asked.get(m, 0) + need[(w, m)]
        for mask in range(1 << len(pairs)):
            chosen = [pairs[i] for i in range(len(pairs)) if mask >> i & 1]
            count = {m: sum(1 for mm, _h in chosen if mm == m) for m in models}
            if any(count[m] > min(asked.get(m, 0), models[m].max_replicas) for m in models):
                continue
            if any(count[m] < 1 for m in mapping.values()):
                continue
            missing = sum(
                max(0, math.ceil(n - sum(worth(m, h) for mm, h in chosen if mm == m) - 1e-9))
                for m, n in asked.items()
            )
            value = (
                len(mapping),
                sum(round(100 * snap.workloads[w].offered_concurrency) for w in mapping),
                -missing,
            )
            best = max(best, value)
    return best


@settings(
    max_examples=int(os.environ.get("PORTFOLIO_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@pytest.mark.property
@given(speed_fleets())
def test_missing_at_measured_speed_matches_a_brute_force_optimum(snap: FleetSnapshot) -> None:
    base = plan_of(snap.model_copy(update={"workloads": {}}))
    assert base.assignments == []  # idle incumbents are the portfolio's, not the base plan's
    report = plan_of(snap).portfolio
    assert report is not None
    got = {lv.level: lv.value for lv in report.solver.objective}
    assert (got["covered"], got["pressure"], -got["missing"]) == _oracle_top_levels(snap)
