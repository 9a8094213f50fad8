"""The allocator's control surface (spec "HTTP control surface").

GET /allocator/status is read-only and follows the server's loopback visibility; every other
route needs the operator capability and changes nothing when it is missing or wrong (the check
runs before the handler).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from grid.api.deps import Service, is_operator, require_operator
from grid.api.routes_keys import keys_document
from grid.demand import parse_observation
from grid.fleet.errors import GridError
from grid.runtime.controller.status import status_document

router = APIRouter(prefix="/allocator", tags=["allocator"])
admin = [Depends(require_operator)]

ModelId = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^\S+$")]
MAX_OBSERVATIONS = 1000


class ModeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    mode: Literal["observe", "recommend", "automatic"]


class ObservationBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    observations: list[dict[str, Any]] = Field(max_length=MAX_OBSERVATIONS)


@router.get("/status")
def get_status(
    request: Request,
    service: Service,
    operator: Annotated[bool, Depends(is_operator)],
    history: Annotated[int, Query(ge=0, le=512)] = 50,
) -> dict[str, Any]:
    """Public; with a valid operator capability it also shows operator-only details (which
    advertised engine ports the controller cannot reach)."""
    now = service.clock()
    doc = status_document(service.controller, now, history=history, detail=operator)
    # The router's side (docs/addressing.md "Relay"): live tunnels, each route's last failure.
    doc["relay"] = request.app.state.relay.describe(now)
    doc["route_failures"] = request.app.state.proxy.failure_rows()
    doc["client_keys"] = keys_document(request.app.state.client_keys)
    return doc


@router.put("/models/{model_id}", dependencies=admin)
def put_model(
    model_id: ModelId,
    service: Service,
    profile: Annotated[dict[str, Any], Body(description="A model profile (docs/snapshot.md)")],
) -> dict[str, Any]:
    saved = service.controller.put_profile(model_id, profile, service.clock())
    service.notify()
    return {"profile": saved.model_dump(mode="json")}


@router.delete("/models/{model_id}", dependencies=admin)
def delete_model(model_id: ModelId, service: Service) -> dict[str, Any]:
    tomb = service.controller.remove_profile(model_id, service.clock())
    service.notify()
    return {"tombstone": tomb.model_dump(mode="json")}


@router.put("/mode", dependencies=admin)
def put_mode(body: ModeBody, service: Service) -> dict[str, Any]:
    result = service.controller.set_mode(body.mode, service.clock())
    service.notify()
    return result


@router.post("/tick", dependencies=admin)
def post_tick(service: Service) -> dict[str, Any]:
    ctl = service.controller
    revision = ctl.request_tick()
    service.ensure_tick(revision)
    report = ctl.last_tick
    return {
        "tick": None if report is None else vars(report).copy(),
        "revision": revision,
        "success_revision": ctl.success_revision,
    }


@router.post("/observations", dependencies=admin)
def post_observations(body: ObservationBatch, service: Service) -> dict[str, Any]:
    ctl = service.controller
    workloads = ctl.config.demand.workloads
    parsed = []
    invalid: list[dict[str, str]] = []
    for index, raw in enumerate(body.observations):
        try:
            parsed.append(parse_observation(raw, workloads))
        except GridError as err:
            invalid.append({"index": str(index), "code": err.code, "path": err.path})
    counts = ctl.observe(parsed, service.clock())
    if counts["accepted"]:
        service.notify()
    return {**counts, "invalid": len(invalid), "errors": invalid[:20]}
