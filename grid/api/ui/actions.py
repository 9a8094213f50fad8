"""The operator actions the dashboard offers that the control surface lacked: drain or undrain
a host, and set a profile's replica bounds without resending the whole profile.

    PUT    /allocator/hosts/{host_id}/drain      {"reason": "..."}   drain (idempotent)
    DELETE /allocator/hosts/{host_id}/drain                          undrain (idempotent)
    PATCH  /allocator/models/{model_id}/replicas {"min_replicas": 1, "max_replicas": 3}

Each needs the operator capability, checked before the handler runs (nothing changes without
it). The bounds go through the same profile validation as PUT /allocator/models/{model_id}.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, ConfigDict, Field

from grid.api.deps import Service, require_operator
from grid.fleet import GridError
from grid.runtime.controller import set_host_drain

router = APIRouter(
    prefix="/allocator", tags=["allocator"], dependencies=[Depends(require_operator)]
)

Name = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^\S+$")]


class DrainBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(default="operator drain", max_length=200)


class ReplicaBounds(BaseModel):
    model_config = ConfigDict(extra="forbid")
    min_replicas: int | None = Field(default=None, ge=0, le=10_000)
    max_replicas: int | None = Field(default=None, ge=0, le=10_000)


@router.put("/hosts/{host_id}/drain")
def drain_host(host_id: Name, service: Service, body: DrainBody | None = None) -> dict[str, Any]:
    reason = (body or DrainBody()).reason
    result = set_host_drain(service.controller, host_id, reason, service.clock())
    service.notify()
    return result


@router.delete("/hosts/{host_id}/drain")
def undrain_host(host_id: Name, service: Service) -> dict[str, Any]:
    result = set_host_drain(service.controller, host_id, None, service.clock())
    service.notify()
    return result


@router.patch("/models/{model_id}/replicas")
def set_replica_bounds(model_id: Name, body: ReplicaBounds, service: Service) -> dict[str, Any]:
    ctl = service.controller
    current = ctl.profiles.get(model_id)
    if current is None:
        raise GridError(
            "unknown_model",
            f"no model profile named {model_id!r}",
            fix="set the profile first with `grid allocator model set`",
            next_command=f"grid allocator model set {model_id} --memory-mb MB",
        )
    profile = current.model_dump(mode="json")
    profile.update(body.model_dump(exclude_none=True))
    saved = ctl.put_profile(model_id, profile, service.clock())
    service.notify()
    return {"profile": saved.model_dump(mode="json")}
