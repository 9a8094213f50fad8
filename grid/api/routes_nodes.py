"""PUT /nodes/{node_id}: allocator node registration, heartbeat, receipts and command delivery.

The wire contract is the spec's: the response carries `ttl_seconds`, `model_last_used_at` for the
models resident on the host, and an `allocator` block with the mode, the controller lease TTL in
this server's clock domain and the commands for the authenticated host. With
`request_commands: false` the update only refreshes registry truth and marks placement dirty;
it returns at once and never marks a command delivered. Every reply is signed with the
credential's reply key (`X-Grid-Reply-Signature`, see `grid.fleet.wire.reply_signature`).
A node that advertises an engine address has its routes probed first (`grid.api.reachability`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Response

from grid.api.deps import Node, Service
from grid.api.engine_launch import launch_for
from grid.api.reachability import REACHABILITY
from grid.fleet.wire import (
    REPLY_SIGNATURE_HEADER,
    AckAnswer,
    NodeReply,
    NodeUpdate,
    ReplyAllocator,
    reply_signature,
    wire_json,
)

router = APIRouter(tags=["nodes"])

NodeId = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9._:@-]+$")]


@router.put("/nodes/{node_id}", response_model=NodeReply)
def put_node(node_id: NodeId, update: NodeUpdate, service: Service, node: Node) -> Response:
    ctl = service.controller
    unreachable = REACHABILITY.problems(update)  # probes outside the controller lock
    with ctl.lock:
        if unreachable:
            ctl.registry.unreachable[node.host_id] = unreachable
        else:
            ctl.registry.unreachable.pop(node.host_id, None)
    reply = ctl.node_update(node_id, node.host_id, update, service.clock())
    commands: list[dict[str, Any]] = []
    held: list[str] = []
    if update.request_commands:
        service.ensure_tick(reply.revision)
        delivery = ctl.poll_commands(node.host_id, reply.revision, service.clock())
        commands, held = delivery.commands, delivery.held
    else:
        service.notify()
    now = service.clock()
    answer = NodeReply(
        node_id=node_id,
        host_id=reply.host_id,
        ttl_seconds=ctl.config.node_ttl_s,
        model_last_used_at=ctl.last_used_for(reply.host_id),
        acknowledgements=[
            AckAnswer(action_id=o.action_id, result=o.result.value) for o in reply.acknowledgements
        ],
        allocator=ReplyAllocator(
            schema_version=1,
            mode=ctl.mode.value,
            controller_lease_ttl_seconds=round(ctl.lease_ttl(now), 3),
            revision=reply.revision,
            commands=commands,
            held_destructive=held,
        ),
        launch=launch_for(ctl, reply.host_id, now),
    )
    # Signed over the exact bytes sent, so the node can tell this controller from an impostor.
    body = json.dumps(wire_json(answer), separators=(",", ":")).encode()
    signature = reply_signature(node.reply_key, node_id, body)
    return Response(
        body, media_type="application/json", headers={REPLY_SIGNATURE_HEADER: signature}
    )
