"""A standby controller never acts (docs/high-availability.md): the mutation redirect.

On a controller that does not lead, a request that would change something (any method but
GET, HEAD and OPTIONS, outside `/v1`) answers `307 Temporary Redirect` to the same path and
query on the leader, with Grid's error body (`not_leader`), or `503 no_leader` while no leader
is elected. Reads (`/allocator/status`, `/v1/models`, metrics, the dashboard), `/v1` inference
and node credentials (minted from the cluster's shared key) are served here, from the state and
routes the standby follows. A node heartbeat (`PUT /nodes/...`) is redirected only while a
fresh read of etcd names the leader: when etcd cannot be read (no quorum) it is taken here to
keep the routes fresh, and the controller acts on none of it
(`grid.runtime.controller.etcd.ha.HAController`).
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from grid.api.errors import error_body
from grid.runtime.controller.etcd import HAService

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Changes nothing the controller keeps: a node credential is minted from the cluster's key.
ANYWHERE = frozenset({"/allocator/node-credentials"})


class StandbyRedirect:
    def __init__(self, app: ASGIApp, service: HAService) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._redirected(scope):
            await self.app(scope, receive, send)
            return
        authority = self.service.authority()
        leader = authority.get("leader_url")
        if isinstance(leader, str) and leader:
            query = scope.get("query_string", b"").decode("latin-1")
            location = leader.rstrip("/") + scope["path"] + (f"?{query}" if query else "")
            status, headers = 307, [(b"location", location.encode("latin-1"))]
            body = error_body(
                "not_leader",
                f"this controller is a standby; the leader is {leader}",
                f"send the request to the leader: {location}",
                "grid allocator status",
            )
        else:
            status, headers = 503, [(b"retry-after", b"1")]
            body = error_body(
                "no_leader",
                "this controller is a standby and no leader is elected yet",
                "retry in a few seconds (a standby leads within the lease TTL)",
                "grid allocator status",
            )
        payload = json.dumps(body).encode()
        headers += [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    def _redirected(self, scope: Scope) -> bool:
        path: str = scope["path"]
        if scope["method"] in SAFE_METHODS or path.startswith("/v1/") or path in ANYWHERE:
            return False
        if self.service.leads():
            return False
        return not (path.startswith("/nodes/") and not self.service.leader_confirmed())
