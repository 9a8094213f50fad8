"""The heuristic engine: always valid, deterministic, and faithful to the spec's greedy loop.

Every placement is checked by the solver-agnostic validator through `plan_of`, which builds the
plan document the way `assemble_plan` does but declares each shortfall itself (a stand-in for
explain.py, so these tests do not depend on the explainer). Hosts default to 16,384 MB with a
5 % headroom (820 MB): the make-before-break budget of an empty host is 15,564 MB.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from grid.fleet.models import FleetSnapshot, Plan, Preemption, SolverReport, Unsatisfied
from grid.fleet.snapshot import parse_snapshot
from grid.planner.assemble import assignments_of
from grid.planner.heuristic import heuristic_placement
from grid.planner.levels import score_placement
from grid.planner.plan import make_plan
from grid.planner.preemption import stage_preemptions
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem
from grid.planner.validate import violations
from tests.planner.fleets import NOW, host, model, resident, snapshot, want
from tests.planner.strategies import fleets

pytestmark = pytest.mark.unit

Key = tuple[str, str]
Doc = dict[str, Any]


# ----------------------------------------------------------------------------- helpers


def plan_of(problem: PlacementProblem, placed: set[Key], preemptions: list[Preemption]) -> Plan:
    """The plan document for a placement, every missing replica and unmet pin declared."""
    assignments = assignments_of(problem, placed)
    unsatisfied = []
    for m in problem.models:
        on = {a.host_id for a in assignments if a.model_id == m.model_id}
        missing = problem.targets[m.model_id].desired - len(on)
        if missing > 0:
            unsatisfied.append(
                Unsatisfied(model_id=m.model_id, code="short", missing_replicas=missing, message="")
            )
        for pin in sorted(set(m.pinned_hosts) - on):
            unsatisfied.append(
                Unsatisfied(
                    model_id=m.model_id,
                    code="pinned_unmet",
                    missing_replicas=0,
                    message="",
                    host_id=pin,
                )
            )
    return Plan(
        assignments=assignments,
        unsatisfied=unsatisfied,
        preemptions=preemptions,
        solver=SolverReport(engine="heuristic", status="TEST", wall_ms=0.0),
    )


def place(snap: FleetSnapshot) -> tuple[PlacementProblem, set[Key]]:
    problem = build_problem(snap)
    placed = heuristic_placement(problem)
    found = violations(snap, plan_of(problem, placed, []))
    assert found == [], found
    return problem, placed


def hosts_of(placed: set[Key], model_id: str) -> set[str]:
    return {h for m, h in placed if m == model_id}


# ----------------------------------------------------------------------------- random fleets


def random_fleet(seed: int, n_hosts: int = 8, n_models: int = 10) -> Doc:
    """A seeded messy fleet document: live residencies of every state and owner, throttled,
    paused and stale hosts, pins (some to missing hosts), ceilings, exclusions, disk."""
    rng = random.Random(seed)
    model_ids = [f"m{i:03d}" for i in range(n_models)]
    host_ids = [f"h{i:04d}" for i in range(n_hosts)]
    mem = {m: rng.randrange(1024, 8193, 512) for m in model_ids}
    models = []
    for m in model_ids:
        low = rng.choice([0, 0, 1, 2])
        doc: Doc = {
            "model_id": m,
            "memory_mb": mem[m],
            "runtimes": rng.choice([["llama.cpp"], ["llama.cpp"], ["llama.cpp", "vllm"]]),
            "priority": rng.choice([0, 10, 10, 50, 100]),
            "min_replicas": low,
            "max_replicas": rng.randint(max(1, low), 4),
            "max_colocated_models": rng.choice([0, 0, 0, 1, 2, 3]),
            "min_failure_domains": rng.choice([1, 1, 2]),
            "artifact_size_mb": rng.choice([0, 1500, 4000]),
            "min_residency_s": rng.choice([0.0, 300.0]),
            "warm_estimate_s": float(rng.choice([5, 20])),
            "load_estimate_s": float(rng.choice([30, 90])),
        }
        if "vllm" in doc["runtimes"] and rng.random() < 0.5:
            doc["runtime_memory_mb"] = {"vllm": mem[m] + rng.choice([-512, 1024])}
        if rng.random() < 0.15:
            doc["pinned_hosts"] = [rng.choice([*host_ids, "offline-host"])]
        if rng.random() < 0.15:
            doc["colocation_excludes"] = [rng.choice(model_ids)]
        if rng.random() < 0.1:
            doc["forbidden_tags"] = ["laptop"]
        models.append(doc)
    hosts = []
    for h in host_ids:
        state = rng.choice(["accepting"] * 6 + ["throttled", "throttled", "paused", "draining"])
        residencies = []
        for m in rng.sample(model_ids, rng.choice([0, 0, 1, 2, 3])):
            res_state = rng.choice(
                ["ready", "ready", "ready", "loading", "warming", "draining", "failed", "cached"]
            )
            owner = rng.choice(["managed"] * 5 + ["external", "manual"])
            res: Doc = {
                "model_id": m,
                "memory_mb": 0 if res_state == "cached" else mem[m] + rng.choice([0, 0, 512]),
                "state": res_state,
                "managed": owner == "managed",
                "loaded_at": rng.choice([None, NOW - 50, NOW - 5000, NOW + 100]),
                "last_used_at": NOW - rng.choice([10, 5000]),
                "active_requests": rng.choice([0, 0, 1, None]),
            }
            if owner == "manual":
                res["ownership"] = "manual"
            residencies.append(res)
        if rng.random() < 0.1:
            residencies.append(
                {"model_id": "unprofiled", "memory_mb": 2048, "managed": rng.random() < 0.5}
            )
        hosts.append(
            {
                "host_id": h,
                "state": state,
                "throttle_fraction": rng.choice([0.5, 0.8]) if state == "throttled" else 1.0,
                "capacity_mb": rng.choice([8192, 12288, 16384, 24576]),
                "reserved_mb": rng.choice([0, 1024]),
                "external_mb": rng.choice([0, 0, 2048]),
                "runtimes": rng.choice([["llama.cpp"], ["llama.cpp", "vllm"]]),
                "failure_domain": rng.choice([None, "rack-a", "rack-b", "rack-c"]),
                "tags": rng.choice([[], ["server"], ["laptop"]]),
                "max_models": rng.choice([0, 0, 1, 2, 3]),
                "disk_free_mb": rng.choice([None, None, 3000, 20000]),
                "cached_models": sorted(rng.sample(model_ids, rng.choice([0, 1, 2]))),
                "memory_bandwidth_gbps": float(rng.choice([100, 800])),
                "last_heartbeat": NOW - rng.choice([0, 0, 0, 5, 500]),
                "residencies": residencies,
            }
        )
    demand: Doc = {}
    for m in model_ids:
        roll = rng.random()
        evidence = "inferred" if rng.random() < 0.25 else "direct"
        if roll < 0.45:
            demand[m] = {"desired_replicas": rng.randint(0, 4), "evidence": evidence}
        elif roll < 0.8:
            demand[m] = {
                "offered_concurrency": rng.choice([0.3, 1.0, 2.5]),
                "queue_depth": rng.choice([0.0, 0.0, 2.0]),
                "p95_ms": rng.choice([0.0, 3000.0]),
                "rpm": rng.choice([0.0, 20.0]),
                "evidence": evidence,
            }
    return {
        "schema_version": 1,
        "now": NOW,
        "policy": {
            "memory_headroom_fraction": rng.choice([0.0, 0.05, 0.1]),
            "max_evictions_per_plan": rng.choice([1, 3, 64]),
        },
        "hosts": hosts,
        "models": models,
        "demand": demand,
    }


def _shuffled(doc: Doc, seed: int) -> Doc:
    rng = random.Random(seed)
    out = dict(doc)
    out["hosts"] = [dict(h) for h in doc["hosts"]]
    for h in out["hosts"]:
        h["residencies"] = rng.sample(h["residencies"], len(h["residencies"]))
        h["cached_models"] = rng.sample(h["cached_models"], len(h["cached_models"]))
    rng.shuffle(out["hosts"])
    out["models"] = rng.sample(doc["models"], len(doc["models"]))
    items = list(doc["demand"].items())
    rng.shuffle(items)
    out["demand"] = dict(items)
    return out


@pytest.mark.parametrize("seed", range(120))
def test_random_fleets_give_valid_plans_before_and_after_preemption(seed: int) -> None:
    snap = parse_snapshot(random_fleet(seed))
    problem, placed = place(snap)
    preemptions, removed = stage_preemptions(problem, placed)
    assert removed <= placed
    found = violations(snap, plan_of(problem, placed - removed, preemptions))
    assert found == [], found


@pytest.mark.property
@settings(
    derandomize=True, max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(fleets(max_hosts=5, max_models=6))
def test_messy_fleets_give_valid_plans(snap: FleetSnapshot) -> None:
    problem, placed = place(snap)
    preemptions, removed = stage_preemptions(problem, placed)
    assert violations(snap, plan_of(problem, placed - removed, preemptions)) == []


@pytest.mark.parametrize("seed", range(25))
def test_same_input_gives_the_same_placement_in_any_listing_order(seed: int) -> None:
    doc = random_fleet(seed, n_hosts=12, n_models=14)
    first = heuristic_placement(build_problem(parse_snapshot(doc)))
    again = heuristic_placement(build_problem(parse_snapshot(doc)))
    reordered_problem = build_problem(parse_snapshot(_shuffled(doc, seed)))
    reordered = heuristic_placement(reordered_problem)
    assert first == again
    assert first == reordered
    problem = build_problem(parse_snapshot(doc))
    assert stage_preemptions(problem, first) == stage_preemptions(reordered_problem, reordered)


@pytest.mark.slow
def test_thousand_host_fleet_is_valid() -> None:
    # Scale check only (timings are bench/'s job): the memoized ledgers keep this fast.
    snap = parse_snapshot(random_fleet(7, n_hosts=1000, n_models=200))
    _problem, placed = place(snap)
    assert len(placed) > 200


# ----------------------------------------------------------------------------- spec examples


def test_existing_before_cached_before_cold() -> None:
    hosts = [
        host("cold"),
        host("cached", cached_models=["a"]),
        host("ready", residencies=[resident("a", 4096, loaded_at=NOW - 9000)]),
    ]
    _, placed = place(snapshot(hosts, [model("a")], {"a": want(1)}))
    assert placed == {("a", "ready")}
    _, placed = place(snapshot(hosts[:2], [model("a")], {"a": want(1)}))
    assert placed == {("a", "cached")}
    _, placed = place(snapshot(hosts[:1], [model("a")], {"a": want(1)}))
    assert placed == {("a", "cold")}


def test_lowered_slot_limit_keeps_the_higher_priority_model() -> None:
    live = [resident("low", 4096, loaded_at=NOW - 9000), resident("high", 4096)]
    snap = snapshot(
        [host("h1", max_models=1, residencies=live)],
        [model("low", priority=0), model("high", priority=100)],
        {"low": want(1), "high": want(1)},
    )
    _, placed = place(snap)
    assert placed == {("high", "h1")}


def test_lowered_colocation_ceiling_keeps_the_higher_priority_incumbent() -> None:
    # "solo" became exclusive while sharing its host: keeping both breaks its ceiling
    live = [resident("solo", 4096, loaded_at=NOW - 9000), resident("peer", 4096)]
    models = [model("solo", priority=0, max_colocated_models=1), model("peer", priority=50)]
    snap = snapshot([host("h1", residencies=live)], models, {"solo": want(1), "peer": want(1)})
    _, placed = place(snap)
    assert placed == {("peer", "h1")}
    models[0]["priority"] = 100
    _, placed = place(
        snapshot([host("h1", residencies=live)], models, {"solo": want(1), "peer": want(1)})
    )
    assert placed == {("solo", "h1")}


def test_external_residency_consumes_capacity() -> None:
    models = [model("a", 9000)]
    _, placed = place(snapshot([host("h1")], models, {"a": want(1)}))
    assert placed == {("a", "h1")}, "9,000 MB fits an empty 16 GB host"
    ext = resident("other-engine", 8000, managed=False)
    _, placed = place(snapshot([host("h1", residencies=[ext])], models, {"a": want(1)}))
    assert placed == set(), "8,000 MB of unmanaged work leaves 7,564 MB of new budget"


def test_low_priority_pin_wins_its_host_over_high_priority_optional_model() -> None:
    snap = snapshot(
        [host("h1", 10_000)],
        [
            model("pinned-low", 6000, priority=0, pinned_hosts=["h1"]),
            model("vip", 6000, priority=100),
        ],
        {"vip": want(1)},
    )
    _, placed = place(snap)
    assert placed == {("pinned-low", "h1")}


def test_pin_to_a_missing_host_is_not_substituted() -> None:
    snap = snapshot(
        [host("h1"), host("h2")],
        [model("a", pinned_hosts=["gone"], min_replicas=1, max_replicas=2)],
        {"a": want(2)},
    )
    _, placed = place(snap)
    assert len(placed) == 1, "one replica beyond the pin may go anywhere; the pinned one may not"


def test_max_min_fair_rounds_and_the_extra_replica_goes_to_the_more_harmed_model() -> None:
    # three hosts that each take one 10 GB replica; two equal models each want three
    hosts = [host(f"h{i}") for i in range(3)]
    models = [model("a", 10_000, max_replicas=3), model("b", 10_000, max_replicas=3)]
    calm = snapshot(hosts, models, {"a": want(3), "b": want(3, queue_depth=4.0)})
    _, placed = place(calm)
    assert (len(hosts_of(placed, "a")), len(hosts_of(placed, "b"))) == (1, 2)
    swapped = snapshot(hosts, models, {"a": want(3, queue_depth=4.0), "b": want(3)})
    _, placed = place(swapped)
    assert (len(hosts_of(placed, "a")), len(hosts_of(placed, "b"))) == (2, 1)


def test_higher_priority_class_fills_first_and_baseline_before_direct_before_inferred() -> None:
    snap = snapshot(
        [host("h1", 10_000), host("h2", 10_000)],
        [
            model("low-direct", 6000, priority=0),
            model("mid-inferred", 6000, priority=50),
            model("mid-base", 6000, priority=50, min_replicas=1),
            model("mid-direct", 6000, priority=50),
            model("top", 6000, priority=100),
        ],
        {
            "low-direct": want(1),
            "mid-inferred": want(1, evidence="inferred"),
            "mid-direct": want(1),
            "top": want(1),
        },
    )
    _, placed = place(snap)
    assert {m for m, _h in placed} == {"top", "mid-base"}


def test_failure_domains_spread_when_feasible() -> None:
    hosts = [
        host("a1", failure_domain="rack-a", cached_models=["m"]),
        host("a2", failure_domain="rack-a", cached_models=["m"]),
        host("b1", failure_domain="rack-b"),
    ]
    _, placed = place(
        snapshot(hosts, [model("m", min_failure_domains=2, max_replicas=2)], {"m": want(2)})
    )
    assert hosts_of(placed, "m") in ({"a1", "b1"}, {"a2", "b1"}), "cached weights do not win"


def test_repair_relocates_a_replica_to_make_room_for_a_constrained_one() -> None:
    # x prefers h1 (cached) and takes it first (higher class); y may only use h1
    snap = snapshot(
        [host("h1", 10_000, cached_models=["x"]), host("h2", 10_000)],
        [model("x", 4000, priority=100), model("y", 7000, priority=50, allowed_hosts=["h1"])],
        {"x": want(1), "y": want(1)},
        policy={"memory_headroom_fraction": 0.0},
    )
    _problem, placed = place(snap)
    assert placed == {("x", "h2"), ("y", "h1")}


def test_repair_displaces_an_inferred_incumbent_for_a_required_replica() -> None:
    # The profile grew to 8,000 MB while 4,000 MB is live: keeping it leaves no footprint for
    # the required 3,000 MB replica, although the live ledger would admit it.
    snap = snapshot(
        [host("h1", 10_000, residencies=[resident("spec", 4000, loaded_at=NOW - 9000)])],
        [model("spec", 8000), model("base", 3000, min_replicas=1)],
        {"spec": want(1, evidence="inferred")},
        policy={"memory_headroom_fraction": 0.0},
    )
    problem, placed = place(snap)
    assert placed == {("base", "h1")}
    values = score_placement(problem, placed)
    assert values["p0:baseline:1"] == 1


def test_repair_trades_one_exclusive_replica_for_two_peers_in_the_same_round() -> None:
    # "a-solo" is first in round 1 (equal harm, lower model_id) and takes the host exclusively;
    # x and y together are worth more at p0:direct:1, and no single swap shows it.
    snap = snapshot(
        [host("h", 32_768)],
        [model("a-solo", 4000, max_colocated_models=1), model("x", 4000), model("y", 4000)],
        {"a-solo": want(1), "x": want(1), "y": want(1)},
    )
    problem, placed = place(snap)
    assert placed == {("x", "h"), ("y", "h")}
    assert score_placement(problem, placed)["p0:direct:1"] == 2


@pytest.mark.parametrize("seed", range(20))
def test_make_plan_with_the_heuristic_engine_is_valid(seed: int) -> None:
    snap = parse_snapshot(random_fleet(seed))
    plan = make_plan(snap, engine="heuristic")
    assert plan.solver.engine == "heuristic"
    assert violations(snap, plan) == []
    problem = build_problem(snap)
    expected, _removed = stage_preemptions(problem, heuristic_placement(problem))
    assert plan.preemptions == expected
