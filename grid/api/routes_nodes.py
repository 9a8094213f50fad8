"""PUT /nodes/{node_id}: allocator node registration, heartbeat, receipts and command delivery.

The wire contract is the spec's: the response carries `ttl_seconds`, `model_last_used_at` for the
models resident on the host, and an `allocator` block with the mode, the controller lease TTL in
this server's clock domain and the commands for the authenticated host. With
`request_commands: false` the update only refreshes registry truth and marks placement dirty;
it returns at once and never marks a command delivered. Every reply is signed with the
credential's reply key (`X-Grid-Reply-Signature`, see `grid.fleet.wire.reply_signature`).

One credential speaks for its own host only (grid.runtime.controller.trust): a host over its
heartbeat budget is answered 429 before the controller does any work for it, and named in
status; only so many of its command polls a second may force a tick of their own (a poll past
that budget gets no commands, the next one does), and a host noted for a suspicious report asks
for no pass at all until it has been quiet for a minute (the periodic pass reads it). The
routes the controller accepted are probed for reachability in the background
(`grid.api.reachability`); the update uses what earlier probes found and never waits for one.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response

from grid.api.deps import Node, Service
from grid.api.engine_launch import launch_for
from grid.api.reachability import Reachability
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
def put_node(
    node_id: NodeId, update: NodeUpdate, request: Request, service: Service, node: Node
) -> Response:
    ctl = service.controller  # `node`: the credential, within its host's budget (deps.py)
    reply = ctl.node_update(node_id, node.host_id, update, service.clock())
    if update.allocator is not None:  # probe the accepted routes in the background, never here
        reach: Reachability = request.app.state.reachability
        with ctl.lock:
            entry = ctl.registry.hosts.get(reply.host_id)
            ports = [r.port for r in entry.routes] if entry is not None else []
        # A relay node is never dialled (its engines are reached over its tunnel): no address.
        envelope = update.allocator
        address = None if envelope.relay else envelope.advertise_address
        reach.submit(reply.host_id, address, ports)
        ctl.set_unreachable(reply.host_id, reach.problems(reply.host_id))  # cached verdicts
    commands: list[dict[str, Any]] = []
    held: list[str] = []
    if update.request_commands and ctl.gate.may_force_tick(node.host_id, service.clock()):
        service.ensure_tick(reply.revision)
        delivery = ctl.poll_commands(node.host_id, reply.revision, service.clock())
        commands, held = delivery.commands, delivery.held
    elif not ctl.gate.suspect(node.host_id, service.clock()):
        service.notify()  # a background pass soon (a suspect's updates wait for the periodic)
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
