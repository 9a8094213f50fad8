"""Node credentials: mint, list and revoke (operator capability; `credential_book.py`).

- `POST /allocator/node-credentials` mints a host-scoped credential with its reply key.
- `GET /allocator/node-credentials[?host_id=H]` lists them (ids, hosts, times, state; never a
  token or key).
- `POST /allocator/node-credentials/revoke` with `{"credential_id": ID}` or `{"host_id": H}`
  revokes one credential or every credential of a host: the host's next request is refused, its
  routes stop being used at once, and the relay tunnel a revoked credential opened is closed (its
  reconnect is refused at the handshake).
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, model_validator

from grid.api.auth import DEFAULT_NODE_TTL_S, MAX_NODE_TTL_S, Credentials
from grid.api.credential_book import CredentialBook
from grid.api.deps import Service, get_credentials, require_operator
from grid.api.relay import RelayHub
from grid.fleet.operator import CredentialList, MintedCredential, RevokeReply
from grid.runtime.controller import ControllerService

router = APIRouter(
    prefix="/allocator/node-credentials",
    tags=["node credentials"],
    dependencies=[Depends(require_operator)],
)

HostId = Field(default=None, min_length=1, max_length=256, pattern=r"^\S+$")


class CredentialRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    host_id: str | None = HostId
    ttl_seconds: float = Field(default=DEFAULT_NODE_TTL_S, gt=0, le=MAX_NODE_TTL_S)


class RevokeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    credential_id: str | None = Field(default=None, min_length=1, max_length=64)
    host_id: str | None = HostId

    @model_validator(mode="after")
    def _one(self) -> RevokeRequest:
        if (self.credential_id is None) == (self.host_id is None):
            raise ValueError("name exactly one of credential_id and host_id")
        return self


def book_of(request: Request) -> CredentialBook:
    book: CredentialBook = request.app.state.credential_book
    return book


Book = Annotated[CredentialBook, Depends(book_of)]


@router.post("")
def post_node_credential(
    body: CredentialRequest,
    service: Service,
    book: Book,
    credentials: Annotated[Credentials, Depends(get_credentials)],
) -> MintedCredential:
    host_id = body.host_id or f"host-{secrets.token_hex(6)}"
    minted = book.issue(
        credentials, host_id, now=service.clock(), ttl_s=body.ttl_seconds, source="token_write"
    )
    return MintedCredential(**dict(minted), generated_host_id=body.host_id is None)


@router.get("")
def list_node_credentials(
    service: Service,
    book: Book,
    host_id: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> CredentialList:
    return CredentialList(credentials=book.listing(service.clock(), host_id))


def _revoke(
    body: RevokeRequest, service: ControllerService, book: CredentialBook
) -> tuple[list[str], list[str]]:
    """Revoke durably, then drop the hosts' routes: the ids revoked and the hosts touched."""
    now = service.clock()
    revoked = book.revoke(credential_id=body.credential_id, host_id=body.host_id, now=now)
    hosts = {body.host_id} if body.host_id else set()
    hosts |= {r.host_id for r in book.listing(now) if r.credential_id in revoked}
    for host in sorted(hosts):
        if service.controller.forget_routes(host):
            service.notify()
    return revoked, sorted(hosts)


@router.post("/revoke")
async def revoke_node_credentials(
    body: RevokeRequest, request: Request, service: Service, book: Book
) -> RevokeReply:
    """The book and the controller off the event loop; then, on it, the relay tunnel each
    revoked credential opened is closed (the node's reconnect is refused at the handshake)."""
    revoked, hosts = await run_in_threadpool(_revoke, body, service, book)
    hub: RelayHub = request.app.state.relay
    closed: list[str] = []
    for host in hosts:
        session = hub.session(host, service.clock())
        credential = session.credential if session is not None else None
        if session is not None and credential is not None and book.revoked(credential):
            await session.close(1008, "node credential revoked")
            closed.append(host)
    return RevokeReply(revoked=revoked, hosts=hosts, tunnels_closed=closed)
