"""Exact packing on host types (cpsat/arcflow.py) and the exact host-type model (aggregate.py).

Oracles, none of them the planner's ledgers or scorer: tests/planner/brute_force.py (every
placement of a tiny fleet against reference.py's rows, written from the snapshot), the
independent HiGHS lexicographic MILP of tests/planner/reference.py, hand-worked packings,
and validate.py on every plan.
"""

from __future__ import annotations

import itertools
import random
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.fleet.models import FleetSnapshot
from grid.planner.cpsat.aggregate import _Attempt, solve_aggregated
from grid.planner.cpsat.arcflow import build_graph, item_classes, pack_type
from grid.planner.cpsat.bounds import static_bounds
from grid.planner.cpsat.scoring import Scorer
from grid.planner.heuristic import heuristic_placement
from grid.planner.plan import make_plan
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem
from grid.planner.types import host_types
from grid.planner.validate import violations
from tests.planner.brute_force import brute_force_levels, feasible_contents
from tests.planner.fleets import Doc, host, model, snapshot, want
from tests.planner.reference import reference_optimum

pytestmark = pytest.mark.property


def symmetric_fleet(
    seed: int, *, hosts: int = 3, models: int = 4, pins: bool = False
) -> FleetSnapshot:
    """`hosts` identical hosts (one type) and a few models drawing every per-host family:
    memory against two ledgers (headroom), slots, colocation ceilings, exclusions, known
    disk, replica counts up to the host count, required baselines in two classes; `pins`: a
    model may be pinned to h0 (which then leaves the type)."""
    rng = random.Random(seed)
    ids = [f"m{i}" for i in range(models)]
    docs: list[Doc] = []
    for i, model_id in enumerate(ids):
        extra: Doc = {}
        if rng.random() < 0.25:
            extra["max_colocated_models"] = rng.choice([1, 2])
        if i and rng.random() < 0.25:
            extra["colocation_excludes"] = [rng.choice(ids[:i])]
        if pins and rng.random() < 0.2:
            extra["pinned_hosts"] = ["h0"]
        docs.append(
            model(
                model_id,
                rng.choice([2000, 3000, 4000, 5000, 7000]),
                priority=rng.choice([10, 50]),
                min_replicas=rng.choice([0, 1, 1, 2]),
                max_replicas=hosts,
                artifact_size_mb=rng.choice([1000, 3000, 5000]),
                **extra,
            )
        )
    disk = rng.choice([None, 6000, 9000])
    slots = rng.choice([0, 0, 2, 3])
    fields: Doc = {"max_models": slots} if slots else {}
    if disk is not None:
        fields["disk_free_mb"] = disk
    capacity = rng.choice([8000, 10000, 12000])
    host_docs = [host(f"h{j}", capacity, **fields) for j in range(hosts)]
    demand = {m["model_id"]: want(rng.randint(0, hosts)) for m in docs if rng.random() < 0.6}
    return snapshot(host_docs, docs, demand, policy={"memory_headroom_fraction": 0.1})


def _only_type(problem: PlacementProblem):  # type: ignore[no-untyped-def]
    grouped = [t for t in host_types(problem) if t.count > 1]
    assert len(grouped) == 1
    return grouped[0]


def _paths(graph) -> set[tuple[int, ...]]:  # type: ignore[no-untyped-def]
    """Every source-sink path of the graph as its sorted class multiset."""
    out_arcs: dict[int, list[tuple[int, int]]] = {}
    for u, v, c in graph.arcs:
        out_arcs.setdefault(u, []).append((v, c))
    sink = graph.nodes - 1
    found: set[tuple[int, ...]] = set()

    def walk(node: int, path: tuple[int, ...]) -> None:
        if node == sink:
            found.add(tuple(sorted(path)))
            return
        for head, cls in out_arcs.get(node, ()):
            walk(head, path + ((cls,) if cls >= 0 else ()))

    walk(0, ())
    return found


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6), st.booleans())
def test_graph_paths_are_exactly_the_feasible_contents_of_one_host(seed: int, multi: bool) -> None:
    """Source-sink paths (as class multisets, a multi-use class at most as often as it has
    models) equal the brute-forced feasible contents of one host, mapped to their classes."""
    problem = build_problem(symmetric_fleet(seed, hosts=2, models=5))
    htype = _only_type(problem)
    rng = random.Random(seed)
    single = {m: multi and rng.random() < 0.5 for m in htype.models}
    classes = item_classes(problem, htype, htype.models, single)
    graph = build_graph(problem, htype, classes)
    assert graph is not None
    size = Counter({i: len(c.models) for i, c in enumerate(classes)})
    paths = {p for p in _paths(graph) if all(n <= size[c] for c, n in Counter(p).items())}
    index = {m: i for i, c in enumerate(classes) for m in c.models}
    contents = {
        tuple(sorted(index[m] for m in s))
        for s in feasible_contents(problem, htype.host_ids[0])
        if all(m in index for m in s)
    }
    assert paths == contents


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_pack_type_packs_exactly_the_counts_that_pack(seed: int) -> None:
    """Random counts on a type of three hosts: packed iff some placement of those counts is
    feasible (brute force over every placement); a packing passes the reference's rows."""
    problem = build_problem(symmetric_fleet(seed, hosts=3, models=4))
    htype = _only_type(problem)
    rng = random.Random(seed)
    counts = {m: rng.randint(0, htype.count) for m in htype.models}
    result = pack_type(problem, htype, counts, time_limit_s=5.0)
    contents = feasible_contents(problem, htype.host_ids[0])
    packs = _packs(contents, counts, htype.count)
    assert result.complete == packs
    if result.infeasible:
        assert not packs
    per_host: dict[str, set[str]] = {}
    for model_id, host_id in result.placed:
        per_host.setdefault(host_id, set()).add(model_id)
    assert all(frozenset(models) in contents for models in per_host.values())
    placed = Counter(m for m, _h in result.placed)
    assert all(placed[m] <= n for m, n in counts.items())
    if result.complete:
        assert placed == Counter({m: n for m, n in counts.items() if n})


