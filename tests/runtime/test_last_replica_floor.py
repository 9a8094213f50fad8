"""Last-replica floor (spec invariants 3 and 5): a cleanup never takes the last serving replica
of a model the plan still wants but leaves short; only a planner-staged preemption may.

Regression for the scenario lab's `last_replica_drained` finding (`grid test scenario
--machines 2 --seed 42 --strategy greedy`, minute 48): mac-01 was throttled, the plan wanted two
replicas of general-14b but placed none (insufficient_capacity), and cleanup drained its only
READY replica as "no longer in the plan". Every case below is a hand-worked fleet; the expected
outcome is counted by hand from the rule, not from the reconciler's own helpers.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grid.fleet.actions import ActionKind, ReconcileResult
from grid.fleet.models import Plan
from grid.runtime.reconcile import reconcile
from tests.runtime.builders import host, model, plan, record, res, snapshot

pytestmark = pytest.mark.unit

DRAIN = ActionKind.DRAIN


def _wants(p: Plan, **desired: int) -> Plan:
    return p.model_copy(update={"desired_replicas": desired})


def _drained(result: ReconcileResult, model_id: str = "m") -> set[str]:
    return {a.host_id for a in result.actions if a.kind is DRAIN and a.model_id == model_id}


def test_unplaced_model_keeps_its_only_ready_replica() -> None:
    # h1 holds m's only replica; the plan wants 1 but places none (capacity shortfall).
    snap = snapshot([host("h1", 12000, residencies=[res("m")])], [model("m")])
    result = reconcile(_wants(plan(), m=1), snap, mode="automatic")
    assert result.actions == []
    deferral = result.deferral(DRAIN, "h1", "m")
    assert deferral is not None and deferral.code == "last_replica_floor"
    assert deferral.message


def test_the_lab_tick_two_wanted_none_placed_on_a_throttled_host() -> None:
    # The lab's minute 48 in miniature: a throttled host still admits, both wanted replicas
    # are unplaced, another model keeps its placement on the same host.
    snap = snapshot(
        [host("h1", 16000, state="throttled", residencies=[res("m", memory_mb=12000), res("s")])],
        [model("m", 12000), model("s")],
    )
    result = reconcile(_wants(plan(("s", "h1")), m=2, s=1), snap, mode="automatic")
    assert _drained(result) == set()
    deferral = result.deferral(DRAIN, "h1", "m")
    assert deferral is not None and deferral.code == "last_replica_floor"


def test_a_staged_preemption_for_a_higher_priority_model_may_take_it() -> None:
    snap = snapshot(
        [host("h1", 12000, residencies=[res("m")])], [model("m"), model("vip", 8000, priority=90)]
    )
    staged = _wants(plan(preemptions=[("m", "h1", "vip")]), m=1, vip=1)
    result = reconcile(staged, snap, mode="automatic")
    assert _drained(result) == {"h1"}
    assert all(a.preemption for a in result.actions if a.kind is DRAIN)


def test_another_serving_replica_lets_the_surplus_one_go() -> None:
    # Wants 2, places only h2 (READY): h1 may drain, h2 still serves.
    snap = snapshot(
        [host("h1", 12000, residencies=[res("m")]), host("h2", 12000, residencies=[res("m")])],
        [model("m")],
    )
    result = reconcile(_wants(plan(("m", "h2")), m=2), snap, mode="automatic")
    assert _drained(result) == {"h1"}


def test_a_model_the_plan_no_longer_wants_is_cleaned_up() -> None:
    snap = snapshot([host("h1", 12000, residencies=[res("m")])], [model("m")])
    result = reconcile(_wants(plan(), m=0), snap, mode="automatic")
    assert _drained(result) == {"h1"}


def test_a_fully_placed_in_place_replacement_is_not_held() -> None:
    # Other revision on h1, the plan places m on h1 (placed == wanted): the floor is silent.
    snap = snapshot(
        [host("h1", 12000, residencies=[res("m", artifact_sha256="0" * 64)])],
        [model("m", artifact_sha256="1" * 64)],
    )
    result = reconcile(_wants(plan(("m", "h1")), m=1), snap, mode="automatic")
    deferral = result.deferral(DRAIN, "h1", "m")
    assert deferral is None or deferral.code != "last_replica_floor"


def test_an_open_drain_of_the_last_replica_is_withdrawn_when_the_plan_falls_short() -> None:
    snap = snapshot([host("h1", 12000, residencies=[res("m")])], [model("m")])
    pending = record("drain", "h1", "m", "pending")
    result = reconcile(_wants(plan(), m=1), snap, [pending], mode="automatic")
    assert _drained(result) == set()
    assert [w.action_id for w in result.withdrawn] == [pending.action_id]


@settings(max_examples=40, deadline=None)
@given(
    ready=st.lists(st.booleans(), min_size=3, max_size=3),
    placed=st.lists(st.booleans(), min_size=3, max_size=3),
    wanted=st.integers(min_value=0, max_value=4),
)
@example(ready=[True, False, False], placed=[False, False, False], wanted=1)  # the lab's tick
@example(ready=[True, True, False], placed=[False, False, True], wanted=2)
def test_cleanup_never_leaves_a_short_model_without_a_serving_replica(
    ready: list[bool], placed: list[bool], wanted: int
) -> None:
    hosts = [host(f"h{i}", 12000, residencies=[res("m")] if ready[i] else []) for i in range(3)]
    chosen = [(("m", f"h{i}")) for i in range(3) if placed[i]]
    target = _wants(plan(*chosen), m=wanted)
    result = reconcile(target, snapshot(hosts, [model("m", max_replicas=3)]), mode="automatic")
    serving_before = {f"h{i}" for i in range(3) if ready[i]}
    serving_after = serving_before - _drained(result)
    short = wanted >= 1 and len(chosen) < wanted
    if short and serving_before:
        assert serving_after, (ready, placed, wanted, result.actions)
