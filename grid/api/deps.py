"""Request dependencies shared by the routers: the controller service and the credential checks."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from grid.api.auth import Credentials, NodeIdentity
from grid.api.credential_book import CredentialBook
from grid.fleet import NODE_HEADER, OPERATOR_HEADER, GridError
from grid.runtime.controller import ControllerService

# FastAPI security schemes: they read the headers for the checks below and also document the
# credentials in the OpenAPI schema. auto_error=False: a missing credential gets the checks'
# own refusal (Grid's error body), not FastAPI's.
_operator_header = APIKeyHeader(
    name=OPERATOR_HEADER, auto_error=False, description="Operator capability"
)
_bearer = HTTPBearer(auto_error=False, description="Operator capability as a Bearer token")
_node_header = APIKeyHeader(
    name=NODE_HEADER, auto_error=False, description="Host-scoped node credential"
)


def get_service(request: Request) -> ControllerService:
    service: ControllerService = request.app.state.service
    return service


def get_credentials(request: Request) -> Credentials:
    credentials: Credentials = request.app.state.credentials
    return credentials


def presented_operator(
    header: Annotated[str | None, Depends(_operator_header)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str | None:
    """The operator capability a request carries, in either header (None: none)."""
    return header or (bearer.credentials if bearer is not None else None)


Presented = Annotated[str | None, Depends(presented_operator)]


def require_operator(request: Request, presented: Presented) -> None:
    get_credentials(request).check_operator(presented)


def is_operator(request: Request, presented: Presented) -> bool:
    """Whether a valid operator capability came with a read request (never a refusal)."""
    if not presented:
        return False
    try:
        get_credentials(request).check_operator(presented)
    except GridError:
        return False
    return True


async def node_identity(
    request: Request, header: Annotated[str | None, Depends(_node_header)]
) -> NodeIdentity:
    """A valid, unrevoked node credential (the credential book refuses a revoked one) whose
    host is within its heartbeat budget (trust.py): checked on the event loop, before the
    body is validated or a worker thread is taken, so a flood costs next to nothing."""
    service = get_service(request)
    now = service.clock()
    identity = get_credentials(request).verify_node_token(header, now=now)
    book: CredentialBook = request.app.state.credential_book
    book.check(identity, now)
    ctl = service.controller
    if not ctl.gate.admit(identity.host_id, now):
        raise GridError(
            "heartbeat_rate_limited",
            f"this host sends updates faster than the controller takes from one host "
            f"({ctl.config.heartbeat_rate_per_s:g} per second); this one was not processed",
            fix="send one heartbeat per interval (a node agent does); the host is named in status",
            details={"http_status": 429, "retry_after_s": 1},
        )
    return identity


Service = Annotated[ControllerService, Depends(get_service)]
Operator = Depends(require_operator)
Node = Annotated[NodeIdentity, Depends(node_identity)]
