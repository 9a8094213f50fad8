"""Delivery asks the one destructive gate list (`reconcile/gates.py`), and a child route's own
lease is the heartbeat whose envelope last listed it. Leases and margins are hand-worked."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from grid.fleet.models import (
    Host,
    ModelProfile,
    Ownership,
    Residency,
)
from grid.runtime.controller.delivery import Hold, RouteLease, revalidate_destructive
from grid.runtime.reconcile import gates
from grid.runtime.reconcile.gates import Gate, Stage, When, delivery_gates
from grid.runtime.reconcile.safety import Blocker
from tests.runtime.controller.test_delivery import DRAIN, NOW, PLAN, unrouted_replacement

pytestmark = pytest.mark.unit


def _hosts() -> dict[str, Host]:
    row = Residency(model_id="m", memory_mb=4096)
    return {
        h: Host(host_id=h, capacity_mb=8192, residencies=[row], routes=["m"])
        for h in ("old", "new")
    }


def _check(
    hosts: dict[str, Host],
    *,
    pinned: list[str] | None = None,
    route_leases: dict[tuple[str, str], RouteLease] | None = None,
) -> list[Hold]:
    prof = ModelProfile(model_id="m", memory_mb=4096, pinned_hosts=pinned or [])
    return revalidate_destructive(
        [DRAIN],
        plan=PLAN,
        hosts=hosts,
        leases={h: RouteLease(NOW - 5.0, 60.0) for h in hosts},  # 55 s left
        route_leases=route_leases,
        profiles={"m": prof},
        retired=set(),
        now=NOW,
        stale_s=90.0,
        margin_s=30.0,
    )


def _external(hosts: dict[str, Host]) -> list[Hold]:
    old = hosts["old"]
    external = old.residencies[0].model_copy(update={"managed": False})
    hosts["old"] = old.model_copy(update={"residencies": [external]})
    return _check(hosts)


def _manual(hosts: dict[str, Host]) -> list[Hold]:
    hosts["old"] = hosts["old"].model_copy(update={"ownership": Ownership.MANUAL})
    return _check(hosts)


def _pinned(hosts: dict[str, Host]) -> list[Hold]:
    return _check(hosts, pinned=["old"])


def _route_lease_short(hosts: dict[str, Host]) -> list[Hold]:
    # The route was listed 31 s ago with a 60 s lease: 29 s left, not more than 30 s.
    return _check(hosts, route_leases={("new", "m"): RouteLease(NOW - 31.0, 60.0)})


# One scenario per gate marked for delivery: each trips that gate and nothing else.
SCENARIOS: dict[str, Callable[[dict[str, Host]], list[Hold]]] = {
    "managed_residency": _external,
    "manual_host": _manual,
    "pinned_host": _pinned,
    "replacement_routes_leased": _route_lease_short,
}


def test_every_delivery_gate_has_a_scenario() -> None:
    # A gate newly marked for delivery must come with a scenario below (and so is checked).
    assert {g.name for g in delivery_gates()} == set(SCENARIOS)


def test_the_baseline_passes_every_delivery_gate() -> None:
    assert _check(_hosts()) == []


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_each_delivery_gate_holds_the_batch_with_its_code(name: str) -> None:
    gate = next(g for g in delivery_gates() if g.name == name)
    (hold,) = SCENARIOS[name](_hosts())
    assert (hold.code, hold.action_ids) == (gate.code, ("drain-old-m",))


@pytest.fixture
def extra_gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[frozenset[When]], None]]:
    def add(when: frozenset[When]) -> None:
        def refuse(_ctx: gates.GateContext, c: gates.Candidate) -> Blocker | None:
            return Blocker("test_gate", f"the test gate refuses {c.model_id} on {c.host_id}")

        new = Gate("test_gate", "test_gate", Stage.STANDING, refuse, when=when)
        monkeypatch.setattr(gates, "GATES", (*gates.GATES, new))

    yield add


def test_a_gate_added_to_the_list_for_delivery_is_enforced_there(
    extra_gate: Callable[[frozenset[When]], None],
) -> None:
    extra_gate(frozenset({When.TICK, When.DELIVERY}))
    (hold,) = _check(_hosts())
    assert (hold.code, hold.reason) == ("test_gate", "the test gate refuses m on old")


def test_a_tick_only_gate_is_not_run_at_delivery(
    extra_gate: Callable[[frozenset[When]], None],
) -> None:
    extra_gate(frozenset({When.TICK}))
    assert _check(_hosts()) == []


def test_a_preemption_needs_no_replacement_route_but_keeps_ownership() -> None:
    hosts = _hosts()
    hosts["new"] = hosts["new"].model_copy(update={"routes": []})  # replacement unproven
    preempt = DRAIN.model_copy(
        update={"action": DRAIN.action.model_copy(update={"preemption": True})}
    )
    base = {"plan": PLAN, "leases": {h: RouteLease(NOW - 5.0, 60.0) for h in hosts}}
    kwargs = {"retired": set(), "now": NOW, "stale_s": 90.0, "margin_s": 30.0}
    assert revalidate_destructive([preempt], hosts=hosts, **base, **kwargs) == []  # type: ignore[arg-type]
    hosts["old"] = hosts["old"].model_copy(update={"ownership": Ownership.MANUAL})
    (hold,) = revalidate_destructive([preempt], hosts=hosts, **base, **kwargs)  # type: ignore[arg-type]
    assert hold.code == "host_manual"


def test_a_route_whose_lease_runs_out_holds_the_drain_while_the_control_lease_is_fresh(
    tmp_path: Path,
) -> None:
    fleet, old, new = unrouted_replacement(tmp_path)
    old_node, new_node = fleet.nodes[old], fleet.nodes[new]
    # The route appears in one envelope; from then on the new node's heartbeats carry none
    # (an older node's heartbeat): they renew its control lease, never the route's lease.
    new_node.unrouted.clear()
    fleet.update(new_node, new_node.heartbeat(request_commands=False))
    new_node.lean = True
    fleet.now += 35.0  # route listed 35 s ago: 60 - 35 = 25 s left, not more than 30 s
    fleet.update(new_node, new_node.heartbeat(request_commands=False))  # control lease: 60 s
    delivery = fleet.poll(old_node)
    assert not any(c["kind"] == "drain" for c in delivery.commands)
    status = fleet.ctl.status(fleet.now).model_dump(mode="json")
    assert "child route on " + new in str(status)
    # A full envelope renews the route's lease: the drain goes.
    new_node.lean = False
    fleet.update(new_node, new_node.heartbeat(request_commands=False))
    delivery = fleet.poll(old_node)
    assert [c["kind"] for c in delivery.commands] == ["drain"]
