"""The one destructive gate list, table-driven: every gate refuses the same way on every path.

Each row puts one hazard on the residency of `m` on h1 and runs the real reconciler (automatic
mode) three times, with a plan that removes it by cleanup, names it as a preemption victim, or
relocates it (a repack whose new replica on h2 is already READY). The expected code is the one
the spec's rule names, written by hand per row.
"""

from __future__ import annotations

from typing import Any

import pytest

from grid.fleet.actions import ActionKind, ReconcileResult
from grid.fleet.models import Assignment, Plan, Preemption, SolverReport
from grid.runtime.reconcile import reconcile
from grid.runtime.reconcile.gates import GATES, Candidate, Gate, GateContext, Path, Stage, When
from grid.runtime.reconcile.history import HistoryIndex
from grid.runtime.reconcile.view import FleetView
from tests.runtime.builders import NOW, host, model, plan, record, res, snapshot

pytestmark = pytest.mark.unit

# The reconciler's gates (the delivery-only ones: tests/runtime/controller/test_delivery_gates.py)
TICK_GATES = tuple(g for g in GATES if When.TICK in g.when)

DRAIN, UNLOAD = ActionKind.DRAIN, ActionKind.UNLOAD
PATHS = ("cleanup", "preemption", "repack")


def _plan(path: str) -> Plan:
    if path == "cleanup":
        return plan(("m", "h2"))
    if path == "preemption":
        return plan(("m", "h2"), preemptions=[("m", "h1", "vip")])
    return Plan(
        assignments=[Assignment(model_id="m", host_id="h2", memory_mb=4096, runtime="llama.cpp")],
        preemptions=[
            Preemption(
                victim_model_id="m", host_id="h1", beneficiary_model_id="vip", relocated_to="h2"
            )
        ],
        solver=SolverReport(engine="hand", status="HAND", wall_ms=0.0),
    )


def _run(
    path: str,
    *,
    victim: dict[str, Any] | None = None,
    h1: dict[str, Any] | None = None,
    m: dict[str, Any] | None = None,
    history: list[Any] | None = None,
) -> ReconcileResult:
    snap = snapshot(
        [
            host("h1", 12000, residencies=[res("m", **(victim or {}))], **(h1 or {})),
            host("h2", 12000, residencies=[res("m")]),  # the replacement, READY
        ],
        [model("m", **(m or {})), model("vip", 8000, priority=90)],
    )
    return reconcile(_plan(path), snap, history or [], mode="automatic")


def _touches_h1(result: ReconcileResult) -> bool:
    return any(a.host_id == "h1" and a.model_id == "m" for a in result.actions)


ROWS: list[tuple[str, dict[str, Any], str, ActionKind]] = [
    ("manual host", {"h1": {"ownership": "manual"}}, "host_manual", DRAIN),
    ("pinned host", {"m": {"pinned_hosts": ["h1"]}}, "pinned_residency", DRAIN),
    ("stale heartbeat", {"h1": {"last_heartbeat": NOW - 3600}}, "host_unreachable", DRAIN),
    (
        "minimum residency",
        {"victim": {"loaded_at": NOW - 10}, "m": {"min_residency_s": 300.0}},
        "minimum_residency",
        DRAIN,
    ),
    (
        "requests in flight",
        {"victim": {"state": "draining", "active_requests": 2}},
        "requests_in_flight",
        UNLOAD,
    ),
    (
        "unknown activity",
        {"victim": {"state": "draining", "active_requests": None}},
        "activity_unknown",
        UNLOAD,
    ),
    (
        "a load still running here",
        {"history": [record("load", "h1", "m", "running")], "victim": {"state": "loading"}},
        "constructive_in_flight",
        UNLOAD,
    ),
    (
        "failure backoff",
        {
            "history": [record("drain", "h1", "m", "failed", finished_at=NOW - 1)],
        },
        "backoff",
        DRAIN,
    ),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("name", "setup", "code", "kind"), ROWS, ids=[r[0] for r in ROWS])
