"""Hypothesis properties of the portfolio over generated fleets and workload mixes.

- the portfolio never evicts or moves a replica of the base plan (baseline, pinned, direct);
- weak evidence never earns more than one replica per workload;
- at most one model differs from the exploitation-only portfolio;
- CP-SAT is never lexicographically worse than the coordinate search;
- every plan with a portfolio passes validate.py;
- on clean fleets, coverage and pressure equal a brute-force optimum over model sets and hosts,
  and the top five levels equal a brute-force optimum over every replica layout and map.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.fleet.models import FleetSnapshot
from grid.fleet.snapshot import parse_snapshot
from grid.planner.portfolio import build_context, compare, coordinate_search, decide, evaluate
from grid.planner.portfolio.solve import solve_portfolio
from grid.planner.validate import violations
from tests.planner.portfolio.builders import NOW, plan_of

pytestmark = pytest.mark.property

WORDS = ["coding", "research", "marketing", "sales", "image"]
EXAMPLES = int(os.environ.get("PORTFOLIO_EXAMPLES", "25"))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def fleets(draw: st.DrawFn, *, residencies: bool = True) -> FleetSnapshot:
    n_hosts = draw(st.integers(1, 4))
    n_models = draw(st.integers(1, 5))
    models: list[dict[str, Any]] = []
    for i in range(n_models):
        scores = draw(
            st.dictionaries(
                st.sampled_from(WORDS), st.sampled_from([0.3, 0.6, 0.9, 1.0]), max_size=3
            )
        )
        models.append(
            {
                "model_id": f"m{i}",
                "memory_mb": draw(st.sampled_from([1024, 2048, 4096, 8192])),
                "min_replicas": draw(st.sampled_from([0, 0, 0, 1])) if residencies else 0,
                "max_replicas": draw(st.integers(1, 3)),
                "priority": draw(st.sampled_from([0, 10, 50])),
                "load_estimate_s": draw(st.sampled_from([4.0, 20.0, 60.0])),
                "warm_estimate_s": 4.0,
                "workload_scores": scores,
                "pinned_hosts": ["h0"] if residencies and draw(st.integers(0, 9)) == 0 else [],
            }
        )
    hosts: list[dict[str, Any]] = []
    for h in range(n_hosts):
        residents = []
        if residencies:
            for m in models:
                if draw(st.integers(0, 3)) == 0:
                    residents.append(
                        {
                            "model_id": m["model_id"],
                            "memory_mb": m["memory_mb"],
                            "state": draw(st.sampled_from(["ready", "ready", "warming"])),
                            "managed": draw(st.sampled_from([True, True, True, False])),
                            "last_used_at": NOW - draw(st.sampled_from([10, 100000])),
                        }
                    )
        hosts.append(
            {
                "host_id": f"h{h}",
                "capacity_mb": draw(st.sampled_from([4096, 8192, 16384])),
                "max_models": draw(st.sampled_from([0, 1, 2, 3])),
                "last_heartbeat": NOW,
                "residencies": residents,
            }
        )
    demand = {}
    if residencies:
        for m in models:
            if draw(st.integers(0, 3)) == 0:
                demand[m["model_id"]] = {
                    "offered_concurrency": draw(st.sampled_from([0.2, 1.0])),
                    "rpm": 5.0,
                }
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4, unique=True))
    workloads = {
        w: {
            "observations": draw(st.integers(0, 8)),
            "offered_concurrency": draw(st.sampled_from([0.2, 0.8, 1.2, 1.6, 3.0])),
            "queue_depth": draw(st.sampled_from([0.0, 0.0, 1.0])),
            "modality": "image" if w == "image" else "text",
        }
        for w in words
    }
    outcomes = []
    for m in models:
        for w in sorted(m["workload_scores"]):
            if w in workloads and draw(st.integers(0, 2)) == 0:
                requests = draw(st.sampled_from([1, 5, 20]))
                outcomes.append(
                    {
                        "model_id": m["model_id"],
                        "workload": w,
                        "requests": requests,
                        "successes": requests,
                        "age_s": draw(st.sampled_from([5, 9000])),
                    }
                )
    for wl in workloads.values():  # queued work is part of the offered concurrency
        wl["offered_concurrency"] = max(wl["offered_concurrency"], wl["queue_depth"])
    return parse_snapshot(
        {
            "schema_version": 1,
            "now": NOW,
            "hosts": hosts,
            "models": models,
            "demand": demand,
            "workloads": workloads,
            "outcomes": outcomes,
        }
    )


def _weak(snap: FleetSnapshot, word: str, model_id: str) -> bool:
    """Independent canary rule: no repeated arrivals, no direct demand, no fresh success."""
    wl = snap.workloads[word]
    if wl.observations >= 3:
        return False
    d = snap.demand.get(model_id)
    if d is not None and (d.offered_concurrency > 0 or d.rpm > 0):
        return False
    return not any(
        o.model_id == model_id and o.workload == word and o.successes > 0 and o.age_s <= 3600
        for o in snap.outcomes
    )


def _counts(plan: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for a in plan.assignments:
        out[a.model_id] = out.get(a.model_id, 0) + 1
    return out


@SETTINGS
@given(fleets())
def test_portfolio_safety_properties(snap: FleetSnapshot) -> None:
    plan = plan_of(snap)
    base = plan_of(snap.model_copy(update={"workloads": {}}))
    assert violations(snap, plan) == []
    report = plan.portfolio
    assert report is not None
    # Base replicas stay exactly where the base plan put them; no new evictions.
    placed = {(a.model_id, a.host_id) for a in plan.assignments}
    assert {(a.model_id, a.host_id) for a in base.assignments} <= placed
    assert plan.preemptions[: len(base.preemptions)] == base.preemptions
    added = plan.preemptions[len(base.preemptions) :]
    base_keys = {(a.model_id, a.host_id) for a in base.assignments}
    assert all((p.victim_model_id, p.host_id) not in base_keys for p in added)
    assert all((p.victim_model_id, p.host_id) not in placed for p in added)
    assert len({p.beneficiary_model_id for p in added}) <= 1  # one preemption-only model
    # Weak evidence: at most one replica per weak workload mapped to the model.
    extra = {m: n - _counts(base).get(m, 0) for m, n in _counts(plan).items()}
    for m in set(report.mapping.values()):
        words = [w for w, mm in report.mapping.items() if mm == m]
        if all(_weak(snap, w, m) for w in words):
            assert extra.get(m, 0) <= len(words)
    # Only mapped models gain replicas.
    assert {m for m, n in extra.items() if n > 0} <= set(report.mapping.values())
    # One admission row per active workload; a mapped row names its model; reasons start with
    # a stable code.
    assert [r.workload for r in report.admission] == sorted(snap.workloads)
    for r in report.admission:
        assert re.match(r"^[a-z_]+: ", r.reason), r.reason
        if r.workload in report.mapping:
            assert r.model_id == report.mapping[r.workload]
            assert r.state in {"ready", "starting", "planned", "undersupplied"}
            assert r.planned >= 1 and r.missing == max(0, r.desired - r.planned)
        else:
            assert r.planned == 0
    # Exploration budget against the exploitation-only portfolio.
    mapping, _placement, exploit, _solver = decide(build_context(snap, base), engine="cpsat")
    assert mapping == report.mapping
    differing = {m for w, m in mapping.items() if exploit.get(w) != m}
    assert len(differing) <= 1
    assert report.exploration_model == (min(differing) if differing else None)


@SETTINGS
@given(fleets())
def test_cpsat_is_never_worse_than_the_coordinate_search(snap: FleetSnapshot) -> None:
    ctx = build_context(snap, plan_of(snap.model_copy(update={"workloads": {}})))
    search = coordinate_search(ctx)
    result = solve_portfolio(
        ctx,
        hint_mapping=search.mapping,
        hint_placement=search.placement,
        time_limit_s=20.0,
        hint_exploit=search.exploit_mapping,
    )
    assert result is not None and result.status == "OPTIMAL"
    cp = evaluate(ctx, result.mapping, result.placement)
    theirs = evaluate(ctx, search.mapping, search.placement)
    differing = {m for w, m in search.mapping.items() if result.exploit_mapping.get(w) != m}
    if len(differing) <= 1:  # the search's portfolio obeys the exploration budget against E
        assert compare(cp, theirs) >= 0
    else:  # it explores more than the budget allows: only the levels above utility compare
        upper = ["covered", "failures", "pressure", "spare_slots"]
        assert [cp[n] for n in upper] + [-cp["missing"]] >= [theirs[n] for n in upper] + [
            -theirs["missing"]
        ]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_same_snapshot_same_portfolio(snap: FleetSnapshot) -> None:
    def doc() -> dict[str, Any]:
        report = plan_of(snap).portfolio
        assert report is not None
        out = report.model_dump(mode="json")
        out["solver"].pop("wall_ms")
        return out

    assert doc() == doc()


def _brute_force(snap: FleetSnapshot) -> tuple[int, int]:
    """Max (covered, pressure) over every model set that packs onto the hosts (no residencies)."""
    admitted = [
        w
        for w, f in snap.workloads.items()
        if w != "image" and (f.observations >= 3 or f.offered_concurrency >= 1.5)
    ]
    hosts = [
        (math.floor(h.capacity_mb) - math.ceil(0.05 * h.capacity_mb), h.max_models)
        for h in snap.hosts
    ]
    best = (0, 0)
    models = snap.models
    for size in range(len(models) + 1):
        for chosen in itertools.combinations(models, size):
            covered = [w for w in admitted if any(w in m.workload_scores for m in chosen)]
            value = (
                len(covered),
                sum(round(100 * snap.workloads[w].offered_concurrency) for w in covered),
            )
            if value <= best:
                continue
            for where in itertools.product(range(len(hosts)), repeat=size):
                ok = True
                for h, (mem, slots) in enumerate(hosts):
                    on = [m for m, at in zip(chosen, where, strict=True) if at == h]
                    if sum(m.memory_mb for m in on) > mem or (slots and len(on) > slots):
                        ok = False
                        break
                if ok:
                    best = value
                    break
    return best


@SETTINGS
@given(fleets(residencies=False))
def test_coverage_and_pressure_match_a_brute_force_optimum(snap: FleetSnapshot) -> None:
    snap = snap.model_copy(
        update={"workloads": {w: f for w, f in snap.workloads.items() if w != "image"}}
    )
    if not snap.workloads:
        return
    plan = plan_of(snap)
    report = plan.portfolio
    assert report is not None
    covered = len(report.mapping)
    pressure = sum(round(100 * snap.workloads[w].offered_concurrency) for w in report.mapping)
    assert (covered, pressure) == _brute_force(snap)


def _need(snap: FleetSnapshot, word: str, model_id: str) -> int:
    """Hand rule: ⌈(offered − queue)·1.2 / (concurrency·utilization)⌉ ≥ 1, one when weak."""
    wl = snap.workloads[word]
    prof = next(m for m in snap.models if m.model_id == model_id)
    per = prof.replica_concurrency * prof.target_utilization
    need = max(1, math.ceil(max(0.0, wl.offered_concurrency - wl.queue_depth) * 1.2 / per - 1e-9))
    return 1 if _weak(snap, word, model_id) else need


def _brute_force_levels(
    snap: FleetSnapshot, utility: dict[tuple[str, str], int]
) -> tuple[int, ...]:
    """Best (covered, pressure, spare slots, −missing, utility) over every replica layout and
    every workload → model map on a fleet without residencies or base replicas."""
    admitted = [
        w for w, f in snap.workloads.items() if f.observations >= 3 or f.offered_concurrency >= 1.5
    ]
    hosts = [(h.capacity_mb - math.ceil(0.05 * h.capacity_mb), h.max_models) for h in snap.hosts]
    models = snap.models
    options = {
        w: [
            None,
            *[m.model_id for m in models if w in m.workload_scores and (w, m.model_id) in utility],
        ]
        for w in admitted
    }
    # Spare slots are kept only while the fleet's free slots cover what the admitted workloads
    # ask (each at its least-demanding candidate, up to the slots of the hosts where one of its
    # candidates fits); a saturated fleet keeps none.
    slotted = all(s for _m, s in hosts)
    memory = {m.model_id: m.memory_mb for m in models}

    def usable(w: str) -> int:
        return sum(s for mem, s in hosts if any(memory[m] <= mem for m in options[w][1:]))

    least_asked = sum(
        min(min(_need(snap, w, m) for m in options[w][1:]), usable(w))
        for w in admitted
        if options[w][1:]
    )
    reserve = 0 if slotted and least_asked > sum(s for _m, s in hosts) else 2
    layouts: list[dict[str, int]] = []
    # Every set of (model, host) pairs, one replica per pair, that fits memory and slots.
    pairs = [(m, h) for m in range(len(models)) for h in range(len(hosts))]
    for mask in range(1 << len(pairs)):
        chosen = [pairs[i] for i in range(len(pairs)) if mask >> i & 1]
        ok = True
        for h, (mem, slots) in enumerate(hosts):
            on = [models[m] for m, hh in chosen if hh == h]
            if sum(m.memory_mb for m in on) > mem or (slots and len(on) > slots):
                ok = False
                break
        if ok:
            counts = {m.model_id: 0 for m in models}
            for m, _h in chosen:
                counts[models[m].model_id] += 1
            free = (
                sum(
                    slots - sum(1 for _m, hh in chosen if hh == h)
                    for h, (_mem, slots) in enumerate(hosts)
                )
                if slotted
                else reserve
            )
            counts["__spare__"] = min(reserve, free)
            layouts.append(counts)
    best: tuple[int, ...] = (
        0,
        0,
        min(reserve, sum(s for _m, s in hosts)) if slotted else reserve,
        0,
        0,
    )
    for choice in itertools.product(*(options[w] for w in admitted)):
        mapping = {w: m for w, m in zip(admitted, choice, strict=True) if m is not None}
        asked: dict[str, int] = {}
        for w, m in mapping.items():
            asked[m] = asked.get(m, 0) + _need(snap, w, m)
        for counts in layouts:
            desired = {m.model_id: min(asked.get(m.model_id, 0), m.max_replicas) for m in models}
            if any(counts[m] > desired[m] for m in desired):
                continue  # no replica without a workload asking for it
            if any(counts[m] < 1 for m in mapping.values()):
                continue
            value = (
                len(mapping),
                sum(round(100 * snap.workloads[w].offered_concurrency) for w in mapping),
                counts["__spare__"],
                # every replica the workloads ask for and lack, beyond the ceiling too
                -sum(
                    asked.get(m.model_id, 0) - counts[m.model_id]
                    for m in models
                    if m.max_replicas > 0
                ),
                sum(utility[(w, m)] for w, m in mapping.items()),
            )
            best = max(best, value)
    return best


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(residencies=False))
def test_cpsat_reaches_the_brute_force_optimum_of_the_top_levels(snap: FleetSnapshot) -> None:
    if len(snap.hosts) * len(snap.models) > 9:
        kept = {m.model_id for m in snap.models[:3]}
        outcomes = [o for o in snap.outcomes if o.model_id in kept]
        snap = snap.model_copy(
            update={"hosts": snap.hosts[:2], "models": snap.models[:3], "outcomes": outcomes}
        )
    policy = snap.policy.model_copy(
        update={"portfolio": snap.policy.portfolio.model_copy(update={"exploration_bonus": 0.0})}
    )
    snap = snap.model_copy(
        update={
            "policy": policy,
            "workloads": {w: f for w, f in snap.workloads.items() if w != "image"},
        }
    )
    if not snap.workloads:
        return
    report = plan_of(snap).portfolio
    assert report is not None
    utility = {
        (c.workload, c.model_id): round(c.utility * 10) for c in report.candidates if c.feasible
    }
    achieved = {lv.level: lv.value for lv in report.solver.objective}
    mine = (
        achieved["covered"],
        achieved["pressure"],
        achieved["spare_slots"],
        -achieved["missing"],
        achieved["utility"],
    )
    assert mine == _brute_force_levels(snap, utility)
