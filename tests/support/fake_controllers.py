"""Fake controller endpoints (test doubles, never shipped) for the node's failover client: each
answers a node update as a leader, a standby naming a leader, or an unreachable machine."""

from __future__ import annotations

from dataclasses import dataclass, field

from grid.fleet.errors import GridError
from grid.fleet.wire import NodeReply, NodeUpdate, ReplyAllocator


@dataclass
class FakeControllerEndpoint:
    base_url: str
    behaviour: str = "leader"  # leader | standby | down | refuse
    leader_url: str | None = None
    calls: list[str] = field(default_factory=list)

    def put_node(self, node_id: str, update: NodeUpdate) -> NodeReply:
        self.calls.append(node_id)
        if self.behaviour == "down":
            raise GridError("controller_unreachable", f"no controller answers at {self.base_url}")
        if self.behaviour == "refuse":
            raise GridError("invalid_node_credential", "refused", details={"http_status": 403})
        if self.behaviour == "standby":
            location = f"{self.leader_url}/nodes/{node_id}" if self.leader_url else None
            code = "not_leader" if self.leader_url else "no_leader"
            raise GridError(code, "standby", details={"http_status": 307, "location": location})
        return NodeReply(
            node_id=node_id,
            host_id=update.host_id or node_id,
            ttl_seconds=60,
            allocator=ReplyAllocator(schema_version=1, mode="automatic"),
        )

    def close(self) -> None:
        self.calls.append("closed")
