"""The per-shape problem build (problem.py), host types from build shapes (types.py) and the
C-level candidate orders (heuristic_order.py), against the per-pair path they replace.

Oracles: `_per_pair_build` decides every (model, host) pair on its own with the pair rules
(`problem_build._pair`, the budgets of `host_budget`), in host-ID then model order: the build as it
was before host shapes; `_types_by_host` groups hosts by their own full candidate signature
(the former per-host grouping); the candidate order is restated as one `sorted` with the
documented key. Fleets: production-shaped ones (few shapes) mutated with what breaks a shape
(cached weights, residencies, non-admitting hosts, allow/deny/pin lists, unwanted models), and
generated mixed fleets (every host distinct).
"""

from __future__ import annotations

import gc
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.fleet.models import FleetSnapshot
from grid.fleet.snapshot import parse_snapshot
from grid.lab.fleetgen import generate_fleet
from grid.lab.fleetgen_production import production_document
from grid.planner import problem as problem_module
from grid.planner import problem_build
from grid.planner.gcpause import gc_paused
from grid.planner.heuristic_order import CandidateOrder
from grid.planner.levels import model_scores, quality_scores
from grid.planner.problem import Candidate, PlacementProblem
from grid.planner.problem_build import build_problem
from grid.planner.targets import compute_targets
from grid.planner.types import host_types

pytestmark = pytest.mark.property


def _mutated_production(seed: int, hosts: int = 48, models: int = 14) -> FleetSnapshot:
    rng = random.Random(seed)
    doc: dict[str, Any] = production_document(hosts, models, seed)
    model_ids = [m["model_id"] for m in doc["models"]]
    host_ids = [h["host_id"] for h in doc["hosts"]]
    for h in doc["hosts"]:
        roll = rng.random()
        if roll < 0.1:
            h["cached_models"] = [rng.choice(model_ids)]
        elif roll < 0.18:
            m = rng.choice(doc["models"])
            h["residencies"] = [
                {
                    "model_id": m["model_id"],
                    "state": rng.choice(["ready", "loading"]),
                    "memory_mb": m["memory_mb"],
                    "runtime": "llama.cpp",
                    "managed": rng.random() < 0.7,
                }
            ]
        elif roll < 0.22:
            h["state"] = "draining"
        elif roll < 0.26:
            h["max_models"] = 1
        elif roll < 0.32:
            h["actuator_capabilities"] = ["warm"]  # loads nothing: only cached models
            if rng.random() < 0.5:
                h["cached_models"] = rng.sample(model_ids, 2)
    for m in doc["models"]:
        roll = rng.random()
        if roll < 0.1:
            m["allowed_hosts"] = rng.sample(host_ids, 5)
        elif roll < 0.2:
            m["denied_hosts"] = rng.sample(host_ids, 5)
        elif roll < 0.28:
            m["pinned_hosts"] = [rng.choice(host_ids)]
    for model_id in rng.sample(model_ids, 2):  # no demand and no baseline: not desired
        doc["demand"].pop(model_id, None)
        for m in doc["models"]:
            if m["model_id"] == model_id:
                m["min_replicas"] = 0
    return parse_snapshot(doc)


def _per_pair_build(
    snap: FleetSnapshot,
) -> tuple[list[tuple[tuple[str, str], Candidate]], list[tuple[tuple[str, str], list[str]]]]:
    """Every pair decided on its own, in host-ID then model order (the build before shapes)."""
    targets = compute_targets(snap)
    models = sorted(snap.models, key=lambda m: (-m.priority, m.model_id))
    profiles = {m.model_id: m for m in models}
    excluded = frozenset(
        frozenset((m.model_id, o)) for m in models for o in m.colocation_excludes if o != m.model_id
    )
    partners = problem_module.exclusion_partners(excluded)
    rules = problem_build._PairRules()
    candidates: list[tuple[tuple[str, str], Candidate]] = []
    refusals: list[tuple[tuple[str, str], list[str]]] = []
    for host in sorted(snap.hosts, key=lambda h: h.host_id):
        budget = problem_module.host_budget(host, snap, profiles)
        residencies = {r.model_id: r for r in host.residencies}
        for model in models:
            key = (model.model_id, host.host_id)
            if targets[model.model_id].desired == 0:
                refusals.append((key, ["not_desired"]))
                continue
            if budget.refusals:
                refusals.append((key, list(budget.refusals)))
                continue
            cand, why = problem_build._pair(
                model,
                host,
                budget,
                partners.get(model.model_id, frozenset()),
                residencies.get(model.model_id),
                rules,
                problem_build._signature(host),
            )
            if cand is None:
                refusals.append((key, why))
            else:
                candidates.append((key, cand))
    return candidates, refusals


