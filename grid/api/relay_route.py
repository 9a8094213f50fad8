"""WebSocket /relay/{host_id}: where each node agent's tunnel arrives (grid/api/relay.py).

The handshake must carry the node credential in `X-Grid-Allocator-Node-Token` and the path must
name the host that credential was issued for; anything else is refused before the WebSocket is
accepted (HTTP 401 or 403 with Grid's error body), so nothing is ever routed over it. The
credential is checked by the same dependency that guards PUT /nodes (`grid.api.deps`), so every
rule on node credentials applies here too (a revoked one is refused). The tunnel ends when the
credential expires, or at once when it is revoked (grid/api/routes_credentials.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, cast

from fastapi import APIRouter, Path, Request, WebSocket
from fastapi.responses import JSONResponse

from grid.api.deps import node_identity
from grid.api.relay import RelayHub, RelaySession
from grid.fleet import NODE_HEADER, GridError
from grid.wire import RELAY_PATH

log = logging.getLogger("grid.relay")
router = APIRouter(tags=["relay"])

HostId = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9._:@-]+$")]


def relay_hub(connection: WebSocket | Request) -> RelayHub:
    hub: RelayHub = connection.app.state.relay  # created with the app (grid/api/app.py)
    return hub


async def _deny(websocket: WebSocket, err: GridError, status: int) -> None:
    body = {"error": err.to_dict()}
    try:  # the server speaks the ASGI denial extension (uvicorn does): a readable refusal
        await websocket.send_denial_response(JSONResponse(body, status_code=status))
    except RuntimeError:  # without it the handshake still fails (HTTP 403), without a body
        await websocket.close(code=1008)


@router.websocket(RELAY_PATH + "/{host_id}")
async def relay(websocket: WebSocket, host_id: HostId) -> None:
    service = websocket.app.state.service
    try:
        # The very check PUT /nodes runs (a WebSocket carries the app and headers it reads).
        identity = await node_identity(cast(Request, websocket), websocket.headers.get(NODE_HEADER))
        if identity.host_id != host_id:
            raise GridError(
                "wrong_host",
                f"the node credential is for another host, not {host_id!r}; no tunnel was opened",
                fix="open the tunnel for the host the credential names (its node.json host_id)",
                next_command="grid allocator token write FILE --host-id ID",
                details={"http_status": 403},
            )
    except GridError as err:
        raw = err.details.get("http_status", 403)
        status = raw if isinstance(raw, int) else 403
        log.warning("relay for %s refused: %s", host_id, err.code)
        await _deny(websocket, err, status)
        return
    await websocket.accept()
    client = websocket.client
    session = RelaySession(
        host_id,
        websocket,
        expires_at=identity.expires_at,
        peer=f"{client.host}:{client.port}" if client is not None else "",
        opened_at=service.clock(),
        credential=identity,
    )
    hub = relay_hub(websocket)
    await hub.attach(session)
    expiry = asyncio.get_running_loop().call_later(
        max(0.0, identity.expires_at - service.clock()),
        lambda: asyncio.ensure_future(session.close(1008, "node credential expired")),
    )
    try:
        await session.run()
    finally:
        expiry.cancel()
        hub.detach(session)
