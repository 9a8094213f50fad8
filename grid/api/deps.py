"""Request dependencies shared by the routers: the controller service and the credential checks."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from grid.api.auth import Credentials, NodeIdentity
from grid.fleet.wire import NODE_HEADER, OPERATOR_HEADER
from grid.runtime.controller.service import ControllerService

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


def require_operator(
    request: Request,
    header: Annotated[str | None, Depends(_operator_header)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    presented = header or (bearer.credentials if bearer is not None else None)
    get_credentials(request).check_operator(presented)


def node_identity(
    request: Request, header: Annotated[str | None, Depends(_node_header)]
) -> NodeIdentity:
    service = get_service(request)
    return get_credentials(request).verify_node_token(header, now=service.clock())


Service = Annotated[ControllerService, Depends(get_service)]
Operator = Depends(require_operator)
Node = Annotated[NodeIdentity, Depends(node_identity)]
