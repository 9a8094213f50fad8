"""Small builders for hand-written fleet snapshots in planner tests.

Every builder returns plain JSON-shaped dicts, and `snapshot()` passes them through
`parse_snapshot`, so each test fleet is also a valid schema-v1 document.
"""

from __future__ import annotations

from typing import Any

from grid.fleet.models import FleetSnapshot
from grid.fleet.snapshot import parse_snapshot

NOW = 1_785_300_000.0

Doc = dict[str, Any]


def host(host_id: str, capacity_mb: int = 16384, **fields: Any) -> Doc:
    doc: Doc = {"host_id": host_id, "capacity_mb": capacity_mb, "last_heartbeat": NOW}
    doc.update(fields)
    return doc


def model(model_id: str, memory_mb: int = 4096, **fields: Any) -> Doc:
    doc: Doc = {"model_id": model_id, "memory_mb": memory_mb}
    doc.update(fields)
    return doc


def resident(model_id: str, memory_mb: int, state: str = "ready", **fields: Any) -> Doc:
    doc: Doc = {"model_id": model_id, "memory_mb": memory_mb, "state": state}
    doc.update(fields)
    return doc


def want(replicas: int, **fields: Any) -> Doc:
    """A demand entry that overrides the forecast with an exact replica count."""
    doc: Doc = {"desired_replicas": replicas}
    doc.update(fields)
    return doc


def snapshot(
    hosts: list[Doc],
    models: list[Doc],
    demand: dict[str, Doc] | None = None,
    policy: Doc | None = None,
    now: float = NOW,
) -> FleetSnapshot:
    doc: Doc = {"schema_version": 1, "now": now, "hosts": hosts, "models": models}
    if demand:
        doc["demand"] = demand
    if policy:
        doc["policy"] = policy
    return parse_snapshot(doc)
