"""Issue 22 finding 2 (route hijack), on the controller with fake nodes: a host may report a
READY residency and a route for a model it was never told to run; before, that route was
routable and counted as a replica (the router preferred it: 30 of 30 requests to a fake
engine), and a host that ignored its DRAIN stayed READY. Now a route is accepted only for a
residency the controller commanded (a grant, or a WARM the node took) or an operator pinned, a
DRAIN or UNLOAD the node took retracts it, and the host is named in status."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grid.api.proxy_state import ProxyState, _routes
from grid.runtime.controller.status import status_document
from tests.runtime.controller.harness import Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.service


KEY = "engine-key-" + "e" * 32


def node(host_id: str, **fields: Any) -> FakeNode:
    return FakeNode(host_id, engine_key=KEY, **fields)


def stubborn(fake: FakeNode) -> list[str]:
    """Make `fake` hostile: it takes commands but never drains or unloads (no receipt either);
    returns the list the ignored commands' kinds are appended to."""
    ignored: list[str] = []
    original = fake.execute

    def execute(command: dict[str, Any], **kw: Any) -> dict[str, Any] | None:
        if command["kind"] in ("drain", "unload"):
            ignored.append(command["kind"])
            return None
        return original(command, **kw)

    fake.execute = execute  # type: ignore[method-assign]
    return ignored


def ready_row(model_id: str) -> dict[str, Any]:
    return {"model_id": model_id, "memory_mb": 4096, "state": "ready", "managed": True}


def routable(fleet: Fleet) -> dict[str, set[str]]:
    """Host -> the models the proxy could route there now (its real route builder)."""
    proxy = ProxyState()
    out: dict[str, set[str]] = {}
    for model_id in sorted(fleet.ctl.profiles):
        with proxy._lock:
            routes, _keys = _routes(fleet.ctl, proxy._active, model_id)
        for route in routes:
            out.setdefault(route.host_id, set()).add(route.model_id)
    return out


def host_row(fleet: Fleet, host_id: str) -> dict[str, Any]:
    doc = status_document(fleet.ctl, fleet.now).model_dump(mode="json")
    return next(h for h in doc["hosts"] if h["host_id"] == host_id)


def warnings(fleet: Fleet) -> dict[str, str]:
    doc = status_document(fleet.ctl, fleet.now).model_dump(mode="json")
    return {w["code"]: w["message"] for w in doc["warnings"]}


def test_a_route_for_a_model_never_commanded_is_not_routed_nor_counted(tmp_path: Path) -> None:
    honest, rogue = node("h1"), node("evil")
    fleet = Fleet(tmp_path, [honest, rogue])
    fleet.register_all()
    fleet.ctl.put_profile("m", profile(min_replicas=1, max_replicas=1), fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    (serving,) = fleet.ready_hosts("m")
    # Whoever was not told to run it claims it anyway, and ignores any drain.
    claimer = rogue if serving == honest.host_id else honest
    stubborn(claimer)
    claimer.residencies["m"] = ready_row("m")
    fleet.settle(3)
    assert routable(fleet) == {serving: {"m"}}
    row = host_row(fleet, claimer.host_id)
    assert row["refused_routes"].get("m") in {"route_not_commanded", "route_retracted"}
    assert [r["state"] for r in row["residencies"]] == ["warming"]  # a READY row unproven
    assert "route_not_commanded" in {s["code"] for s in row["suspicions"]}
    assert f"host {claimer.host_id}" in warnings(fleet)["suspicious_node"]
    # The claim never displaces the verified replica (the claimer may be told to drain its
    # own, which it ignores).
    drains = {c["host_id"] for c in fleet.delivered if c["kind"] in ("drain", "unload")}
    assert serving not in drains
    assert fleet.ready_hosts("m") == sorted([serving, claimer.host_id])  # the fake still runs
    assert host_row(fleet, serving)["suspicions"] == []


def test_a_forged_or_borrowed_grant_does_not_make_a_route(tmp_path: Path) -> None:
    honest, rogue = node("h1"), node("evil")
    fleet = Fleet(tmp_path, [honest, rogue])
    fleet.register_all()
    fleet.ctl.put_profile(
        "m", profile(min_replicas=1, max_replicas=1, pinned_hosts=["h1"]), fleet.now
    )
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    assert fleet.ready_hosts("m") == ["h1"]
    assert honest.grants["m"]  # the real WARM carried the grant, and the node echoes it
    stubborn(rogue)
    rogue.residencies["m"] = ready_row("m")
    for grant in ("A" * 43, honest.grants["m"]):  # forged, and another host's
        rogue.grants["m"] = grant
        fleet.settle(2)
        assert routable(fleet) == {"h1": {"m"}}
        refused = host_row(fleet, "evil")["refused_routes"]
        assert refused.get("m") in {"route_not_commanded", "route_retracted"}


def test_a_host_that_ignores_its_drain_loses_the_route(tmp_path: Path) -> None:
    a, b = node("h1"), node("h2")
    fleet = Fleet(tmp_path, [a, b])
    fleet.register_all()
    body = profile(min_replicas=2, max_replicas=2, scale_down_cooldown_s=0.0)
    fleet.ctl.put_profile("m", body, fleet.now)
    fleet.ctl.set_mode("automatic", fleet.now)
    fleet.settle()
    assert fleet.ready_hosts("m") == ["h1", "h2"]
    assert routable(fleet) == {"h1": {"m"}, "h2": {"m"}}
    # h2 turns hostile: it takes commands but ignores a drain and keeps reporting READY.
    ignored = stubborn(b)
    fleet.ctl.put_profile("m", {**body, "min_replicas": 1, "max_replicas": 1}, fleet.now)
    for _ in range(10):
        fleet.step()
        if ignored:
            break
    drained = [c for c in fleet.delivered if c["kind"] == "drain"]
    assert drained, "no drain was delivered"
    loser = drained[-1]["host_id"]
    fleet.settle(2)
    if loser == "h2":
        assert routable(fleet) == {"h1": {"m"}}
        assert host_row(fleet, "h2")["refused_routes"] == {"m": "route_retracted"}
    else:  # the honest host was drained: it stopped reporting the route itself
        assert "h1" not in routable(fleet)


def test_an_operator_pin_registers_a_route_without_a_command(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path, [node("h1", residencies={"m": ready_row("m")})])
    fleet.ctl.put_profile(
        "m", profile(min_replicas=0, max_replicas=1, pinned_hosts=["h1"]), fleet.now
    )
    fleet.register_all()
    assert routable(fleet) == {"h1": {"m"}}
    fleet.ctl.put_profile("m", profile(min_replicas=0, max_replicas=1), fleet.now)  # unpinned
    fleet.register_all()
    assert routable(fleet) == {}
