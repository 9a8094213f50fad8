"""Client keys of /v1 (grid/api/client_keys.py): issue, list, revoke. Operator capability only.

POST /allocator/keys {"name"} answers the key once (201); nothing returns it again. GET lists
every key with its request counts (never the key or its digest); DELETE revokes one at once.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from grid.api.client_keys import ClientKeys
from grid.api.deps import Service, require_operator

router = APIRouter(prefix="/allocator/keys", tags=["client keys"])
admin = [Depends(require_operator)]

KeyName = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]


class KeyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64)


def client_keys(request: Request) -> ClientKeys:
    keys: ClientKeys = request.app.state.client_keys  # created with the app (grid/api/app.py)
    return keys


def keys_document(keys: ClientKeys) -> dict[str, Any]:
    """What status and `key list` show: the setting, every key, the counts by name."""
    return {"open_access": keys.open_access, "keys": keys.rows(), "requests": keys.counts()}


@router.post("", dependencies=admin, status_code=201)
def create_key(body: KeyRequest, request: Request, service: Service) -> JSONResponse:
    key, record = client_keys(request).create(body.name, service.clock())
    answer = {
        "name": record.name,
        "key": key,
        "prefix": record.prefix,
        "created_at": record.created_at,
    }
    return JSONResponse(answer, status_code=201, headers={"Cache-Control": "no-store"})


@router.get("", dependencies=admin)
def list_keys(request: Request) -> dict[str, Any]:
    return keys_document(client_keys(request))


@router.delete("/{name}", dependencies=admin)
def revoke_key(name: KeyName, request: Request, service: Service) -> dict[str, Any]:
    record = client_keys(request).revoke(name, service.clock())
    return {"revoked": {"name": record.name, "revoked_at": record.revoked_at}}
