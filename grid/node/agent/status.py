"""`status.json`: what the running agent last saw and did, for `grid allocator node status`.

Written by the agent after every heartbeat cycle (atomic, 0600). It holds no secret: not the
node credential, not the engine key. Readers treat a missing or stale file as "not running".
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grid.fleet.files import atomic_write_text
from grid.fleet.models import HostState
from grid.node.engines.base import EngineStatus
from grid.node.protection import Decision

if TYPE_CHECKING:
    from grid.node.agent.loop import NodeAgent

STATUS_NAME = "status.json"


def write_status(
    agent: NodeAgent,
    lifecycle: HostState,
    decision: Decision,
    statuses: Mapping[str, EngineStatus],
) -> None:
    """`statuses`: the supervisor's view polled earlier in the same cycle."""
    state = agent.keeper.read()
    doc: dict[str, Any] = {
        "schema_version": 1,
        "updated_at": agent.clock(),
        "pid": os.getpid(),
        "instance": agent.instance,
        "host_id": agent.config.host_id,
        "node_id": agent.config.record_id,
        "grid_url": agent.config.grid_url,
        "lifecycle": lifecycle.value,
        "reasons": list(decision.reasons),
        "throttle_fraction": decision.throttle_fraction,
        "stopping": agent.stopping,
        "registered": agent.registered,
        "controller_mode": agent.controller_mode,
        "last_heartbeat_at": agent.last_heartbeat_at,
        "last_error": agent.last_error,
        "highest_term": state.highest_term,
        "plan_sequence": state.plan_sequence,
        "in_flight": _brief(state.in_flight.command) if state.in_flight is not None else None,
        "queue": [_brief(q.command) for q in state.queue],
        "residencies": [
            {
                "model_id": model_id,
                "state": record.state.value,
                "memory_mb": record.memory_mb,
                "pid": statuses[model_id].pid if model_id in statuses else None,
                "port": statuses[model_id].port if model_id in statuses else None,
                "engine": statuses[model_id].state.value if model_id in statuses else None,
                "reason": record.reason,
            }
            for model_id, record in sorted(state.residencies.items())
        ],
        "receipts": [
            {
                "action_id": r.action_id,
                "kind": r.kind,
                "model_id": r.model_id,
                "status": r.status.value,
                "code": r.code,
                "message": r.message,
                "duration_seconds": r.duration_seconds,
                "artifact_fetched": r.artifact_fetched,
                "finished_at": r.finished_at,
                "acknowledged": r.acknowledged,
            }
            for r in state.receipts[-20:]
        ],
    }
    with contextlib.suppress(OSError):
        atomic_write_text(agent.state_dir / STATUS_NAME, json.dumps(doc, indent=1) + "\n")


def _brief(command: dict[str, Any]) -> dict[str, Any]:
    return {k: command.get(k) for k in ("action_id", "kind", "model_id", "memory_mb")}


def read_status(state_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((state_dir / STATUS_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