def test_each_gate_refuses_on_every_path(
    path: str, name: str, setup: dict[str, Any], code: str, kind: ActionKind
) -> None:
    result = _run(path, **setup)
    assert not _touches_h1(result), f"{name}: {path} actuated m on h1"
    deferral = result.deferral(kind, "h1", "m")
    assert deferral is not None and deferral.code == code, (name, path, result.deferred)
    assert deferral.message  # a sentence, not only a code


@pytest.mark.parametrize("path", PATHS)
def test_without_a_hazard_every_path_drains(path: str) -> None:
    result = _run(path)
    drains = [(a.kind, a.host_id) for a in result.actions if a.model_id == "m"]
    assert drains == [(DRAIN, "h1")]
    assert result.actions[0].preemption is (path == "preemption")


@pytest.mark.parametrize("path", ["preemption", "repack"])
def test_external_residency_is_never_actuated_on_any_path(path: str) -> None:
    result = _run(path, victim={"managed": False})
    assert not _touches_h1(result)
    if path == "preemption":  # cleanup never nominates what Grid does not own
        deferral = result.deferral(DRAIN, "h1", "m")
        assert deferral is not None and deferral.code == "not_managed"


@pytest.mark.parametrize("vip_fields", [{}, {"min_replicas": 1}])
def test_stale_preemption_of_the_last_baseline_replica_keeps_the_floor(
    vip_fields: dict[str, Any],
) -> None:
    # The stored plan preempts m on h1, but m is required (min_replicas 1) and h1 holds its only
    # managed ready replica: the managed baseline floor refuses a stale plan's preemption, even
    # one a current plan could make (vip outranks m and needs its baseline replica).
    snap = snapshot(
        [host("h1", 12000, residencies=[res("m")])],
        [model("m", min_replicas=1, priority=10), model("vip", 8000, priority=90, **vip_fields)],
    )
    stale = plan(preemptions=[("m", "h1", "vip")])
    result = reconcile(stale, snap, mode="automatic", plan_current=False)
    assert result.actions == []
    deferral = result.deferral(DRAIN, "h1", "m")
    assert deferral is not None and deferral.code == "managed_baseline_floor"
    # The same preemption in a current plan: only when vip holds eviction authority.
    current = reconcile(stale, snap, mode="automatic", plan_current=True)
    drained = current.action(DRAIN, "h1", "m") is not None
    assert drained is bool(vip_fields)


def test_stale_preemptions_cannot_take_two_domains_below_the_floor() -> None:
    # Two victims of m in two racks: draining both would leave one domain, floor two.
    snap = snapshot(
        [
            host("a1", 12000, failure_domain="rack-a", residencies=[res("m")]),
            host("b1", 12000, failure_domain="rack-b", residencies=[res("m")]),
            host("b2", 12000, failure_domain="rack-b", residencies=[res("m")]),
        ],
        [model("m", min_failure_domains=2, max_replicas=3), model("vip", 8000, priority=90)],
    )
    stale = plan(
        ("m", "a1"),
        ("m", "b2"),
        preemptions=[("m", "a1", "vip"), ("m", "b2", "vip")],
    )
    result = reconcile(stale, snap, mode="automatic")
    drained = {a.host_id for a in result.actions if a.kind is DRAIN and a.model_id == "m"}
    assert drained != {"a1", "b2"} and len(drained) <= 1
    assert any(d.code == "failure_domain_floor" for d in result.deferred)


def test_gate_list_names_and_codes_are_stable() -> None:
    names = [g.name for g in GATES]
    assert len(names) == len(set(names))
    standing = [g.name for g in GATES if g.stage is Stage.STANDING]
    assert standing[:5] == [
        "managed_residency",
        "known_model",
        "pinned_host",
        "manual_host",
        "reachable_host",
    ]
    # Only the wait for a READY replacement is left out of the preemption path.
    skipped = [g.name for g in TICK_GATES if Path.PREEMPTION not in g.paths]
    assert skipped == ["replacements_ready"]


# -- each gate alone: one row per gate, evaluated as a unit ---------------------------------

