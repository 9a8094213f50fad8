"""Staged engine restarts after a profile change (grid/runtime/controller/engine_restarts.py):
a table of fleets, each with the hand-worked answer of which hosts get the new launch facts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.fleet.models import Host, HostState, ModelProfile, Policy, Residency, ResidencyState
from grid.runtime.controller.engine_restarts import (
    Grants,
    RestartGrant,
    serving_view,
    stage_restarts,
)

M = "m"
NOW = 1000.0
HOLD = 60.0


def host(host_id: str, state: str | None, *, admitting: bool = True) -> Host:
    residencies = [] if state is None else [Residency(model_id=M, memory_mb=100, state=state)]
    ready = state == "ready"
    return Host(
        host_id=host_id,
        state=HostState.ACCEPTING if admitting else HostState.DRAINING,
        capacity_mb=8192,
        last_heartbeat=NOW,
        routes=[M] if ready else [],
        residencies=residencies,
    )


def stage(
    hosts: list[Host], asking: str, grants: Grants | None = None, now: float = NOW
) -> tuple[bool, Grants]:
    profiles = [ModelProfile(model_id=M, memory_mb=100)]
    view = serving_view(hosts, profiles, Policy(), now)
    allowed, kept = stage_restarts(view, asking, dict(grants or {}), HOLD)
    return M in allowed, kept


READY, WARMING, FAILED = ResidencyState.READY, ResidencyState.WARMING, ResidencyState.FAILED


@pytest.mark.parametrize(
    ("states", "asking", "grants", "sent", "holder"),
    [
        # The sole replica restarts in place (nothing else could serve meanwhile).
        ({"a": "ready"}, "a", {}, True, None),
        # Two serving replicas: the first host to ask takes the grant ...
        ({"a": "ready", "b": "ready"}, "a", {}, True, "a"),
        # ... and the other is held while the grant stands.
        ({"a": "ready", "b": "ready"}, "b", {M: RestartGrant("a", NOW - 1)}, False, "a"),
        # The holder is seen restarting: it keeps (and refreshes) its grant; the other waits.
        ({"a": "warming", "b": "ready"}, "a", {M: RestartGrant("a", NOW - 30)}, True, "a"),
        ({"a": "warming", "b": "ready"}, "b", {M: RestartGrant("a", NOW - 1, True)}, False, "a"),
        # Restarted and serving again: its reply ends its turn (it is not granted again) ...
        ({"a": "ready", "b": "ready"}, "a", {M: RestartGrant("a", NOW - 5, True)}, False, "a"),
        ({"a": "ready", "b": "ready"}, "a", {M: RestartGrant("a", NOW, True, True)}, False, "a"),
        # ... and the next host may go.
        ({"a": "ready", "b": "ready"}, "b", {M: RestartGrant("a", NOW, True, True)}, True, "b"),
        ({"a": "ready", "b": "ready"}, "b", {}, True, "b"),
        # A holder never seen restarting yields its turn after the hold.
        ({"a": "ready", "b": "ready"}, "b", {M: RestartGrant("a", NOW - HOLD - 1)}, True, "b"),
        # The last serving replica stays while another replica is not serving (no grant).
        ({"a": "warming", "b": "ready"}, "b", {}, False, None),
        ({"a": "failed", "b": "ready"}, "b", {}, False, None),
        # A holder whose replica failed ends its grant; the survivor is the last: held.
        ({"a": "failed", "b": "ready"}, "a", {M: RestartGrant("a", NOW - 5, True)}, True, None),
        # A replica that serves nothing (warming here) gets the facts: nothing is taken away.
        ({"a": "warming", "b": "ready"}, "a", {M: RestartGrant("b", NOW - 1)}, True, "b"),
        # Three replicas: one restarting, two serving: the grant goes to one of them only.
        ({"a": "warming", "b": "ready", "c": "ready"}, "b", {}, True, "b"),
        (
            {"a": "warming", "b": "ready", "c": "ready"},
            "c",
            {M: RestartGrant("b", NOW)},
            False,
            "b",
        ),
    ],
)
def test_who_gets_the_new_launch_facts(
    states: dict[str, str], asking: str, grants: Grants, sent: bool, holder: str | None
) -> None:
    hosts = [host(h, s) for h, s in sorted(states.items())]
    got, kept = stage(hosts, asking, grants)
    assert got is sent
    assert (kept[M].host_id if M in kept else None) == holder


def test_a_replica_on_a_draining_host_serves_nothing_and_is_not_the_last() -> None:
    # b is operator-drained: it takes no traffic, so a's replica is the last serving one.
    hosts = [host("a", "ready"), host("b", "ready", admitting=False)]
    assert stage(hosts, "a")[0] is False
    assert stage(hosts, "b")[0] is True


def test_a_rolling_change_never_leaves_a_replicated_model_without_a_serving_replica() -> None:
    """Three hosts ask in turn, each beat; a host given the facts restarts (warming for two
    beats, then ready). Hand-worked: they restart one after another, and in every beat at least
    two of the three serve."""
    states = {"a": "ready", "b": "ready", "c": "ready"}
    pending = {"a", "b", "c"}  # still on the old template
    warming: dict[str, int] = {}
    grants: Grants = {}
    order: list[str] = []
    now = NOW
    for _beat in range(40):
        for asking in ("a", "b", "c"):
            now += 1.0
            for h in list(warming):
                warming[h] -= 1
                if warming[h] == 0:
                    del warming[h]
                    states[h] = "ready"
            hosts = [host(h, s) for h, s in sorted(states.items())]
            got, grants = stage(hosts, asking, grants, now)
            if got and asking in pending and states[asking] == "ready":
                pending.discard(asking)
                order.append(asking)
                states[asking] = "warming"
                warming[asking] = 2
            assert sum(s == "ready" for s in states.values()) >= 2
    assert order == ["a", "b", "c"] and not pending


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(min_value=2, max_value=4),
    needs=st.lists(st.booleans(), min_size=4, max_size=4),
    warm=st.lists(st.integers(min_value=1, max_value=6), min_size=4, max_size=4),
    order=st.lists(st.integers(min_value=0, max_value=3), min_size=60, max_size=200),
)
def test_a_replicated_model_always_keeps_a_serving_replica(
    n: int, needs: list[bool], warm: list[int], order: list[int]
) -> None:
    """Hosts ask in any order; the controller sees each host as of its own last reply (a
    heartbeat carries the state before the reply); a host that needs a restart and gets the
    facts while READY leaves the routes at once and is READY again `warm` asks later. Whatever
    the order, at least one replica serves at every moment."""
    names = "abcd"[:n]
    truth = dict.fromkeys(names, "ready")
    reported = dict(truth)
    pending = {h for i, h in enumerate(names) if needs[i]}
    left: dict[str, int] = {}
    grants: Grants = {}
    now = NOW
    for pick in order:
        asking = names[pick % n]
        now += 1.0
        for h in list(left):
            left[h] -= 1
            if left[h] <= 0:
                del left[h]
                truth[h] = "ready"
        reported[asking] = truth[asking]
        hosts = [host(h, s) for h, s in sorted(reported.items())]
        got, grants = stage(hosts, asking, grants, now)
        if got and asking in pending and truth[asking] == "ready":
            pending.discard(asking)
            truth[asking] = "warming"
            left[asking] = warm[names.index(asking)]
        assert any(s == "ready" for s in truth.values()), (truth, reported, grants)