def _packs(contents: set[frozenset[str]], counts: dict[str, int], hosts: int) -> bool:
    """Is there a choice of `hosts` feasible contents whose model counts are `counts`?"""
    need = Counter({m: n for m, n in counts.items() if n})
    for combo in itertools.combinations_with_replacement(sorted(contents, key=sorted), hosts):
        if Counter(m for content in combo for m in content) == need:
            return True
    return False


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_exact_host_type_model_equals_brute_force_on_tiny_symmetric_fleets(seed: int) -> None:
    problem = build_problem(symmetric_fleet(seed, hosts=3, models=4, pins=True))
    result = solve_aggregated(
        problem, hint=heuristic_placement(problem), time_limit_s=30.0, exact=True
    )
    expected = brute_force_levels(problem)
    assert result.proven
    assert {n: result.values[n] for n in result.values} == {n: expected[n] for n in result.values}
    plan = make_plan(problem.snapshot, time_limit_s=30.0)
    assert violations(problem.snapshot, plan) == []
    got = {o.level: round(o.value) for o in plan.solver.objective}
    assert {n: got[n] for n in expected} == expected


def shaped_fleet(seed: int) -> FleetSnapshot:
    """Two shapes of 2-4 hosts in two failure domains (slot caps 2 and 3), 4-6 models, some
    asking for two domains (so types split by domain): small enough for the HiGHS
    reference, large enough that the per-type sums are loose."""
    rng = random.Random(seed)
    hosts: list[Doc] = []
    for s, (capacity, slots) in enumerate(rng.sample([(12000, 2), (16000, 3), (20000, 0)], 2)):
        fields: Doc = {"max_models": slots} if slots else {}
        for j in range(rng.randint(2, 4)):
            hosts.append(host(f"s{s}-h{j}", capacity, failure_domain=f"rack-{j % 2}", **fields))
    models = [
        model(
            f"m{i}",
            rng.choice([3000, 5000, 6000, 7000, 9000, 11000]),
            priority=rng.choice([10, 50]),
            min_replicas=rng.choice([0, 1]),
            max_replicas=8,
            max_colocated_models=rng.choice([0, 0, 0, 2]),
            min_failure_domains=rng.choice([1, 1, 2]),
        )
        for i in range(rng.randint(4, 6))
    ]
    demand = {m["model_id"]: want(rng.randint(1, 5)) for m in models}
    return snapshot(hosts, models, demand, policy={"memory_headroom_fraction": 0.0})


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**6))
def test_exact_host_type_model_equals_the_highs_reference(seed: int) -> None:
    problem = build_problem(shaped_fleet(seed))
    result = solve_aggregated(
        problem, hint=heuristic_placement(problem), time_limit_s=30.0, exact=True
    )
    reference = reference_optimum(problem).values
    assert result.proven
    assert result.values == {n: reference[n] for n in result.values}


def test_loose_sums_are_made_exact_and_the_shortfall_proven() -> None:
    """Hand-worked: two 14 MB hosts, models of 8, 8, 4, 4 and 4 MB, one replica each. The sums
    allow all five (28 MB in 28 MB, no cut binds), but the two 8s need a host each and leave
    6 MB there: one 4 per host, four models at most. The plan reports 4 with bound 4."""
    sizes = {"a": 8, "b": 8, "c": 4, "d": 4, "e": 4}
    snap = snapshot(
        [host(f"h{j}", 14) for j in range(2)],
        [model(m, mb, min_replicas=1, max_replicas=1) for m, mb in sizes.items()],
        policy={"memory_headroom_fraction": 0.0},
    )
    problem = build_problem(snap)
    scorer = Scorer(problem)
    relaxed = _Attempt(problem, host_types(problem), scorer, static_bounds(problem))
    first = relaxed.run(set(), time.perf_counter() + 10.0, windows=True)
    assert first.values["p0:baseline:1"] == 5 and not first.proven  # the sums alone
    assert first.unpacked == {"h0"}  # ... and the proof that their counts do not pack
    result = solve_aggregated(problem, hint=set(), time_limit_s=10.0)
    assert result.proven and result.values["p0:baseline:1"] == 4
    plan = make_plan(snap, time_limit_s=10.0)
    level = next(o for o in plan.solver.objective if o.level == "p0:baseline:1")
    assert (level.value, level.bound) == (4, 4)
    assert violations(snap, plan) == []


@pytest.mark.parametrize(
    ("capacity", "sizes", "hosts", "packs"),
    [
        (100, [50, 50, 30, 30, 40], 2, True),  # 50+50, 30+30+40: exact fill
        (100, [60, 60, 40, 40], 2, True),
        (100, [60, 60, 50], 2, False),  # 60+50 > 100 and 60+60 > 100: three hosts needed
        (10, [6, 6, 6], 2, False),  # L1 says 2, each pair exceeds 10
    ],
)
def test_pack_type_hand_worked(capacity: int, sizes: list[int], hosts: int, packs: bool) -> None:
    snap = snapshot(
        [host(f"h{j}", capacity) for j in range(hosts)],
        [model(f"m{i}", mb, min_replicas=1, max_replicas=1) for i, mb in enumerate(sizes)],
        policy={"memory_headroom_fraction": 0.0},
    )
    problem = build_problem(snap)
    htype = _only_type(problem)
    result = pack_type(problem, htype, {m: 1 for m in htype.models}, time_limit_s=5.0)
    assert result.complete is packs
    assert result.infeasible is (not packs)