UNIT: dict[str, tuple[dict[str, Any], ActionKind, str]] = {
    # gate name: (hazard, kind, expected code)
    "managed_residency": ({"victim": {"managed": False}}, DRAIN, "not_managed"),
    "known_model": ({"unknown": True}, DRAIN, "unknown_model"),
    "pinned_host": ({"m": {"pinned_hosts": ["h1"]}}, DRAIN, "pinned_residency"),
    "manual_host": ({"h1": {"ownership": "manual"}}, DRAIN, "host_manual"),
    "reachable_host": ({"h1": {"last_heartbeat": NOW - 3600}}, DRAIN, "host_unreachable"),
    "no_dangling_destructive": ({"blocked": True}, DRAIN, "destructive_blocked"),
    "lifecycle_finished": (
        {"history": [record("warm", "h1", "m", "running")]},
        DRAIN,
        "constructive_in_flight",
    ),
    "minimum_residency": (
        {"victim": {"loaded_at": NOW - 10}, "m": {"min_residency_s": 60.0}},
        DRAIN,
        "minimum_residency",
    ),
    "scale_down_cooldown": (
        {"victim": {"last_used_at": NOW - 10}, "m": {"scale_down_cooldown_s": 60.0}},
        DRAIN,
        "scale_down_cooldown",
    ),
    "replacements_ready": ({"h2_state": "warming"}, DRAIN, "replacement_not_ready"),
    "evacuation_make_before_break": (
        {"h1": {"state": "draining"}, "m": {"min_replicas": 1}, "h2_state": "warming"},
        DRAIN,
        "replacement_not_ready",
    ),
    "managed_baseline_floor": (
        {"m": {"min_replicas": 2, "max_replicas": 2}},
        DRAIN,
        "managed_baseline_floor",
    ),
    "failure_domain_floor": (
        # The target spans rack-a (h3, still warming) and rack-b; h1 is rack-a's only replica.
        {"h1": {"failure_domain": "rack-a"}, "m": {"min_failure_domains": 2}, "h3": True},
        DRAIN,
        "failure_domain_floor",
    ),
    "drained_and_idle": (
        {"victim": {"state": "draining", "active_requests": 1}},
        UNLOAD,
        "requests_in_flight",
    ),
    "failure_backoff": (
        {"history": [record("drain", "h1", "m", "failed", finished_at=NOW - 1)]},
        DRAIN,
        "backoff",
    ),
}


def _unit(setup: dict[str, Any], kind: ActionKind) -> tuple[GateContext, Candidate]:
    victim = res("m", **setup.get("victim", {}))
    h2 = host(
        "h2", 12000, failure_domain="rack-b", residencies=[res("m", setup.get("h2_state", "ready"))]
    )
    models = [model("m", **setup.get("m", {}))] if not setup.get("unknown") else []
    h3 = host("h3", 12000, failure_domain="rack-a", residencies=[res("m", "warming")])
    snap = snapshot(
        [
            host(
                "h1",
                12000,
                residencies=[victim],
                **{"failure_domain": "rack-b", **setup.get("h1", {})},
            ),
            h2,
            *([h3] if setup.get("h3") else []),
        ],
        models,
    )
    target = plan(("m", "h2"), ("m", "h3")) if setup.get("h3") else plan(("m", "h2"))
    view = FleetView(snap=snap, plan=target)
    ctx = GateContext(
        view, HistoryIndex(setup.get("history", [])), {"m"} if setup.get("blocked") else set()
    )
    row = view.residency("m", "h1")
    assert row is not None
    scale_down = "scale_down_cooldown_s" in setup.get("m", {})
    return ctx, Candidate(kind, "m", "h1", row, Path.CLEANUP, scale_down=scale_down)


def test_every_gate_has_a_row() -> None:
    assert set(UNIT) == {g.name for g in TICK_GATES}


@pytest.mark.parametrize("gate", TICK_GATES, ids=[g.name for g in TICK_GATES])
def test_each_gate_alone_refuses_its_hazard_and_passes_a_clean_candidate(gate: Gate) -> None:
    setup, kind, code = UNIT[gate.name]
    assert gate.code == code or gate.name == "drained_and_idle"
    ctx, candidate = _unit(setup, kind)
    blocker = gate.check(ctx, candidate)
    assert blocker is not None and blocker.code == code, (gate.name, blocker)
    clean_ctx, clean = _unit({"victim": {"state": "draining"}} if kind is UNLOAD else {}, kind)
    assert gate.check(clean_ctx, clean) is None, gate.name
