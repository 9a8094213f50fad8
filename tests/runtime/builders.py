"""Builders for reconciler tests: hand-written snapshots, explicit plans, history records.

Plans are written by hand here (not solved) so that each test states exactly which target the
reconciler acts on; the CLI tests run the real planner on the shipped example snapshots.
"""

from __future__ import annotations

from typing import Any

from grid.fleet.actions import ActionKind, ActionRecord, RecordStatus, action_id
from grid.fleet.models import Assignment, Plan, Preemption, SolverReport
from tests.planner.fleets import NOW, Doc, host, snapshot

# Hosts, snapshots and the clock are the planner tests' builders; models and residencies differ
# (reconciler tests default to no minimum residency and to aged, idle residencies).
__all__ = ["NOW", "Doc", "host", "model", "plan", "record", "res", "snapshot"]


def model(model_id: str, memory_mb: int = 4096, **fields: Any) -> Doc:
    doc: Doc = {"model_id": model_id, "memory_mb": memory_mb, "min_residency_s": 0.0}
    doc.update(fields)
    return doc


def res(model_id: str, state: str = "ready", memory_mb: int = 4096, **fields: Any) -> Doc:
    doc: Doc = {
        "model_id": model_id,
        "memory_mb": memory_mb,
        "state": state,
        "loaded_at": NOW - 3600,
        "last_used_at": NOW - 3600,
        "active_requests": 0,
    }
    doc.update(fields)
    return doc


def plan(
    *placements: tuple[str, str],
    memory_mb: int = 4096,
    preemptions: list[tuple[str, str, str]] | None = None,
) -> Plan:
    """A hand-written plan: (model, host) pairs; preemptions as (victim, host, beneficiary)."""
    return Plan(
        assignments=[
            Assignment(model_id=m, host_id=h, memory_mb=memory_mb, runtime="llama.cpp")
            for m, h in placements
        ],
        preemptions=[
            Preemption(victim_model_id=v, host_id=h, beneficiary_model_id=b)
            for v, h, b in (preemptions or [])
        ],
        solver=SolverReport(engine="hand", status="HAND", wall_ms=0.0),
    )


def record(
    kind: str,
    host_id: str,
    model_id: str,
    status: str = "pending",
    *,
    attempt: int = 1,
    created_at: float = NOW - 30,
    **fields: Any,
) -> ActionRecord:
    k = ActionKind(kind)
    values: Doc = {
        "action_id": action_id(k, host_id, model_id, attempt),
        "kind": k,
        "host_id": host_id,
        "model_id": model_id,
        "status": RecordStatus(status),
        "attempt": attempt,
        "created_at": created_at,
    }
    if status in {"delivered", "running"}:
        values["delivered_at"] = created_at + 1
    values.update(fields)
    return ActionRecord(**values)
