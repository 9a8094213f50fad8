"""The controller loop on a fake clock: modes, convergence, delivery, restart and grace."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid.demand import Observation
from grid.fleet.actions import RecordStatus
from grid.fleet.errors import GridError
from grid.runtime.controller.core import Controller
from grid.runtime.controller.lease import LeaseFile
from grid.runtime.controller.status import status_document
from grid.runtime.controller.store import MemoryStore
from tests.runtime.controller.harness import FAST, T0, Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit


def two_hosts(tmp_path: Path, **kw: object) -> Fleet:
    fleet = Fleet(tmp_path, [FakeNode("h1"), FakeNode("h2")], **kw)  # type: ignore[arg-type]
    fleet.register_all()
    return fleet


def test_automatic_mode_converges_and_then_stays_quiet(tmp_path: Path) -> None:
    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(min_replicas=2, max_replicas=2), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    assert fleet.ready_hosts("m") == ["h1", "h2"]
    kinds = sorted(c["kind"] for c in fleet.delivered)
    assert kinds == ["load", "load", "warm", "warm"]
    assert fleet.step() == [] and fleet.ctl.book.open_records() == []
    ids = [c["action_id"] for c in fleet.delivered]
    assert len(ids) == len(set(ids))  # nothing delivered twice


def test_recommend_proposes_without_delivering_and_observe_only_records_drift(
    tmp_path: Path,
) -> None:
    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(min_replicas=1), fleet.now)
    assert fleet.step() == []
    proposed = fleet.ctl.proposed
    assert [a.kind.value for a in proposed] == ["load", "warm"]
    assert not any(a.executable for a in proposed)
    fleet.ctl.set_mode("observe", fleet.now)
    assert fleet.step() == [] and fleet.ctl.proposed == []
    assert {d.code for d in fleet.ctl.last_deferred} == {"observe_mode"}


def test_automatic_is_refused_without_durable_state() -> None:
    ctl = Controller(MemoryStore(), now=T0, config=FAST)
    with pytest.raises(GridError) as err:
        ctl.set_mode("automatic", T0)
    assert err.value.code == "automatic_refused" and ctl.mode.value == "recommend"


def test_automatic_is_refused_while_another_controller_holds_the_lease(tmp_path: Path) -> None:
    other = LeaseFile(tmp_path / "state.json.lease", controller_id="other")
    assert other.acquire(T0).granted
    fleet = two_hosts(tmp_path)
    with pytest.raises(GridError) as err:
        fleet.ctl.set_mode("automatic", fleet.now)
    assert err.value.code == "lease_held" and fleet.ctl.mode.value == "recommend"


def test_availability_commands_wait_for_a_tick_at_the_poll_revision(tmp_path: Path) -> None:
    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(min_replicas=2, max_replicas=2), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.ctl.tick(fleet.now)
    assert len(fleet.ctl.book.open_records()) == 4
    later = fleet.ctl.request_tick()
    assert fleet.ctl.poll_commands("h1", later, fleet.now).commands == []
    fleet.ctl.tick(fleet.now)
    got = fleet.ctl.poll_commands("h1", later, fleet.now).commands
    assert [c["kind"] for c in got] == ["load", "warm"]
    assert got[1]["dependencies"] == [got[0]["action_id"]]
    assert fleet.ctl.poll_commands("h1", later, fleet.now).commands == []  # exactly once


def test_leaving_automatic_withdraws_only_undelivered_commands(tmp_path: Path) -> None:
    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(min_replicas=2, max_replicas=2), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.ctl.tick(fleet.now)
    taken = fleet.ctl.poll_commands("h1", fleet.ctl.success_revision, fleet.now).commands
    result = fleet.ctl.set_mode("recommend", fleet.now)
    records = fleet.ctl.book.records
    assert len(result["withdrawn"]) == 2
    assert all(records[i].status is RecordStatus.WITHDRAWN for i in result["withdrawn"])
    assert all(records[c["action_id"]].status is RecordStatus.DELIVERED for c in taken)


def test_acknowledgements_are_idempotent_and_host_scoped(tmp_path: Path) -> None:
    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(min_replicas=2, max_replicas=2), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.ctl.tick(fleet.now)
    load = fleet.ctl.poll_commands("h1", fleet.ctl.success_revision, fleet.now).commands[0]
    h1, h2 = fleet.nodes["h1"], fleet.nodes["h2"]
    ok = {
        "action_id": load["action_id"],
        "status": "succeeded",
        "duration_seconds": 3.0,
        "artifact_fetched": True,
    }
    failed = {**ok, "status": "failed"}

    def send(node: FakeNode, ack: dict[str, object]) -> str:
        from grid.runtime.controller.wire import NodeUpdate

        body = node.heartbeat([ack], request_commands=False)
        reply = fleet.ctl.node_update(
            node.node_id, node.host_id, NodeUpdate.model_validate(body), fleet.now
        )
        return reply.acknowledgements[0].result.value

    assert send(h2, ok) == "wrong_host"
    assert fleet.ctl.book.records[load["action_id"]].status is RecordStatus.DELIVERED
    assert send(h1, ok) == "applied"
    assert send(h1, ok) == "duplicate"
    assert send(h1, failed) == "conflict_ignored"
    assert fleet.ctl.book.records[load["action_id"]].status is RecordStatus.SUCCEEDED
    assert send(h1, {**ok, "action_id": "load-unknown"}) == "unknown_action"
    assert send(h1, {**ok, "status": "exploded"}) == "invalid_status"
    learned = fleet.ctl.timings.summary(fleet.now)
    assert [(t["phase"], t["host_id"], t["mean_s"]) for t in learned] == [("load", "h1", 3.0)]


def test_late_success_after_withdrawal_is_recorded(tmp_path: Path) -> None:
    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(min_replicas=1), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.ctl.tick(fleet.now)
    (record, *_rest) = fleet.ctl.book.open_records()
    fleet.ctl.set_mode("recommend", fleet.now)
    assert fleet.ctl.book.records[record.action_id].status is RecordStatus.WITHDRAWN
    from grid.runtime.controller.wire import NodeUpdate

    node = fleet.nodes[record.host_id]
    body = node.heartbeat([{"action_id": record.action_id, "status": "succeeded"}])
    reply = fleet.ctl.node_update(
        node.node_id, node.host_id, NodeUpdate.model_validate(body), fleet.now
    )
    assert reply.acknowledgements[0].result.value == "applied"
    assert fleet.ctl.book.records[record.action_id].status is RecordStatus.SUCCEEDED


def test_identical_heartbeats_advance_dirty_but_not_safety(tmp_path: Path) -> None:
    fleet = two_hosts(tmp_path)
    node = fleet.nodes["h1"]
    safety = fleet.ctl.safety_revision
    dirty = fleet.update(node, node.heartbeat())
    assert fleet.update(node, node.heartbeat()) == dirty + 1
    assert fleet.ctl.safety_revision == safety
    node.state = "paused"
    fleet.update(node, node.heartbeat())
    assert fleet.ctl.safety_revision == safety + 1


def test_restart_restores_state_and_never_redelivers(tmp_path: Path) -> None:
    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(min_replicas=2, max_replicas=2), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.ctl.tick(fleet.now)
    taken = fleet.ctl.poll_commands("h1", fleet.ctl.success_revision, fleet.now).commands
    assert {c["controller_term"] for c in taken} == {1}
    # The process dies without releasing its lease; a new one starts after it expired.
    fleet.now += FAST.lease_ttl_s + 1
    ctl = fleet.start("ctl-b")
    assert ctl.restored and ctl.mode.value == "automatic" and "m" in ctl.profiles
    fleet.register_all()
    fleet.step(execute=False)
    second = [c for c in fleet.delivered if c["node_id"] == "h2"]
    assert [c["kind"] for c in second] == ["load", "warm"]
    assert {c["controller_term"] for c in second} == {2}
    assert all(c["node_id"] != "h1" for c in fleet.delivered)  # h1's were delivered already
    # Each node runs what it holds: h1 its term-1 commands (taken before it saw term 2).
    for host_id, commands in (("h1", taken), ("h2", second)):
        for command in commands:
            ack = fleet.nodes[host_id].execute(command, now=fleet.now)
            assert ack is not None
            fleet.acks[host_id].append(ack)
    fleet.settle()
    assert fleet.ready_hosts("m") == ["h1", "h2"]


def test_stale_lower_term_command_is_refused_by_the_node_fence(tmp_path: Path) -> None:
    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(min_replicas=2, max_replicas=2), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.ctl.tick(fleet.now)
    old = fleet.ctl.poll_commands("h2", fleet.ctl.success_revision, fleet.now).commands
    fleet.now += FAST.lease_ttl_s + 1
    fleet.start("ctl-b")
    fleet.register_all()
    fleet.step()  # h1's commands arrive with term 2 and are accepted
    node = fleet.nodes["h1"]
    assert node.fence.highest_term == 2
    stale = {**old[0], "node_id": "h1", "action_id": "stale-copy"}
    assert node.execute(stale, now=fleet.now) is None
    assert node.refused == ["stale-copy"]


def scale_down_fleet(tmp_path: Path) -> Fleet:
    fleet = two_hosts(tmp_path)
    body = profile(min_replicas=2, max_replicas=2, scale_down_cooldown_s=0.0)
    fleet.ctl.put_profile("m", body, fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    assert fleet.ready_hosts("m") == ["h1", "h2"]
    return fleet


def test_membership_grace_defers_destructive_work_after_restart(tmp_path: Path) -> None:
    fleet = scale_down_fleet(tmp_path)
    fleet.now += FAST.lease_ttl_s + 1
    ctl = fleet.start("ctl-b")
    fleet.register_all()
    ctl.put_profile(
        "m", profile(min_replicas=1, max_replicas=1, scale_down_cooldown_s=0.0), fleet.now
    )
    fleet.step()
    assert fleet.delivered[-1]["kind"] == "warm"  # nothing destructive was delivered
    assert any(d.code == "membership_grace" for d in ctl.last_deferred)
    assert ctl.in_grace(fleet.now)
    for _ in range(6):
        fleet.step()
    assert not ctl.in_grace(fleet.now)
    assert [c["kind"] for c in fleet.delivered[-2:]] == ["drain", "unload"]
    assert len(fleet.ready_hosts("m")) == 1


def test_grace_anchor_is_rebased_when_the_clock_moves_back(tmp_path: Path) -> None:
    fleet = scale_down_fleet(tmp_path)
    fleet.now += FAST.lease_ttl_s + 1
    ctl = fleet.start("ctl-b")
    ctl.tick(fleet.now)
    assert ctl.grace_anchor == fleet.now
    ctl.tick(fleet.now - 3600)
    assert ctl.grace_anchor == fleet.now - 3600
    assert not ctl.in_grace(fleet.now - 3600 + FAST.membership_grace_s)


def test_destructive_batch_is_held_when_the_replacement_route_lease_is_short(
    tmp_path: Path,
) -> None:
    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=1), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    (old,) = fleet.ready_hosts("m")
    new = "h2" if old == "h1" else "h1"
    fleet.ctl.put_profile(
        "m",
        profile(min_replicas=1, max_replicas=1, denied_hosts=[old], scale_down_cooldown_s=0.0),
        fleet.now,
    )
    fleet.step()  # the replacement loads and warms on the other host
    assert fleet.poll(fleet.nodes[new]).commands == []  # its receipts and READY heartbeat
    assert fleet.ready_hosts("m") == sorted([old, new])
    # Only the old host polls now; the replacement's last heartbeat is 35 s old (lease 60 s).
    fleet.now += 35
    delivery = fleet.poll(fleet.nodes[old])
    assert delivery.commands == [] and len(delivery.held) == 1
    held = fleet.ctl.book.records[delivery.held[0]]
    assert held.kind.value == "drain" and held.status is RecordStatus.PENDING
    assert held.delivered_at is None
    assert "lease left" in (fleet.ctl.delivery_safety_error or {})["message"]
    # A fresh replacement heartbeat lets the drain through.
    fleet.poll(fleet.nodes[new])
    assert [c["kind"] for c in fleet.poll(fleet.nodes[old]).commands] == ["drain"]


def test_removing_a_profile_tombstones_it_and_cancels_pending_availability(
    tmp_path: Path,
) -> None:
    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(min_replicas=1), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.ctl.tick(fleet.now)
    pending = [r.action_id for r in fleet.ctl.book.open_records()]
    fleet.ctl.observe(
        [Observation(model_id="m", timestamp=fleet.now, service_time_s=1.0)], fleet.now
    )
    fleet.ctl.remove_profile("m", fleet.now)
    assert fleet.ctl.tracker.footprint().series == 0
    fleet.ctl.tick(fleet.now)
    assert all(fleet.ctl.book.records[i].status is RecordStatus.WITHDRAWN for i in pending)
    doc = status_document(fleet.ctl, fleet.now).model_dump(mode="json")
    assert [t["model_id"] for t in doc["tombstones"]] == ["m"]
    with pytest.raises(GridError) as err:
        fleet.ctl.remove_profile("m", fleet.now)
    assert err.value.code == "unknown_model"
    fleet.ctl.put_profile("m", profile(), fleet.now)
    assert fleet.ctl.tombstones == {}


def test_observations_create_demand_only_for_configured_models(tmp_path: Path) -> None:
    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(max_replicas=2), fleet.now)
    obs = [
        Observation(model_id=name, timestamp=fleet.now - i, service_time_s=30.0)
        for i in range(20)
        for name in ("m", "stranger")
    ]
    assert fleet.ctl.observe(obs, fleet.now) == {"accepted": 20, "ignored": 20}
    snap = fleet.ctl.snapshot(fleet.now)
    assert set(snap.demand) == {"m"} and snap.demand["m"].offered_concurrency > 0
    fleet.ctl.tick(fleet.now)
    plan = fleet.ctl.last_plan
    assert plan is not None and plan.desired_replicas["m"] >= 1
    assert fleet.ctl.model_last_used_at["m"] == fleet.now


def test_planner_failure_falls_back_to_the_heuristic_then_reports(tmp_path: Path) -> None:
    from grid.planner.plan import make_plan

    calls: list[str] = []

    def flaky(snap, *, engine, **kw):  # type: ignore[no-untyped-def]
        calls.append(engine)
        if engine == "cpsat":
            raise RuntimeError("solver crashed")
        return make_plan(snap, engine=engine, **kw)

    fleet = two_hosts(tmp_path)
    fleet.ctl.config = FAST.__class__(engine="cpsat", membership_grace_s=0.0)
    fleet.ctl.planner = flaky
    report = fleet.ctl.tick(fleet.now)
    assert report.ok and calls == ["cpsat", "heuristic"]
    assert report.solver_status == "HEURISTIC_FALLBACK"

    def broken(snap, **kw):  # type: ignore[no-untyped-def]
        raise RuntimeError("no planner at all")

    fleet.ctl.planner = broken
    before = fleet.ctl.success_revision
    fleet.ctl.request_tick()
    report = fleet.ctl.tick(fleet.now)
    assert not report.ok and fleet.ctl.success_revision == before
    assert "tick_failed" in fleet.ctl.warnings


def test_corrupt_state_starts_clean_in_recommend_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text('{"schema_version": 1, "mode": "sideways"}')
    fleet = Fleet(tmp_path, [FakeNode("h1")])
    doc = status_document(fleet.ctl, fleet.now).model_dump(mode="json")
    assert doc["mode"] == "recommend" and doc["durable"]
    assert [w["code"] for w in doc["warnings"]] == ["state_quarantined"]
    assert (tmp_path / "state.json.corrupt-1").exists()
    fleet.ctl.set_mode("automatic", fleet.now)  # the clean store is durable again


def test_unchanged_inputs_reuse_the_plan_and_keep_the_generation(tmp_path: Path) -> None:
    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(min_replicas=1), fleet.now)
    first = fleet.ctl.tick(fleet.now)
    fleet.now += 5
    fleet.register_all()  # identical facts, later clock
    same = fleet.ctl.tick(fleet.now)
    assert not first.reused_plan and same.reused_plan
    assert same.generation == first.generation and not same.new_generation
    fleet.nodes["h1"].capacity_mb = 32768
    fleet.register_all()
    changed = fleet.ctl.tick(fleet.now)
    assert not changed.reused_plan and changed.new_generation
    assert changed.generation.split(":")[1] == "00000000000000000002"


def test_a_clock_derived_change_is_a_new_plan_input(tmp_path: Path) -> None:
    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(min_replicas=1), fleet.now)
    first = fleet.ctl.tick(fleet.now)
    # No heartbeat for longer than the staleness limit: eligibility changed, so re-plan.
    later = fleet.ctl.tick(fleet.now + fleet.ctl.policy.heartbeat_stale_s + 1)
    assert not later.reused_plan and later.generation != first.generation
    plan = fleet.ctl.last_plan
    assert plan is not None and plan.assignments == [] and plan.unsatisfied


def test_a_merely_feasible_plan_is_kept_only_for_the_resolve_interval(tmp_path: Path) -> None:
    from grid.planner.plan import make_plan

    solves: list[float] = []

    def budget_bound(snap, **kw):  # type: ignore[no-untyped-def]
        solves.append(snap.now)
        plan = make_plan(snap, **kw)
        plan.solver.status = "FEASIBLE"  # as if the budget ran out before the proof
        return plan

    fleet = two_hosts(tmp_path)
    fleet.ctl.put_profile("m", profile(min_replicas=1), fleet.now)
    fleet.ctl.planner = budget_bound
    interval = fleet.ctl.config.resolve_interval_s
    assert not fleet.ctl.tick(fleet.now).reused_plan
    fleet.register_all()
    assert fleet.ctl.tick(fleet.now + 1).reused_plan
    fleet.now += interval + 1
    fleet.register_all()
    assert not fleet.ctl.tick(fleet.now).reused_plan
    assert len(solves) == 2
