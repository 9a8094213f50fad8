"""Hypothesis: whatever a stale plan says, no destructive action breaks an ownership or floor rule.

Fleets of up to four hosts (managed or manual, admitting or not, fresh or stale, in two racks,
with or without a report of their live child routes) carry replicas of three models with random
owners, states, activity and pins. The plan is drawn independently of the fleet (random
assignments, preemptions and repacks naming any pair), as a plan stored long ago might, and is
reconciled as stale (`plan_current=False`). The oracle below recomputes each rule from the
spec's wording on the raw snapshot, without the reconciler's view or gates.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grid.fleet.actions import ActionKind, ActionRecord
from grid.fleet.models import (
    Assignment,
    FleetSnapshot,
    HostState,
    Ownership,
    Plan,
    Preemption,
    ResidencyState,
    SolverReport,
)
from grid.runtime.reconcile import reconcile
from tests.runtime.builders import NOW, host, model, record, res, snapshot

pytestmark = pytest.mark.property

HOSTS = ["h1", "h2", "h3", "h4"]
MODELS = ["a", "b", "c"]
ADMITTING = {HostState.ACCEPTING, HostState.THROTTLED}


@st.composite
def fleets(draw: st.DrawFn) -> FleetSnapshot:
    hosts = []
    for host_id in HOSTS[: draw(st.integers(1, 4))]:
        rows = []
        for model_id in MODELS:
            if not draw(st.booleans()):
                continue
            owner = draw(st.sampled_from(["managed"] * 4 + ["external", "manual"]))
            state = draw(st.sampled_from(["ready"] * 5 + ["draining", "warming", "failed"]))
            active = draw(st.sampled_from([0, 0, 2, None]))
            rows.append(
                res(
                    model_id,
                    state,
                    2048,
                    ownership=owner,
                    managed=owner == "managed",
                    active_requests=active,
                )
            )
        fields: dict[str, Any] = {
            "failure_domain": draw(st.sampled_from(["rack-a", "rack-b"])),
            "state": draw(st.sampled_from(["accepting"] * 4 + ["draining", "paused"])),
            "ownership": draw(st.sampled_from(["managed"] * 4 + ["manual"])),
        }
        if draw(st.integers(0, 5)) == 0:
            fields["last_heartbeat"] = NOW - 3600
        if draw(st.booleans()):  # the node reports its live child routes (invariant 4)
            fields["routes"] = draw(st.lists(st.sampled_from(MODELS), unique=True))
        hosts.append(host(host_id, 16384, residencies=rows, **fields))
    host_ids = [h["host_id"] for h in hosts]
    models = [
        model(
            m,
            2048,
            min_replicas=draw(st.integers(0, 2)),
            max_replicas=3,
            min_failure_domains=draw(st.integers(1, 2)),
            pinned_hosts=draw(st.lists(st.sampled_from(host_ids), max_size=1)),
        )
        for m in MODELS
    ]
    return snapshot(hosts, models)


@st.composite
def stale_plans(draw: st.DrawFn) -> Plan:
    pairs = st.tuples(st.sampled_from(MODELS), st.sampled_from(HOSTS))
    placed = draw(st.lists(pairs, max_size=4, unique=True))
    preempted = draw(st.lists(st.tuples(pairs, st.sampled_from(MODELS)), max_size=4))
    return Plan(
        assignments=[
            Assignment(model_id=m, host_id=h, memory_mb=2048, runtime="llama.cpp")
            for m, h in placed
        ],
        preemptions=[
            Preemption(
                victim_model_id=v,
                host_id=h,
                beneficiary_model_id=b,
                relocated_to=draw(st.sampled_from([None, None, *HOSTS])),
            )
            for (v, h), b in preempted
        ],
        solver=SolverReport(engine="stale", status="STORED", wall_ms=0.0),
    )


def _owner(row: Any) -> Ownership:
    return row.ownership or (Ownership.MANAGED if row.managed else Ownership.EXTERNAL)


def _counted(snap: FleetSnapshot, model_id: str) -> dict[str, str]:
    """Managed READY replicas with their child route, on hosts that admit work: host -> domain."""
    out = {}
    for h in snap.hosts:
        fresh = h.last_heartbeat is not None and NOW - h.last_heartbeat <= 90
        if h.state not in ADMITTING or not fresh or h.ownership is Ownership.MANUAL:
            continue
        for r in h.residencies:
            ready = r.model_id == model_id and r.state is ResidencyState.READY
            routed = h.routes is None or model_id in h.routes
            if ready and routed and _owner(r) is Ownership.MANAGED:
                out[h.host_id] = h.failure_domain or h.host_id
    return out


@st.composite
def open_drains(draw: st.DrawFn) -> list[ActionRecord]:
    """Drains issued on earlier ticks, some already delivered (they may run whatever happens)."""
    pairs = draw(
        st.lists(
            st.tuples(st.sampled_from(MODELS), st.sampled_from(HOSTS)), max_size=3, unique=True
        )
    )
    return [
        record("drain", h, m, draw(st.sampled_from(["pending", "delivered"]))) for m, h in pairs
    ]


@settings(
    max_examples=1000, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(snap=fleets(), stale=stale_plans(), history=open_drains())
def test_no_stale_plan_makes_a_destructive_action_unsafe(
    snap: FleetSnapshot, stale: Plan, history: list[ActionRecord]
) -> None:
    result = reconcile(stale, snap, history, mode="automatic", plan_current=False)
    hosts = {h.host_id: h for h in snap.hosts}
    profiles = {m.model_id: m for m in snap.models}
    drained: dict[str, set[str]] = {}
    for action in result.actions:
        if action.kind not in (ActionKind.DRAIN, ActionKind.UNLOAD):
            continue
        h = hosts[action.host_id]
        row = next(r for r in h.residencies if r.model_id == action.model_id)
        prof = profiles[action.model_id]
        # Ownership: never a manual host, an external or manual residency, or a pinned host.
        assert h.ownership is Ownership.MANAGED, action
        assert _owner(row) is Ownership.MANAGED, action
        assert action.host_id not in prof.pinned_hosts, action
        assert h.last_heartbeat is not None and NOW - h.last_heartbeat <= 90, action
        if action.kind is ActionKind.UNLOAD:
            # Drain before unload; zero requests in flight, never unknown activity.
            assert row.state is not ResidencyState.READY and row.active_requests == 0, action
        elif row.state is ResidencyState.READY:
            drained.setdefault(action.model_id, set()).add(action.host_id)
    withdrawn = {w.action_id for w in result.withdrawn}
    for model_id, gone in drained.items():
        # Drains still open (and any delivered one: it may run) are gone too.
        for r in history:
            if r.model_id == model_id and (r.was_delivered or r.action_id not in withdrawn):
                gone = gone | {r.host_id}
        prof = profiles[model_id]
        before = _counted(snap, model_id)
        after = {h: d for h, d in before.items() if h not in gone}
        # The managed baseline floor.
        assert len(after) >= min(prof.min_replicas, len(before)), (model_id, gone)
        # The failure-domain floor, capped by today's spread and the plan's own target.
        target = {
            hosts[a.host_id].failure_domain if a.host_id in hosts else a.host_id
            for a in stale.assignments
            if a.model_id == model_id
        }
        floor = min(prof.min_failure_domains, len(set(before.values())), len(target))
        assert len(set(after.values())) >= floor, (model_id, gone)
        # Make before break: the last ready replica of a required model is never drained.
        if prof.min_replicas > 0 and any(h not in before for h in gone):
            assert after, (model_id, gone)
