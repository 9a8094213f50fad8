"""Client keys of /v1 (grid/api/client_keys.py): issue, list, revoke. Operator capability only.

POST /allocator/keys {"name"} answers the key once (201); nothing returns it again. GET lists
every key with its request counts (never the key or its digest); DELETE revokes one at once.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from grid.api.client_keys import ClientKeys
from grid.api.deps import Service, require_operator
from grid.fleet.operator import ClientKeyRow, CreatedKey, KeyRevokeReply, RevokedKey
from grid.fleet.operator import ClientKeys as ClientKeysDoc

router = APIRouter(prefix="/allocator/keys", tags=["client keys"])
admin = [Depends(require_operator)]

KeyName = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")]


class KeyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64)


def client_keys(request: Request) -> ClientKeys:
    keys: ClientKeys = request.app.state.client_keys  # created with the app (grid/api/app.py)
    return keys


def keys_document(keys: ClientKeys) -> ClientKeysDoc:
    """What status and `key list` show: the setting, every key, the counts by name."""
    return ClientKeysDoc(
        open_access=keys.open_access,
        keys=[ClientKeyRow.model_validate(row) for row in keys.rows()],
        requests=keys.counts(),
    )


@router.post("", dependencies=admin, status_code=201, response_model=CreatedKey)
def create_key(body: KeyRequest, request: Request, service: Service) -> JSONResponse:
    key, record = client_keys(request).create(body.name, service.clock())
    answer = CreatedKey(
        name=record.name, key=key, prefix=record.prefix, created_at=record.created_at
    )
    return JSONResponse(
        answer.model_dump(mode="json"), status_code=201, headers={"Cache-Control": "no-store"}
    )


@router.get("", dependencies=admin)
def list_keys(request: Request) -> ClientKeysDoc:
    return keys_document(client_keys(request))


@router.delete("/{name}", dependencies=admin)
def revoke_key(name: KeyName, request: Request, service: Service) -> KeyRevokeReply:
    record = client_keys(request).revoke(name, service.clock())
    return KeyRevokeReply(revoked=RevokedKey(name=record.name, revoked_at=record.revoked_at))