def _assert_same_build(snap: FleetSnapshot) -> PlacementProblem:
    problem = build_problem(snap)
    candidates, refusals = _per_pair_build(snap)
    assert list(problem.candidates.items()) == candidates  # order included
    assert list(problem.refusals.items()) == refusals
    assert len(problem.refusals) == len(refusals)
    for key, why in refusals[:50]:
        assert key in problem.refusals and problem.refusals[key] == why
        assert key not in problem.candidates
    by_model: dict[str, list[Candidate]] = {}
    by_host: dict[str, list[Candidate]] = {}
    for _key, cand in candidates:
        by_model.setdefault(cand.model_id, []).append(cand)
        by_host.setdefault(cand.host_id, []).append(cand)
    for m in problem.models:
        assert problem.candidates_of_model(m.model_id) == by_model.get(m.model_id, [])
    for h in problem.hosts:
        assert problem.candidates_of_host(h.host_id) == by_host.get(h.host_id, [])
    for model_id, host_id in list(problem.candidates)[:50]:
        assert problem.refusals.of_model(model_id) == sorted(
            (h, why) for (m, h), why in refusals if m == model_id
        )
        assert (model_id, host_id) not in problem.refusals
    return problem


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=10**6))
def test_per_shape_build_equals_the_per_pair_build(seed: int) -> None:
    _assert_same_build(_mutated_production(seed))


def test_per_shape_build_equals_the_per_pair_build_on_generated_fleets() -> None:
    for snap in (generate_fleet(64, 24, 3), _mutated_production(11, hosts=300, models=30)):
        _assert_same_build(snap)


def _types_by_host(problem: PlacementProblem) -> set[tuple[str, ...]]:
    """Hosts grouped by their own budgets and full candidate signature with quality."""
    quality = quality_scores(problem)
    spread = any(m.min_failure_domains > 1 for m in problem.models)
    groups: dict[object, list[str]] = {}
    for b in problem.hosts:
        cands = problem.candidates_of_host(b.host_id)
        if not cands:
            continue
        if b.live_models or b.fixed_models:
            groups[b.host_id] = [b.host_id]
            continue
        signature = (
            (b.allocatable_mb, b.headroom_mb, b.slot_limit, b.desired_cap, b.new_cap),
            (b.disk_free_mb, b.domain if spread else ""),
            tuple(
                (c.model_id, c.runtime, c.memory_mb, c.new_mb, c.disk_mb, c.cached, c.pinned, q)
                for c, q in sorted((c, quality[(c.model_id, c.host_id)]) for c in cands)
            ),
        )
        groups.setdefault(signature, []).append(b.host_id)
    return {tuple(sorted(hs)) for hs in groups.values()}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=10**6))
def test_host_types_from_build_shapes_equal_the_per_host_grouping(seed: int) -> None:
    problem = build_problem(_mutated_production(seed))
    assert {t.host_ids for t in host_types(problem)} == _types_by_host(problem)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=10**6))
def test_candidate_order_and_model_scores_equal_the_restated_sort(seed: int) -> None:
    problem = build_problem(_mutated_production(seed))
    scores = quality_scores(problem)
    order = CandidateOrder(problem, scores)
    for m in problem.models:
        cands = problem.candidates_of_model(m.model_id)
        assert model_scores(problem, cands) == [scores[(c.model_id, c.host_id)] for c in cands]
        expected = sorted(cands, key=lambda c: (-scores[(c.model_id, c.host_id)], c.host_id))
        assert order.sorted[m.model_id] == expected
        assert order.sorted_scores[m.model_id] == [
            scores[(c.model_id, c.host_id)] for c in expected
        ]


def test_gc_paused_restores_the_collector_and_nests() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves the outer pause alone
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a collector the caller disabled stays disabled
    finally:
        gc.enable()


def test_distinct_candidates_count_one_host_per_build_shape() -> None:
    plain = build_problem(parse_snapshot(production_document(120, 12, 5)))
    for problem in (plain, build_problem(_mutated_production(5, hosts=120, models=12))):
        shapes: dict[str, int] = problem.memo["build_shapes"]  # type: ignore[assignment]
        # by hand: every candidate of a host outside the shapes, one host's per shape
        first: dict[int, str] = {}
        for host_id in sorted(shapes):
            first.setdefault(shapes[host_id], host_id)
        outside = sum(1 for c in problem.candidates.values() if c.host_id not in shapes)
        per_shape = sum(len(problem.candidates_of_host(h)) for h in first.values())
        assert problem.distinct_candidates == outside + per_shape
    # six machine shapes, no residencies: one host's candidates per shape
    assert plain.distinct_candidates * 10 < len(plain.candidates)


def test_quality_table_keys_reused_or_rebuilt_agree() -> None:
    snap = _mutated_production(9, hosts=80, models=12)
    reused = quality_scores(build_problem(snap))  # keys of `problem.candidates`
    problem = build_problem(snap)
    problem.memo.pop("host_major")  # as for a problem whose candidates are in any order
    rebuilt = quality_scores(problem)
    assert list(reused.items()) == list(rebuilt.items())
    assert list(reused) == list(problem.candidates)
