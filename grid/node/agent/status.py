"""`status.json`: what the running agent last saw and did, for `grid allocator node status`.

Written by the agent after every heartbeat cycle (atomic, 0600). It holds no secret: not the
node credential, not the engine key. Readers treat a missing or stale file as "not running".
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from grid.fleet.files import atomic_write_text
from grid.fleet.models import HostState
from grid.fleet.wire import (
    CommandBrief,
    NodeStatus,
    StatusReceipt,
    StatusResidency,
    WireCommand,
)
from grid.node.agent.state import ResidencyRecord
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
    doc = NodeStatus(
        schema_version=1,
        updated_at=agent.clock(),
        pid=os.getpid(),
        instance=agent.instance,
        host_id=agent.config.host_id,
        node_id=agent.config.record_id,
        grid_url=agent.config.grid_url,
        lifecycle=lifecycle.value,
        reasons=list(decision.reasons),
        throttle_fraction=decision.throttle_fraction,
        stopping=agent.stopping,
        registered=agent.registered,
        controller_mode=agent.controller_mode,
        last_heartbeat_at=agent.last_heartbeat_at,
        last_error=agent.last_error,
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
    with contextlib.suppress(OSError):
        atomic_write_text(agent.state_dir / STATUS_NAME, doc.model_dump_json(indent=1) + "\n")


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
