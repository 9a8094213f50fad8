"""The portfolio's lexicographic objective and rules on tiny fleets, each worked by hand.

covered > pressure > spare slots > missing replicas > utility > transition; at most one
exploration model; baseline/pinned/direct replicas fixed first and never evicted.
"""

from __future__ import annotations

import pytest

from tests.planner.portfolio.builders import host, model, plan_of, resident, work, wsnapshot
from tests.planner.portfolio.helpers import hosts_of, planned, row

pytestmark = pytest.mark.unit

FULL = {"requests": 20, "successes": 20}  # full service confidence: no bonus left


def test_one_free_slot_goes_to_the_shared_generalist() -> None:
    # h1 holds a baseline model and one free slot: the generalist covers two workloads, each
    # specialist one.
    snap = wsnapshot(
        [host("h1", max_models=2, residencies=[resident("base", 2048)])],
        [
            model("base", 2048, min_replicas=1),
            model("mkt", 2048, workload_scores={"marketing": 1.0}),
            model("sal", 2048, workload_scores={"sales": 1.0}),
            model("gen", 2048, workload_scores={"marketing": 0.7, "sales": 0.7}),
        ],
        {"marketing": work(5, 0.5), "sales": work(5, 0.5)},
    )
    plan, report = planned(snap)
    assert report.mapping == {"marketing": "gen", "sales": "gen"}
    assert hosts_of(plan, "base") == ["h1"]


def test_pressure_decides_which_workload_gets_the_last_slot() -> None:
    snap = wsnapshot(
        [host("h1", max_models=1)],
        [
            model("coder", 2048, workload_scores={"coding": 1.0}),
            model("writer", 2048, workload_scores={"research": 1.0}),
        ],
        {"coding": work(5, 0.9), "research": work(5, 0.4)},
    )
    _plan, report = planned(snap)
    assert report.mapping == {"coding": "coder"}
    r = row(report, "research")
    assert r.state == "deferred" and r.reason.startswith("deferred_under_capacity:")
    assert r.model_id == "writer"


def test_measured_failures_restore_service_before_pressure_counts() -> None:
    # Same slot as above, but research fails a third of its requests (333 against 0): restoring
    # failing service comes before the larger pressure of coding.
    snap = wsnapshot(
        [host("h1", max_models=1)],
        [
            model("coder", 2048, workload_scores={"coding": 1.0}),
            model("writer", 2048, workload_scores={"research": 1.0}),
        ],
        {"coding": work(5, 0.9), "research": work(5, 0.4, failure_rate=0.333)},
    )
    _plan, report = planned(snap)
    assert report.mapping == {"research": "writer"}


@pytest.mark.parametrize(("slots", "expected"), [(3, "gen"), (4, "spec")])
def test_spare_slots_outrank_utility_until_the_reserve_is_kept(slots: int, expected: str) -> None:
    # Reserve 2. With 3 slots two specialists leave 1 free, the generalist 2: the generalist
    # wins. With 4 slots both keep 2 free, and utility prefers the specialists.
    snap = wsnapshot(
        [host("h1", 65536, max_models=slots)],
        [
            model("spec-m", 2048, workload_scores={"marketing": 1.0}),
            model("spec-s", 2048, workload_scores={"sales": 1.0}),
            model("gen", 2048, workload_scores={"marketing": 0.8, "sales": 0.8}),
        ],
        {"marketing": work(5, 0.5), "sales": work(5, 0.5)},
    )
    _plan, report = planned(snap)
    if expected == "gen":
        assert report.mapping == {"marketing": "gen", "sales": "gen"}
    else:
        assert report.mapping == {"marketing": "spec-m", "sales": "spec-s"}


def test_missing_replicas_outrank_utility() -> None:
    # coding asks ⌈1.2·1.5/0.75⌉ = 3 replicas. "big" (score 1.0) fits only one host, "small"
    # (0.6) fits all three: fewer missing replicas beat the better score.
    snap = wsnapshot(
        [host("h1", 16384), host("h2", 8192), host("h3", 8192)],
        [
            model("big", 12288, max_replicas=3, workload_scores={"coding": 1.0}),
            model("small", 2048, max_replicas=3, workload_scores={"coding": 0.6}),
        ],
        {"coding": work(5, 1.5)},
    )
    plan, report = planned(snap)
    assert report.mapping == {"coding": "small"}
    assert hosts_of(plan, "small") == ["h1", "h2", "h3"]


def _explore_fleet(*, with_research: bool) -> tuple[list[dict[str, object]], ...]:
    scores_a = {"coding": 0.9, "research": 0.9} if with_research else {"coding": 0.9}
    # With research, A serves two workloads that ask one replica each: a second host lets it
    # hold both (a model at its replica ceiling would leave one missing, and splitting would
    # win before utility is compared).
    models = [
        model("A", 2048, max_replicas=2 if with_research else 1, workload_scores=scores_a),
        # startup 4 + 4 = 8 s → penalty 2: exploit 88, with the bonus 94 (A: 90 either way)
        model("B", 2048, load_estimate_s=4, warm_estimate_s=4, workload_scores={"coding": 0.9}),
    ]
    if with_research:
        # startup 2 + 2 = 4 s → penalty 1: exploit 89, with the bonus 95
        models.append(
            model(
                "C", 2048, load_estimate_s=2, warm_estimate_s=2, workload_scores={"research": 0.9}
            )
        )
    outcomes = [{"model_id": "A", "workload": w, **FULL} for w in scores_a]
    hosts = [host("h1", 65536, residencies=[resident("A", 2048)])]
    if with_research:
        hosts.append(host("h2", 65536))
    return hosts, models, outcomes


