"""The final destructive check at delivery (pure), and the controller holding a drain whose
replacement lost its child route (invariant 4). Leases and margins are hand-worked numbers."""

from __future__ import annotations

from pathlib import Path

import pytest

from grid.fleet.actions import Action, ActionKind
from grid.fleet.models import Assignment, Host, Ownership, Plan, Residency, SolverReport
from grid.runtime.controller.delivery import RouteLease, revalidate_destructive
from grid.runtime.controller.state import Command
from tests.runtime.controller.harness import Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit

NOW = 1_785_300_000.0
PLAN = Plan(
    assignments=[Assignment(model_id="m", host_id="new", memory_mb=4096, runtime="llama.cpp")],
    solver=SolverReport(engine="hand", status="HAND", wall_ms=0.0),
)
DRAIN = Command(
    action=Action(
        action_id="drain-old-m", kind=ActionKind.DRAIN, host_id="old", model_id="m", not_before=NOW
    ),
    plan_generation="g1",
    issued_seq=1,
)


def _hosts(routes: list[str] | None, *, managed: bool = True) -> dict[str, Host]:
    ready = Residency(model_id="m", memory_mb=4096)
    replacement = Residency(model_id="m", memory_mb=4096, managed=managed)
    return {
        "old": Host(host_id="old", capacity_mb=8192, residencies=[ready], routes=["m"]),
        "new": Host(host_id="new", capacity_mb=8192, residencies=[replacement], routes=routes),
    }


def _check(
    hosts: dict[str, Host],
    *,
    heard_s_ago: float = 5.0,
    route_leases: dict[tuple[str, str], RouteLease] | None = None,
) -> list[str]:
    leases = {h: RouteLease(NOW - heard_s_ago, 60.0) for h in hosts}
    holds = revalidate_destructive(
        [DRAIN],
        plan=PLAN,
        hosts=hosts,
        leases=leases,
        retired=set(),
        now=NOW,
        stale_s=90.0,
        margin_s=30.0,
        route_leases=route_leases,
    )
    return [h.reason for h in holds]


def test_corroborated_replacement_with_a_fresh_route_lets_the_drain_go() -> None:
    assert _check(_hosts(["m"])) == []  # 55 s left on both leases, margin 30 s


def test_ready_row_without_a_child_route_holds_the_batch() -> None:
    # Regression (defect 2): the control lease is fresh and the row says READY, but no child
    # route corroborates it.
    (reason,) = _check(_hosts([]))
    assert "no live child route" in reason
    (reason,) = _check(_hosts(None))  # a host that reports no route inventory proves nothing
    assert "no live child route" in reason


def test_child_route_with_too_little_lease_left_holds_the_batch() -> None:
    # The control lease has 55 s left; the route was last renewed 31 s ago: 29 s < 30 s margin.
    stale_route = {("new", "m"): RouteLease(NOW - 31.0, 60.0)}
    (reason,) = _check(_hosts(["m"]), route_leases=stale_route)
    assert "child route on new has 29.0 s" in reason
    fresh_route = {("new", "m"): RouteLease(NOW - 29.0, 60.0)}  # 31 s left: strictly more
    assert _check(_hosts(["m"]), route_leases=fresh_route) == []


def test_control_lease_inside_the_margin_still_holds() -> None:
    (reason,) = _check(_hosts(["m"]), heard_s_ago=30.0)  # exactly 30 s left: not more
    assert "30.0 s of lease left" in reason


def test_external_replacement_needs_no_grid_child_route() -> None:
    assert _check(_hosts([], managed=False)) == []


def unrouted_replacement(tmp_path: Path) -> tuple[Fleet, str, str]:
    """m moves from `old` to `new`; the new READY row has no child route yet (drain waits)."""
    fleet = Fleet(tmp_path, [FakeNode("h1"), FakeNode("h2")])
    fleet.register_all()
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=1), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    (old,) = fleet.ready_hosts("m")
    new = "h2" if old == "h1" else "h1"
    fleet.nodes[new].unrouted.add("m")  # its child is not routable
    fleet.ctl.put_profile(
        "m",
        profile(min_replicas=1, max_replicas=1, denied_hosts=[old], scale_down_cooldown_s=0.0),
        fleet.now,
    )
    fleet.settle()
    assert fleet.ready_hosts("m") == sorted([old, new])  # both rows say READY
    assert not any(c["kind"] == "drain" for c in fleet.delivered)
    return fleet, old, new


def test_controller_never_delivers_a_drain_while_the_replacement_is_unrouted(
    tmp_path: Path,
) -> None:
    fleet, _old, new = unrouted_replacement(tmp_path)
    fleet.nodes[new].unrouted.clear()  # the route appears: now the old copy may go
    fleet.settle()
    assert [c["kind"] for c in fleet.delivered if c["kind"] in ("drain", "unload")] == [
        "drain",
        "unload",
    ]
    assert fleet.ready_hosts("m") == [new]


@pytest.mark.parametrize("change", ["manual_host", "external_residency"])
def test_a_target_grid_no_longer_owns_is_never_actuated(change: str) -> None:
    hosts = _hosts(["m"])
    old = hosts["old"]
    if change == "manual_host":
        hosts["old"] = old.model_copy(update={"ownership": Ownership.MANUAL})
    else:
        external = old.residencies[0].model_copy(update={"managed": False})
        hosts["old"] = old.model_copy(update={"residencies": [external]})
    (reason,) = _check(hosts)
    assert reason in ("host_manual on old", "owner external")
