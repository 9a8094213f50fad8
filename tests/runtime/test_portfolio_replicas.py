"""Portfolio (workload) replicas are speculative work for the reconciler.

A replica the plan wants beyond the model's demand target (what baseline, pins and direct demand
ask for) was added by the portfolio: it runs at `inferred` urgency, behind direct demand, takes
a mutation slot only when one is left, and never takes one from direct work.
"""

from __future__ import annotations

import pytest

from grid.fleet.actions import ActionKind, Urgency
from grid.runtime.reconcile import reconcile
from tests.runtime.builders import host, model, plan, record, snapshot

pytestmark = pytest.mark.unit

WARM = ActionKind.WARM


def _fleet(limit: int):  # type: ignore[no-untyped-def]
    # "port" has no demand entry (target 0): its planned replica is the portfolio's. "real" is
    # directly demanded (one replica). Both are cached, so each needs one WARM.
    return snapshot(
        [host("h1", cached_models=["port"]), host("h2", cached_models=["real"])],
        [model("port"), model("real")],
        demand={"real": {"desired_replicas": 1, "evidence": "direct"}},
        policy={"max_concurrent_mutations": limit},
    )


def test_portfolio_replica_waits_behind_direct_demand() -> None:
    # One mutation slot. By id and cold start "port" would sort first; by class it is inferred
    # (rank 2) against direct (rank 1), so "real" takes the slot.
    result = reconcile(plan(("port", "h1"), ("real", "h2")), _fleet(1))
    assert [(a.model_id, a.urgency) for a in result.actions] == [("real", Urgency.DIRECT)]
    deferral = result.deferral(WARM, "h1", "port")
    assert deferral is not None and deferral.code == "governor_global_limit"


def test_portfolio_replica_runs_as_inferred_when_a_slot_is_left() -> None:
    result = reconcile(plan(("port", "h1"), ("real", "h2")), _fleet(2))
    urgency = {a.model_id: a.urgency for a in result.actions}
    assert urgency == {"real": Urgency.DIRECT, "port": Urgency.INFERRED}


def test_direct_demand_withdraws_an_undelivered_portfolio_warm() -> None:
    queued = record("warm", "h1", "port", "pending", urgency="inferred")
    result = reconcile(plan(("port", "h1"), ("real", "h2")), _fleet(1), [queued])
    assert [(w.action_id, w.code) for w in result.withdrawn] == [
        (queued.action_id, "yield_to_higher_class")
    ]
    assert [a.model_id for a in result.actions] == ["real"]


def test_portfolio_replica_never_takes_the_slot_of_direct_work() -> None:
    # The direct warm is queued (undelivered) and holds the only slot: the portfolio's replica
    # is strictly lower class and cannot withdraw it; it waits.
    queued = record("warm", "h2", "real", "pending", urgency="direct")
    result = reconcile(plan(("port", "h1"), ("real", "h2")), _fleet(1), [queued])
    assert result.withdrawn == []
    deferral = result.deferral(WARM, "h1", "port")
    assert deferral is not None and deferral.code == "governor_global_limit"


def test_replica_within_the_demand_target_keeps_direct_urgency() -> None:
    # "real" asks for two replicas: both rounds are direct, none is demoted.
    snap = snapshot(
        [host("h1", cached_models=["real"]), host("h2", cached_models=["real"])],
        [model("real", max_replicas=2)],
        demand={"real": {"desired_replicas": 2, "evidence": "direct"}},
    )
    result = reconcile(plan(("real", "h1"), ("real", "h2")), snap)
    assert [a.urgency for a in result.actions] == [Urgency.DIRECT, Urgency.DIRECT]