def test_the_bonus_lets_an_equally_suitable_cold_candidate_explore() -> None:
    hosts, models, outcomes = _explore_fleet(with_research=False)
    _plan, report = planned(wsnapshot(hosts, models, {"coding": work(5, 0.5)}, outcomes=outcomes))
    assert report.mapping == {"coding": "B"}
    assert report.exploration_model == "B"


def test_without_the_bonus_nothing_explores() -> None:
    hosts, models, outcomes = _explore_fleet(with_research=False)
    snap = wsnapshot(
        hosts,
        models,
        {"coding": work(5, 0.5)},
        outcomes=outcomes,
        policy={"portfolio": {"exploration_bonus": 0.0}},
    )
    _plan, report = planned(snap)
    assert report.mapping == {"coding": "A"}
    assert report.exploration_model is None


def test_only_one_model_may_explore_at_a_time() -> None:
    # Exploitation-only: both workloads on A. B (+4 on coding) and C (+5 on research) would each
    # explore; the budget of one takes the larger gain: research → C, coding stays on A.
    hosts, models, outcomes = _explore_fleet(with_research=True)
    snap = wsnapshot(
        hosts, models, {"coding": work(5, 0.5), "research": work(5, 0.5)}, outcomes=outcomes
    )
    _plan, report = planned(snap)
    assert report.mapping == {"coding": "A", "research": "C"}
    assert report.exploration_model == "C"


def test_baseline_and_direct_replicas_are_never_evicted_for_a_workload() -> None:
    snap = wsnapshot(
        [host("h1", 16384, residencies=[resident("base", 8192), resident("direct", 4096)])],
        [
            model("base", 8192, min_replicas=1),
            model("direct", 4096),
            model("coder", 8192, workload_scores={"coding": 1.0}),
        ],
        {"coding": work(40, 3.0)},
        demand={"direct": {"offered_concurrency": 0.5, "rpm": 10}},
    )
    plan, report = planned(snap)
    assert hosts_of(plan, "base") == ["h1"] and hosts_of(plan, "direct") == ["h1"]
    assert plan.preemptions == []
    r = row(report, "coding")
    assert r.state == "capacity-contended" and r.reason.startswith("no_headroom:")
    assert "memory" in r.reason


def test_a_pinned_replica_stays_on_its_pin() -> None:
    snap = wsnapshot(
        [host("h1", 16384), host("h2", 16384)],
        [
            model("pinned", 12288, pinned_hosts=["h1"]),
            model("coder", 8192, max_replicas=2, workload_scores={"coding": 1.0}),
        ],
        {"coding": work(40, 1.5)},
    )
    plan, report = planned(snap)
    assert hosts_of(plan, "pinned") == ["h1"]
    assert hosts_of(plan, "coder") == ["h2"]
    r = row(report, "coding")
    assert (r.state, r.desired, r.planned, r.missing) == ("undersupplied", 2, 1, 1)
    short = [u for u in plan.unsatisfied if u.code == "portfolio_undersupplied"]
    assert [(u.model_id, u.missing_replicas) for u in short] == [("coder", 1)]


def test_portfolio_replicas_name_their_workload() -> None:
    snap = wsnapshot(
        [host("h1")],
        [model("gen", 2048, workload_scores={"marketing": 0.8, "sales": 0.9})],
        {"marketing": work(5, 0.3), "sales": work(5, 0.3)},
    )
    plan, _report = planned(snap)
    (a,) = plan.assignments
    assert a.reasons[0] == "workload marketing, sales (portfolio)"
    assert plan.desired_replicas["gen"] == 1  # ⌈0.36/0.75⌉ + ⌈0.36/0.75⌉ = 2, max_replicas 1


def test_same_snapshot_same_portfolio_and_heuristic_engine_uses_the_search() -> None:
    snap = wsnapshot(
        [host("h1", max_models=2), host("h2", max_models=2)],
        [
            model("a", 2048, workload_scores={"coding": 1.0, "research": 0.5}),
            model("b", 2048, workload_scores={"research": 0.9}),
            model("c", 2048, workload_scores={"coding": 0.7, "general": 1.0}),
        ],
        {"coding": work(5, 0.8), "research": work(4, 0.4), "general": work(9, 1.0)},
    )

    def stable(engine: str) -> dict[str, object]:
        report = plan_of(snap, engine).portfolio
        assert report is not None
        doc = report.model_dump(mode="json")
        doc["solver"].pop("wall_ms")
        return doc

    first = stable("cpsat")
    assert first == stable("cpsat")
    assert first["solver"]["engine"] == "cp-sat"
    heuristic = stable("heuristic")
    assert (heuristic["solver"]["engine"], heuristic["solver"]["status"]) == (
        "coordinate-search",
        "HEURISTIC",
    )
    assert heuristic["mapping"] == first["mapping"]
