"""Vacate moves (grid/planner/vacate.py): a whole host freed for a replica that needs one.

Oracles: the independent HiGHS lexicographic MILP (tests/planner/reference.py), the reference
level scorer (reference_staged.level_values), validate.py on the resulting plan, and a
from-scratch vacate (`_vacate_from_scratch` below: every trial rebuilds its ledger from the
placement and scores it with the reference scorer) that the incremental one must equal.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from grid.lab.fleetgen import generate_fleet
from grid.lab.fleetgen_production import generate_production_fleet
from grid.planner.cpsat.ledger import Ledger
from grid.planner.cpsat.scoring import Scorer
from grid.planner.heuristic import heuristic_placement
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem
from grid.planner.vacate import vacate_improve
from grid.planner.validate import violations
from tests.planner.fleets import host, model, snapshot, want
from tests.planner.reference import reference_optimum, reference_plan
from tests.planner.reference_staged import level_values, lexicographic
from tests.planner.strategies import fleets

pytestmark = pytest.mark.property


def _lex(order: list[str], a: dict[str, int], b: dict[str, int]) -> int:
    for name in order:
        if a[name] != b[name]:
            return 1 if a[name] > b[name] else -1
    return 0


def _stuck_fleet():  # type: ignore[no-untyped-def]
    """ "small" (high priority) fits both hosts; "solo" needs a host to itself and only fits
    "big"."""
    return snapshot(
        [host("a-big", 32768, max_models=4), host("b-small", 8192, max_models=4)],
        [
            model("small", 4096, priority=100, min_replicas=1),
            model("solo", 24576, priority=10, min_replicas=1, max_colocated_models=1),
        ],
        {"small": want(1), "solo": want(1)},
    )


def test_an_exclusive_model_gets_a_host_once_its_occupant_moves() -> None:
    # "small" (high priority) fits both hosts; "solo" needs a host to itself and only fits
    # "big". A greedy that puts small on big first leaves solo out; vacating big moves small.
    snap = _stuck_fleet()
    problem = build_problem(snap)
    stuck = {("small", "a-big")}
    improved = vacate_improve(problem, stuck)
    assert improved == {("small", "b-small"), ("solo", "a-big")}
    ref = reference_optimum(problem)
    got = level_values(problem, improved)
    assert {n: got[n] for n in ref.values} == ref.values
    assert [v.code for v in violations(snap, reference_plan(problem, frozenset(improved)))] == []


def test_a_pass_out_of_time_keeps_what_it_had_and_one_with_time_left_moves() -> None:
    # The same stuck fleet: a budget spent before the first model keeps the input placement
    # (the plan stays inside its time limit); a budget that never runs out moves as before.
    snap = _stuck_fleet()
    problem = build_problem(snap)
    stuck = {("small", "a-big")}
    asked: list[int] = []

    def spent() -> bool:
        asked.append(1)
        return True

    assert vacate_improve(problem, stuck, out_of_time=spent) == stuck
    assert asked  # the budget was consulted
    improved = vacate_improve(problem, stuck, out_of_time=lambda: False)
    assert improved == {("small", "b-small"), ("solo", "a-big")}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_vacate_never_worsens_the_replica_levels_and_stays_valid(snap) -> None:  # type: ignore[no-untyped-def]
    problem = build_problem(snap)
    greedy = heuristic_placement(problem)
    improved = vacate_improve(problem, greedy)
    order = list(reference_optimum(problem).values)
    before, after = level_values(problem, greedy), level_values(problem, improved)
    assert _lex(order, after, before) >= 0
    plan = reference_plan(problem, frozenset(improved))
    assert [v.code for v in violations(snap, plan)] == []


Key = tuple[str, str]


def _vacate_from_scratch(
    problem: PlacementProblem, placed: set[Key], order: list[str], trials_max: int = 96
) -> set[Key]:
    """The rule of vacate.py's docstring, recomputing everything for every trial: two
    one-step passes, then two passes of chain moves (MAX_CHAIN_TRIALS = 96 each), the second
    round by round."""
    best = set(placed)
    best_values = level_values(problem, best)
    for goal, chain in (
        ("baseline", False),
        ("desired", False),
        ("baseline", True),
        ("desired", True),
    ):
        trials = 0
        for model_id, wanted in _asks(problem, goal, chain):
            hosts = sorted(_new_hosts(problem, best, model_id), key=_by_load(best))[:16]
            for host_id in hosts:
                if trials >= trials_max or _have(problem, best, model_id) >= wanted:
                    break
                trials += 1
                evicted = sorted(k for k in best if k[1] == host_id)
                ledger = Ledger(problem, [k for k in best if k[1] != host_id])
                if ledger.blockers((model_id, host_id)):
                    continue
                ledger.add((model_id, host_id))
                for m, _h in evicted:
                    if not _fit_first(problem, ledger, m, {host_id}) and chain:
                        ledger = _chain_from_scratch(problem, ledger, m, host_id) or ledger
                values = level_values(problem, ledger.placed)
                if lexicographic(order, values, best_values) > 0:
                    best, best_values = set(ledger.placed), values
    return best


def _asks(problem: PlacementProblem, goal: str, chain: bool) -> list[tuple[str, int]]:
    """What each trial asks for, in order: max(1, baseline) of every model, then its desired
    count; the chain pass of the desired goal asks round by round (k = 2, 3, ...) for the
    k-th replica of every model that wants at least k."""
    ids = [prof.model_id for prof in problem.models]
    want = {m: problem.targets[m] for m in ids}
    if goal == "baseline":
        return [(m, max(1, want[m].baseline)) for m in ids]
    if not chain:
        return [(m, want[m].desired) for m in ids]
    rounds = range(2, 1 + max((t.desired for t in want.values()), default=0))
    return [(m, k) for k in rounds for m in ids if want[m].desired >= k]


def _new_hosts(problem: PlacementProblem, placed: set[Key], model_id: str) -> list[str]:
    """Hosts a move may empty for the model: a new candidate there, the model not placed
    there yet, no live residency on the host, the footprint within its new-memory budget."""
    out = []
    for cand in problem.candidates_of_model(model_id):
        budget = problem.host_by_id[cand.host_id]
        if (model_id, cand.host_id) in placed or budget.live_models or not cand.is_new:
            continue
        if cand.memory_mb <= budget.new_budget_mb:
            out.append(cand.host_id)
    return out


def _by_load(placed: set[Key]):  # type: ignore[no-untyped-def]
    return lambda h: (sum(1 for k in placed if k[1] == h), h)


def _fit_first(problem: PlacementProblem, ledger: Ledger, model_id: str, skip: set[str]) -> bool:
    for cand in problem.candidates_of_model(model_id):
        key = (model_id, cand.host_id)
        if cand.host_id not in skip and key not in ledger.placed and not ledger.blockers(key):
            ledger.add(key)
            return True
    return False


def _chain_from_scratch(
    problem: PlacementProblem, ledger: Ledger, model_id: str, freed: str
) -> Ledger | None:
    """The chain step: the model's own incumbent hosts first, then the hosts a one-step move
    may empty, fewest placements first, at most 8; taken when every occupant fits elsewhere."""
    placed = set(ledger.placed)
    own = [
        c.host_id
        for c in problem.candidates_of_model(model_id)
        if not c.is_new and (model_id, c.host_id) not in placed
    ]
    ranked = [(0, h) for h in own] + [(1, h) for h in _new_hosts(problem, placed, model_id)]
    ranked = [t for t in ranked if t[1] != freed]
    ranked.sort(key=lambda t: (t[0], *_by_load(placed)(t[1])))
    for _kind, host_id in ranked[:8]:
        evicted = sorted(k for k in placed if k[1] == host_id)
        trial = Ledger(problem, placed - set(evicted))
        if trial.blockers((model_id, host_id)):
            continue
        trial.add((model_id, host_id))
        if all(_fit_first(problem, trial, m, {host_id, freed}) for m, _h in evicted):
            return trial
    return None


def _have(problem: PlacementProblem, placed: set[Key], model_id: str) -> int:
    mine = sum(1 for key in placed if key[0] == model_id)
    return mine + sum(1 for f in problem.fixed if f.model_id == model_id)


@pytest.mark.parametrize(
    "snap",
    [generate_fleet(256, 96, 7), generate_production_fleet(256, 60, 7)],
    ids=["mixed-256", "production-256"],
)
def test_incremental_vacate_equals_the_from_scratch_rule_on_generated_fleets(snap) -> None:  # type: ignore[no-untyped-def]
    problem = build_problem(snap)
    greedy = heuristic_placement(problem)
    order = list(level_values(problem, set()))  # the replica levels, most important first
    improved = vacate_improve(problem, greedy)
    assert improved == _vacate_from_scratch(problem, greedy, order)
    plan = reference_plan(problem, frozenset(improved))
    assert [v.code for v in violations(snap, plan)] == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_replica_score_equals_the_reference_scorer_on_the_replica_levels(snap) -> None:  # type: ignore[no-untyped-def]
    problem = build_problem(snap)
    placed = heuristic_placement(problem)
    got = Scorer(problem).replica_score(placed)
    ref = level_values(problem, placed)
    assert got == {n: ref[n] for n in got}
    assert set(reference_optimum(problem).values) <= set(got)
