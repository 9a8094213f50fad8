"""Which engine decides: CP-SAT within the budget, the coordinate search after it."""

from __future__ import annotations

import pytest

from grid.planner.portfolio import build_context, coordinate_search, decide
from grid.planner.portfolio.solve import solve_portfolio
from tests.planner.portfolio.builders import host, model, plan_of, work, wsnapshot

pytestmark = pytest.mark.unit


def _ctx():  # type: ignore[no-untyped-def]
    snap = wsnapshot(
        [host("h1", max_models=1), host("h2", max_models=1)],
        [
            model("a", 2048, workload_scores={"coding": 1.0}),
            model("b", 2048, workload_scores={"research": 1.0, "coding": 0.4}),
        ],
        {"coding": work(5, 0.5), "research": work(5, 0.4)},
    )
    return build_context(snap, plan_of(snap.model_copy(update={"workloads": {}})))


def test_cpsat_decides_within_the_budget() -> None:
    mapping, _placement, _exploit, solver = decide(_ctx(), engine="cpsat")
    assert (solver.engine, solver.status) == ("cp-sat", "OPTIMAL")
    # Both maps cover both workloads at the same pressure; b alone keeps one of the two slots
    # free (spare_slots 1 against 0), which outranks a's better coding score.
    assert mapping == {"coding": "b", "research": "b"}
    assert [lv.level for lv in solver.objective] == [
        "covered",
        "failures",
        "pressure",
        "spare_slots",
        "missing",
        "utility",
        "transition",
        "quality",
    ]


def test_no_budget_left_means_the_coordinate_search_decides() -> None:
    ctx = _ctx()
    mapping, placement, _exploit, solver = decide(ctx, engine="cpsat", budget_s=0.0)
    assert (solver.engine, solver.status) == ("coordinate-search", "COORDINATE_SEARCH_FALLBACK")
    assert solver.message.startswith("no time left for CP-SAT")
    search = coordinate_search(ctx)
    assert (mapping, placement) == (search.mapping, search.placement)
    assert search.evaluated <= ctx.policy.max_portfolios


def test_a_zero_budget_cpsat_run_returns_nothing() -> None:
    ctx = _ctx()
    search = coordinate_search(ctx)
    assert (
        solve_portfolio(
            ctx, hint_mapping=search.mapping, hint_placement=search.placement, time_limit_s=0.0
        )
        is None
    )


def test_the_search_respects_its_portfolio_budget() -> None:
    ctx = _ctx()
    ctx.policy = ctx.policy.model_copy(update={"max_portfolios": 2})
    result = coordinate_search(ctx)
    assert result.evaluated <= 2


def test_the_search_consolidates_onto_shared_models_across_a_local_optimum() -> None:
    # Three slots, five workloads. One workload at a time cannot leave the specialists (each
    # single change keeps five models asked for three slots); the subset move puts marketing and
    # sales on gen, research and coding on code2, embedding on emb: all five covered.
    words = ["marketing", "sales", "research", "coding", "embedding"]
    snap = wsnapshot(
        [host("h1", 65536, max_models=3)],
        [
            model("mkt", 2048, workload_scores={"marketing": 1.0}),
            model("sal", 2048, workload_scores={"sales": 1.0}),
            model("res", 2048, workload_scores={"research": 1.0}),
            model("cod", 2048, workload_scores={"coding": 1.0}),
            model("emb", 2048, workload_scores={"embedding": 1.0}),
            model("gen", 2048, workload_scores={"marketing": 0.8, "sales": 0.8}),
            model("code2", 2048, workload_scores={"research": 0.8, "coding": 0.8}),
        ],
        {w: work(5, 0.5) for w in words},
    )
    ctx = build_context(snap, plan_of(snap.model_copy(update={"workloads": {}})))
    expected = {
        "marketing": "gen",
        "sales": "gen",
        "research": "code2",
        "coding": "code2",
        "embedding": "emb",
    }
    assert coordinate_search(ctx).mapping == expected
    report = plan_of(snap).portfolio
    assert report is not None and report.mapping == expected
