"""The portfolio's host-type model (grid/planner/portfolio/hosttypes.py, typed.py).

Oracles: the per-host portfolio model (the model the typed one aggregates, solved to
optimality), validate.py on the plan, and a hand-worked fleet. Never the typed code itself.

- on Hypothesis fleets of many identical hosts (some holding base replicas, a few individual
  hosts with incumbents) the typed and per-host models reach the same covered, failures,
  pressure, spare_slots, missing and utility; the plan built with the typed model passes
  validate.py and keeps every base placement;
- the disaggregation keeps the base plan's and the individual hosts' placements as they are,
  puts the counted replicas on their type's hosts only, and packs every count where the
  type has one model slot per host;
- six identical one-slot hosts, two workloads: every level computed by hand;
- counts the type ledgers allow but no packing holds fall back to the per-host model (never
  an over-claimed plan).
"""

from __future__ import annotations

import itertools
import math
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from ortools.sat.python import cp_model

from grid.fleet.models import FleetSnapshot, Plan
from grid.planner.cpsat.type_ledgers import TypeRoom, add_conflict_cuts
from grid.planner.portfolio import build_context, coordinate_search, evaluate, hosttypes, solve
from grid.planner.portfolio.context import PortfolioContext
from grid.planner.portfolio.hosttypes import disaggregate, portfolio_types
from grid.planner.portfolio.solve import CpsatResult, solve_after_search
from grid.planner.problem import Candidate
from grid.planner.validate import violations
from tests.planner.portfolio.builders import NOW, host, model, plan_of, resident, work, wsnapshot

pytestmark = [pytest.mark.unit, pytest.mark.property]

EXAMPLES = int(os.environ.get("PORTFOLIO_TYPES_EXAMPLES", "20"))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
WORDS = ["coding", "research", "marketing"]
COMPARED = ("covered", "failures", "pressure", "spare_slots", "missing", "utility")


@st.composite
def typed_fleets(draw: st.DrawFn) -> FleetSnapshot:
    """One or two machine shapes of 3–8 identical hosts each (known free disk or not; some
    hosts of a shape faster, so replicas there are worth more once a model serves), up to two
    individual hosts (one may hold a READY incumbent), 2–4 models scored for 1–3 workloads
    (artifact sizes, an exclusion, a colocation ceiling, a pin), some base demand."""
    hosts: list[dict[str, Any]] = []
    for shape in range(draw(st.integers(1, 2))):
        capacity = draw(st.sampled_from([8192, 16384, 24576]))
        slots = draw(st.sampled_from([1, 1, 2, 3, 4]))
        disk = draw(st.sampled_from([None, None, 10000, 30000]))
        fast = draw(st.integers(0, 3))  # the first `fast` hosts have twice the bandwidth
        for i in range(draw(st.integers(3, 8))):
            extra: dict[str, Any] = {"memory_bandwidth_gbps": 400.0 if i < fast else 200.0}
            if disk is not None:
                extra["disk_free_mb"] = disk
            hosts.append(host(f"s{shape}-{i}", capacity, max_models=slots, **extra))
    n_models = draw(st.integers(2, 4))
    models: list[dict[str, Any]] = []
    for i in range(n_models):
        scores = draw(
            st.dictionaries(
                st.sampled_from(WORDS), st.sampled_from([0.3, 0.6, 0.9]), min_size=1, max_size=2
            )
        )
        models.append(
            model(
                f"m{i}",
                draw(st.sampled_from([2048, 4096, 6144, 8192, 12288])),
                max_replicas=draw(st.integers(1, 6)),
                replica_concurrency=1,
                target_utilization=0.5,
                load_estimate_s=draw(st.sampled_from([8.0, 20.0, 60.0])),
                warm_estimate_s=4.0,
                workload_scores=scores,
                artifact_size_mb=draw(st.sampled_from([0, 3000, 9000])),
                max_colocated_models=draw(st.sampled_from([0, 0, 0, 2])),
            )
        )
    if draw(st.integers(0, 3)) == 0:
        models[0]["colocation_excludes"] = [models[1]["model_id"]]
    if draw(st.integers(0, 4)) == 0:
        models[-1]["pinned_hosts"] = ["s0-0"]
    for i in range(draw(st.integers(0, 2))):
        residents = []
        if draw(st.booleans()):
            m = draw(st.sampled_from(models))
            residents.append(
                resident(m["model_id"], m["memory_mb"], managed=True, last_used_at=NOW - 10)
            )
        hosts.append(host(f"x{i}", draw(st.sampled_from([12288, 20480])), residencies=residents))
    demand = {}
    for m in models:
        if draw(st.integers(0, 3)) == 0:
            demand[m["model_id"]] = {"desired_replicas": draw(st.integers(1, 3))}
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True))
    workloads = {
        w: work(
            draw(st.sampled_from([1, 5, 12])),
            draw(st.sampled_from([0.4, 1.0, 1.6, 2.5])),
            failure_rate=draw(st.sampled_from([0.0, 0.0, 0.1])),
        )
        for w in words
    }
    return wsnapshot(hosts, models, workloads, demand=demand)


