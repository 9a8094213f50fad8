"""Issue 22, item 7: a WARM delivered to a node that has not reported it yet is a replica.

Between a WARM's delivery and the node's next heartbeat the node still reports the model as
cached. If a fresh plan then prefers another host (here: another host's cleanup finished a
moment later and it scores better), the controller must not start a second replacement next to
the one in flight: that is how a controller SIGKILL restart briefly ran 3 replicas of a model
with max 2 (the restored controller's cleanups finished in a burst). The oracle is the fake
nodes' own residencies: never more than 2 started, whatever the plan says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grid.fleet.actions import Action, ActionKind, ActionRecord, RecordStatus
from grid.fleet.models import FleetSnapshot
from grid.runtime.controller.in_flight import held_for_unanswered
from tests.runtime.controller.harness import Fleet, profile
from tests.support.fake_node import FakeNode

MODEL = "m"


def failed_row() -> dict[str, Any]:
    return {"model_id": MODEL, "memory_mb": 4096, "state": "failed", "managed": True}


def started(fleet: Fleet) -> list[str]:
    """Hosts that run (or were told to run and took) a replica: the nodes' own view."""
    return sorted(
        h for h, n in fleet.nodes.items() if n.residencies.get(MODEL, {}).get("state") == "ready"
    )


def kinds(commands: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((c["kind"], c["host_id"]) for c in commands)


def run(fleet: Fleet, node: FakeNode, commands: list[dict[str, Any]]) -> None:
    for command in commands:
        ack = node.execute(command, now=fleet.now, ttl_s=10.0)
        assert ack is not None
        fleet.acks[node.host_id].append(ack)


def test_a_warm_delivered_but_not_yet_reported_keeps_its_replica(tmp_path: Path) -> None:
    nodes = [FakeNode("a"), FakeNode("b"), FakeNode("c")]
    for node in nodes:
        node.cached.add(MODEL)
    fleet = Fleet(tmp_path, nodes)
    a, b, c = nodes
    fleet.register_all()
    fleet.ctl.put_profile(MODEL, profile(min_replicas=2, max_replicas=2), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle(6)
    assert started(fleet) == ["a", "b"]
    # b's child dies; c still has a failed residency of an earlier child: both need cleanup.
    b.residencies[MODEL] = failed_row()
    c.residencies[MODEL] = failed_row()
    fleet.now += 5.0
    for node in (b, c):  # the fence heartbeats: registry truth first
        fleet.update(node, node.heartbeat(request_commands=False))
    unload_b, unload_c = fleet.poll(b).commands, fleet.poll(c).commands
    assert kinds(unload_b) == [("unload", "b")] and kinds(unload_c) == [("unload", "c")]
    # c's cleanup ends first: the replacement goes to c, and c takes it (not reported yet).
    run(fleet, c, unload_c)
    fleet.now += 0.3
    warm_c = fleet.poll(c).commands
    assert kinds(warm_c) == [("warm", "c")]
    # b's cleanup ends a moment later; a fresh plan may now prefer b, but c is in flight.
    run(fleet, b, unload_b)
    fleet.now += 0.3
    assert fleet.poll(b).commands == []
    assert fleet.poll(a).commands == []
    # c comes up: the fleet is converged with exactly two replicas, and stays so.
    run(fleet, c, warm_c)
    for _ in range(6):
        fleet.step(2.0)
        assert len(started(fleet)) <= 2, started(fleet)
    assert started(fleet) == ["a", "c"]


# ------------------------------------------------------------------ the rule, table-driven

NOW = 1000.0
W, L, D = ActionKind.WARM, ActionKind.LOAD, ActionKind.DRAIN


def warm_record(host: str, delivered: float | None, status: RecordStatus = RecordStatus.DELIVERED,
                action_id: str = "") -> ActionRecord:  # fmt: skip
    return ActionRecord.model_validate(
        {"action_id": action_id or f"warm-{host}", "kind": W, "host_id": host, "model_id": MODEL,
         "status": status, "created_at": (delivered or NOW) - 0.1, "delivered_at": delivered}
    )  # fmt: skip


def snapshot(c_heartbeat: float = NOW - 0.5, c_state: str = "cached",
             c_host: str = "accepting") -> FleetSnapshot:  # fmt: skip
    rows = {"a": [{"model_id": MODEL, "memory_mb": 100, "state": "ready"}], "b": []}
    c_rows = [] if c_state == "cached" else [{"model_id": MODEL, "memory_mb": 100,
                                              "state": c_state}]  # fmt: skip
    hosts = [{"host_id": h, "capacity_mb": 8192, "last_heartbeat": NOW - 0.2, "residencies": r}
             for h, r in rows.items()]  # fmt: skip
    hosts.append({"host_id": "c", "capacity_mb": 8192, "last_heartbeat": c_heartbeat,
                  "state": c_host, "residencies": c_rows})  # fmt: skip
    return FleetSnapshot.model_validate(
        {"now": NOW, "hosts": hosts, "models": [{"model_id": MODEL, "memory_mb": 100}]}
    )


def action(kind: ActionKind, host: str, model: str = MODEL) -> Action:
    return Action(action_id=f"{kind.value}-{host}-{model}", kind=kind, host_id=host,
                  model_id=model, not_before=0.0)  # fmt: skip


IN_FLIGHT = warm_record("c", NOW - 1.0)
NEW = [action(L, "b"), action(W, "b"), action(W, "b", "other")]


@pytest.mark.parametrize(
    ("records", "wanted", "snap", "extra", "held"),
    [
        # A delivered WARM the plan moved away from: the new one (and its LOAD) waits.
        ([IN_FLIGHT], set(), snapshot(), [], ["load-b-m", "warm-b-m"]),
        # Still wanted: the plan counts it already, nothing to hold.
        ([IN_FLIGHT], {"warm-c"}, snapshot(), [], []),
        # Not delivered yet: the reconciler withdraws it, it will never run.
        ([warm_record("c", None, RecordStatus.PENDING)], set(), snapshot(), [], []),
        # Answered (succeeded or failed): the snapshot shows the truth.
        ([warm_record("c", NOW - 1.0, RecordStatus.FAILED)], set(), snapshot(), [], []),
        # Delivered longer than the wait ago (a reply that never reached the node).
        ([warm_record("c", NOW - 60.0)], set(), snapshot(), [], []),
        # Its host went silent past the route lease, or no longer admits work.
        ([IN_FLIGHT], set(), snapshot(c_heartbeat=NOW - 11.0), [], []),
        ([IN_FLIGHT], set(), snapshot(c_host="draining"), [], []),
        # Its host reported the model FAILED after the delivery.
        ([IN_FLIGHT], set(), snapshot(c_state="failed"), [], []),
        # ... but a FAILED row from before the delivery is the residency being replaced.
        ([IN_FLIGHT], set(), snapshot(c_heartbeat=NOW - 1.5, c_state="failed"), [],
         ["load-b-m", "warm-b-m"]),
        # This tick drains it: it is being retired, the new replica may start.
        ([IN_FLIGHT], set(), snapshot(), [action(D, "c")], []),
        # Two new WARMs, one in flight: only the last in the governors' order waits.
        ([IN_FLIGHT], set(), snapshot(), [action(W, "d")], ["warm-d-m"]),
    ],
)  # fmt: skip
def test_an_unanswered_warm_holds_exactly_one_new_warm_of_its_model(
    records: list[ActionRecord],
    wanted: set[str],
    snap: FleetSnapshot,
    extra: list[Action],
    held: list[str],
) -> None:
    actions = NEW + extra
    got = held_for_unanswered(actions, records, wanted, snap, wait_s=60.0, lease_s=10.0)
    assert sorted(a.action_id for a, _until in got) == held
    assert all(until == IN_FLIGHT.delivered_at + 60.0 for _a, until in got)  # type: ignore[operator]
