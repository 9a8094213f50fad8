"""Builders for hand-written portfolio snapshots (plain JSON-shaped dicts, parsed for real)."""

from __future__ import annotations

from typing import Any

from grid.fleet.models import FleetSnapshot, Plan
from grid.fleet.snapshot import parse_snapshot
from grid.planner.plan import make_plan
from tests.planner.fleets import NOW, host, model, resident

Doc = dict[str, Any]

__all__ = ["NOW", "host", "model", "plan_of", "resident", "work", "wsnapshot"]


def work(observations: int = 5, offered: float = 0.5, **fields: Any) -> Doc:
    doc: Doc = {"observations": observations, "offered_concurrency": offered}
    doc.update(fields)
    return doc


def wsnapshot(
    hosts: list[Doc],
    models: list[Doc],
    workloads: dict[str, Doc],
    *,
    outcomes: list[Doc] | None = None,
    demand: dict[str, Doc] | None = None,
    policy: Doc | None = None,
) -> FleetSnapshot:
    doc: Doc = {
        "schema_version": 1,
        "now": NOW,
        "hosts": hosts,
        "models": models,
        "workloads": workloads,
        "outcomes": outcomes or [],
        "demand": demand or {},
        "policy": policy or {},
    }
    return parse_snapshot(doc)


def plan_of(snap: FleetSnapshot, engine: str = "cpsat") -> Plan:
    return make_plan(snap, engine=engine, time_limit_s=5.0, deterministic=True)