def _context(snap: FleetSnapshot) -> PortfolioContext:
    return build_context(snap, plan_of(snap.model_copy(update={"workloads": {}})))


def _solve(ctx: PortfolioContext, *, aggregate: bool) -> CpsatResult:
    result = solve_after_search(ctx, coordinate_search(ctx), 30.0, aggregate=aggregate)
    assert result is not None
    return result


def _levels(ctx: PortfolioContext, result: CpsatResult) -> dict[str, int]:
    values = evaluate(ctx, result.mapping, result.placement)
    return {n: values[n] for n in COMPARED}


def _plan(snap: FleetSnapshot, *, aggregate: bool) -> Plan:
    """The plan with the typed model wherever a type exists (or never)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(solve, "aggregation_pays", lambda _ctx, _types: aggregate)
        return plan_of(snap)


@SETTINGS
@given(typed_fleets())
def test_typed_and_per_host_models_reach_the_same_levels(snap: FleetSnapshot) -> None:
    ctx = _context(snap)
    assume(portfolio_types(ctx))
    per_host = _solve(ctx, aggregate=False)
    typed = _solve(ctx, aggregate=True)
    assert per_host.status == "OPTIMAL" and per_host.aggregated_hosts == 0
    assert typed.aggregated_hosts > 0 or typed.fallback
    event("per-host fallback" if typed.fallback else "host-type model decided")
    types = portfolio_types(ctx)
    if all(ctx.problem.host_by_id[t.type_id].desired_cap == 1 for t in types):
        assert not typed.fallback  # one model slot per host: the type ledgers are exact
    assert _levels(ctx, typed) == _levels(ctx, per_host)
    assert set(ctx.base_keys) <= typed.placement
    if not typed.fallback:
        assert typed.status == "OPTIMAL"
        # Fewer decision variables than one per (model, host) pair on the aggregated hosts.
        assert typed.variables < per_host.variables
    # The plan built through the typed model (every type aggregated) is valid and keeps the
    # base plan; its levels are the per-host plan's.
    plan = _plan(snap, aggregate=True)
    base = plan_of(snap.model_copy(update={"workloads": {}}))
    assert violations(snap, plan) == []
    assert plan.portfolio is not None
    assert "host-type model" in plan.portfolio.solver.message or (
        "per-host model decided" in plan.portfolio.solver.message
    )
    placed = {(a.model_id, a.host_id) for a in plan.assignments}
    assert {(a.model_id, a.host_id) for a in base.assignments} <= placed
    reference = _plan(snap, aggregate=False)
    assert reference.portfolio is not None
    assert "host-type" not in reference.portfolio.solver.message
    mine = {lv.level: lv.value for lv in plan.portfolio.solver.objective}
    theirs = {lv.level: lv.value for lv in reference.portfolio.solver.objective}
    assert {n: mine[n] for n in COMPARED} == {n: theirs[n] for n in COMPARED}


@SETTINGS
@given(typed_fleets())
def test_disaggregation_never_moves_base_or_individual_placements(snap: FleetSnapshot) -> None:
    ctx = _context(snap)
    types = portfolio_types(ctx)
    assume(types)
    solved = _solve(ctx, aggregate=False).placement  # a valid per-host placement
    type_of = {h: t for t in types for h in t.host_ids}
    singles = {k for k in solved if k[1] not in type_of}
    counts: dict[tuple[str, str], int] = {}
    for m, h in solved:
        if h in type_of and (m, h) not in ctx.base_keys:
            counts[(m, type_of[h].type_id)] = counts.get((m, type_of[h].type_id), 0) + 1
    out, short = disaggregate(ctx, types, counts, singles)
    assert set(ctx.base_keys) <= out
    assert {k for k in out if k[1] not in type_of} == singles | {
        k for k in ctx.base_keys if k[1] not in type_of
    }
    placed: dict[tuple[str, str], int] = {}
    for m, h in out - set(ctx.base_keys):
        if h in type_of:
            assert m in type_of[h].models
            placed[(m, type_of[h].type_id)] = placed.get((m, type_of[h].type_id), 0) + 1
    assert all(placed.get(k, 0) <= n for k, n in counts.items())
    assert short == sum(counts.values()) - sum(placed.values())
    one_slot = all(ctx.problem.host_by_id[t.type_id].desired_cap == 1 for t in types)
    if one_slot:  # exact: every count packs
        assert short == 0


def _one_slot_fleet() -> FleetSnapshot:
    hosts = [host(f"h{i}", 16384, max_models=1) for i in range(6)]
    common = {"replica_concurrency": 1, "target_utilization": 0.5, "warm_estimate_s": 4.0}
    models = [
        model(
            "a",
            4096,
            max_replicas=8,
            load_estimate_s=20.0,
            **common,
            workload_scores={"coding": 0.9},
        ),
        model(
            "b",
            4096,
            max_replicas=8,
            load_estimate_s=40.0,
            **common,
            workload_scores={"research": 0.8},
        ),
    ]
    workloads = {
        "coding": work(10, 1.5, failure_rate=0.05),
        "research": work(10, 1.0),
    }
    return wsnapshot(hosts, models, workloads)


def test_six_identical_one_slot_hosts_by_hand() -> None:
    """Six one-slot hosts, coding → a, research → b, no evidence.

    need(coding, a) = ⌈1.5·1.2 / (1·0.5)⌉ = ⌈3.6⌉ = 4; need(research, b) = ⌈1.0·1.2/0.5⌉ = 3.
    covered 2; failures round(1000·0.05) = 50; pressure 150 + 100 = 250. The workloads ask
    4 + 3 = 7 replicas of 6 free slots: the fleet is saturated, so no slot is spare (the
    reserve is 0) and all six serve: missing = 7 − 6 = 1 (4 a + 2 b or 3 a + 3 b). Utility
    (tenths): a pays the cold start min(10, (4 + 20)/4) = 6 points, b min(10, 44/4) = 10,
    both earn the 6-point bonus at zero evidence: (90 − 6 + 6) + (80 − 10 + 6) = 166 points =
    1660. Transition then takes the cheaper cold starts: 4 of a and 2 of b, 4·24 + 2·44 =
    184 s (3 + 3 would be 204 s). First-fit by host ID: a on h0–h3, b on h4–h5."""
    snap = _one_slot_fleet()
    ctx = _context(snap)
    assert [(t.type_id, t.count, t.models) for t in portfolio_types(ctx)] == [("h0", 6, ("a", "b"))]
    expected = {
        "covered": 2,
        "failures": 50,
        "pressure": 250,
        "spare_slots": 0,
        "missing": 1,
        "utility": 1660,
        "transition": 184,
    }
    for aggregate in (True, False):
        result = _solve(ctx, aggregate=aggregate)
        values = evaluate(ctx, result.mapping, result.placement)
        assert {n: values[n] for n in expected} == expected
        assert result.mapping == {"coding": "a", "research": "b"}
        assert result.status == "OPTIMAL"
    typed = _solve(ctx, aggregate=True)
    assert typed.exact and not typed.fallback and typed.aggregated_hosts == 6
    assert sorted(typed.placement) == [
        ("a", "h0"),
        ("a", "h1"),
        ("a", "h2"),
        ("a", "h3"),
        ("b", "h4"),
        ("b", "h5"),
    ]
    plan = _plan(snap, aggregate=True)
    assert violations(snap, plan) == []
    assert plan.portfolio is not None
    assert plan.portfolio.solver.message.startswith("host-type model: 6 hosts in 1 type(s)")


def test_counts_that_do_not_pack_fall_back_to_the_per_host_model() -> None:
    """Two hosts of four slots, five one-replica models (three of 5/12 and two of 4/12 of a
    host's make-before-break room R). The type ledgers admit all five (Σ = 23/12·R ≤ 2R, and
    every packing cut holds), but a host holding three of them needs ≥ 13/12·R: only four
    pack. The typed counts (five covered) must not be claimed: the per-host model decides."""
    capacity = 12288
    room = capacity - math.ceil(0.05 * capacity)  # allocatable − memory headroom
    big, small = room * 5 // 12, room * 4 // 12
    words = ["coding", "research", "marketing", "sales", "design"]
    sizes = [big, big, big, small, small]
    models = [
        model(f"m{i}", size, max_replicas=1, replica_concurrency=4, workload_scores={w: 0.8})
        for i, (w, size) in enumerate(zip(words, sizes, strict=True))
    ]
    hosts = [host(f"h{i}", capacity, max_models=4) for i in range(2)]
    snap = wsnapshot(hosts, models, {w: work(10, 0.5) for w in words})
    ctx = _context(snap)
    assert ctx.problem.host_by_id["h0"].new_budget_mb == room
    typed = _solve(ctx, aggregate=True)
    per_host = _solve(ctx, aggregate=False)
    assert typed.fallback and typed.aggregated_hosts == 0
    assert _levels(ctx, typed) == _levels(ctx, per_host)
    assert _levels(ctx, typed)["covered"] == 4
    plan = _plan(snap, aggregate=True)
    assert violations(snap, plan) == []
    assert plan.portfolio is not None and len(plan.portfolio.mapping) == 4
    assert "per-host model decided" in plan.portfolio.solver.message


def _packable(sizes: list[int], limit: int, cap: int, hosts: int) -> set[tuple[int, ...]]:
    """Counts per model over every assignment of a model set to each host (brute force): a
    host holds distinct models, at most `cap` of them, of total size at most `limit`."""
    per_host = [
        s
        for r in range(cap + 1)
        for s in itertools.combinations(range(len(sizes)), r)
        if sum(sizes[i] for i in s) <= limit
    ]
    return {
        tuple(sum(i in s for s in layout) for i in range(len(sizes)))
        for layout in itertools.product(per_host, repeat=hosts)
    }


def _conflict_cuts_hold(sizes: list[int], limit: int, hosts: int, counts: tuple[int, ...]) -> bool:
    model = cp_model.CpModel()
    ns = [model.new_int_var(0, hosts, "") for _ in sizes]
    cands = [
        Candidate(f"m{i}", "h", "rt", mb, mb, 0, None, False, False) for i, mb in enumerate(sizes)
    ]
    add_conflict_cuts(model, ns, cands, TypeRoom(limit, limit, None, None), hosts)
    for ct in model.proto.constraints:
        pairs = zip(list(ct.linear.vars), list(ct.linear.coeffs), strict=True)
        domain = list(ct.linear.domain)
        if not domain[0] <= sum(c * counts[v] for v, c in pairs) <= domain[-1]:
            return False
    return True


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(1, 12), min_size=2, max_size=4),
    st.integers(6, 16),
    st.integers(1, 3),
    st.integers(1, 3),
)
def test_every_packable_count_satisfies_the_conflict_cuts(
    sizes: list[int], limit: int, cap: int, hosts: int
) -> None:
    for counts in _packable(sizes, limit, cap, hosts):
        assert _conflict_cuts_hold(sizes, limit, hosts, counts), counts


def test_the_conflict_cut_excludes_a_small_model_on_every_host() -> None:
    """Three 3-slot hosts of 10, a large model (8) and a small one (3): 8 + 3 > 10, so a host
    with the large model cannot hold the small one: (small 3, large 1) packs nowhere, though
    the sums (3·3 + 8 = 17 ≤ 30, 4 ≤ 9 slots) allow it. The conflict cut n_s + n_l ≤ 3
    excludes it and keeps (small 2, large 1)."""
    sizes, limit, hosts = [3, 8], 10, 3
    reachable = _packable(sizes, limit, 3, hosts)
    assert (3, 1) not in reachable and (2, 1) in reachable
    assert not _conflict_cuts_hold(sizes, limit, hosts, (3, 1))
    assert _conflict_cuts_hold(sizes, limit, hosts, (2, 1))


def _identical(hosts: int) -> FleetSnapshot:
    fleet = [host(f"h{i:02d}", 16384, max_models=2) for i in range(hosts)]
    models = [model("a", 4096, max_replicas=4, workload_scores={"coding": 0.9})]
    return wsnapshot(fleet, models, {"coding": work(10, 1.0)})


def test_the_host_type_model_is_used_only_where_it_pays() -> None:
    """Six identical hosts: below MIN_AGGREGATED_HOSTS (16), the default keeps the per-host
    model (small fleets plan exactly as before); twenty: the host-type model decides."""
    assert hosttypes.MIN_AGGREGATED_HOSTS == 16
    small, large = _context(_identical(6)), _context(_identical(20))
    assert [t.count for t in portfolio_types(small)] == [6]
    kept = solve_after_search(small, coordinate_search(small), 10.0)
    assert kept is not None and kept.aggregated_hosts == 0
    decided = solve_after_search(large, coordinate_search(large), 10.0)
    assert decided is not None and decided.aggregated_hosts == 20
    assert decided.status == "OPTIMAL"
