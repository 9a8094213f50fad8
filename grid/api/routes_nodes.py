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
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response

from grid.api.deps import Node, Service
from grid.api.reachability import Reachability
from grid.fleet import (
    REPLY_SIGNATURE_HEADER,
    NodeReply,
    NodeUpdate,
    reply_signature,
    wire_json,
)

router = APIRouter(tags=["nodes"])

NodeId = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9._:@-]+$")]


@router.put("/nodes/{node_id}", response_model=NodeReply)
def put_node(
    node_id: NodeId, update: NodeUpdate, request: Request, service: Service, node: Node
) -> Response:
    # `node`: the credential, within its host's budget (deps.py); the controller assembles the
    # whole reply (grid/runtime/controller/operations.py `handle_heartbeat`).
    reach: Reachability = request.app.state.reachability
    answer = service.controller.handle_heartbeat(node_id, node.host_id, update, service, reach)
    # Signed over the exact bytes sent, so the node can tell this controller from an impostor.
    body = json.dumps(wire_json(answer), separators=(",", ":")).encode()
    signature = reply_signature(node.reply_key, node_id, body)
    return Response(
        body, media_type="application/json", headers={REPLY_SIGNATURE_HEADER: signature}
    )
