"""`status.json`: what the running agent last saw and did, for `grid allocator node status`.

Written by the agent after every heartbeat cycle (atomic, 0600). It holds no secret: not the
node credential, not the engine key. Readers treat a missing or stale file as "not running".
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from grid.fleet import (
    CommandBrief,
    HostState,
    NodeStatus,
    StatusReceipt,
    StatusResidency,
    WireCommand,
    atomic_write_text,
)
from grid.node.agent.config import NodeConfig
from grid.node.agent.link import ControllerLink
from grid.node.agent.state import AgentState, ResidencyRecord
from grid.node.engines import EngineStatus
from grid.node.protection import Decision

STATUS_NAME = "status.json"


def status_document(
    *,
    config: NodeConfig,
    instance: str,
    lifecycle: HostState,
    decision: Decision,
    stopping: bool,
    link: ControllerLink,
    state: AgentState,
    statuses: Mapping[str, EngineStatus],
    now: float,
) -> NodeStatus:
    """What the agent saw and did in one cycle (`statuses`: the supervisor's view polled in the
    same cycle)."""
    return NodeStatus(
        schema_version=1,
        updated_at=now,
        pid=os.getpid(),
        instance=instance,
        host_id=config.host_id,
        node_id=config.record_id,
        grid_url=config.grid_url,
        lifecycle=lifecycle.value,
        reasons=list(decision.reasons),
        throttle_fraction=decision.throttle_fraction,
        stopping=stopping,
        registered=link.registered,
        controller_mode=link.controller_mode,
        last_heartbeat_at=link.last_heartbeat_at,
        last_error=link.last_error,
        highest_term=state.highest_term,
        plan_sequence=state.plan_sequence,
        in_flight=_brief(state.in_flight.command) if state.in_flight is not None else None,
        queue=[_brief(q.command) for q in state.queue],
        residencies=[
            _residency(model_id, record, statuses.get(model_id))
            for model_id, record in sorted(state.residencies.items())
        ],
        receipts=[
            StatusReceipt.model_validate(r.model_dump(mode="json")) for r in state.receipts[-20:]
        ],
    )


def write_status(state_dir: Path, doc: NodeStatus) -> None:
    """Atomic, owner-only; a failed write is skipped (readers treat a stale file as stale)."""
    with contextlib.suppress(OSError):
        atomic_write_text(state_dir / STATUS_NAME, doc.model_dump_json(indent=1) + "\n")


def _residency(
    model_id: str, record: ResidencyRecord, seen: EngineStatus | None
) -> StatusResidency:
    return StatusResidency(
        model_id=model_id,
        state=record.state.value,
        memory_mb=record.memory_mb,
        pid=seen.pid if seen is not None else None,
        port=seen.port if seen is not None else None,
        engine=seen.state.value if seen is not None else None,
        reason=record.reason,
        runtime=seen.runtime if seen is not None else None,
        settings=dict(seen.settings) if seen is not None else {},
    )


def _brief(command: WireCommand) -> CommandBrief:
    return CommandBrief(
        action_id=command.action_id,
        kind=command.kind,
        model_id=command.model_id,
        memory_mb=command.memory_mb,
    )


def read_status(state_dir: Path) -> NodeStatus | None:
    """The agent's last status document; None when there is none or it cannot be read."""
    try:
        return NodeStatus.model_validate_json((state_dir / STATUS_NAME).read_bytes())
    except (OSError, ValueError):
        return None
