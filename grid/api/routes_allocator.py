"""The allocator's control surface (spec "HTTP control surface").

GET /allocator/status is read-only and follows the server's loopback visibility; every other
route needs the operator capability and changes nothing when it is missing or wrong (the check
runs before the handler).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Query, Request

from grid.api.deps import Service, is_operator, require_operator
from grid.api.routes_keys import keys_document
from grid.demand import parse_observation
from grid.fleet import GridError
from grid.fleet.operator import (
    AllocatorStatus,
    ModeReply,
    ModeRequest,
    ObservationBatch,
    ObservationError,
    ObservationReply,
    ProfileReply,
    ProfileUpdate,
    RelayTunnel,
    RouteFailure,
    TickReply,
    TombstoneReply,
)
from grid.runtime.controller import status_document

router = APIRouter(prefix="/allocator", tags=["allocator"])
admin = [Depends(require_operator)]

ModelId = Annotated[str, Path(min_length=1, max_length=256, pattern=r"^\S+$")]


@router.get("/status")
def get_status(
    request: Request,
    service: Service,
    operator: Annotated[bool, Depends(is_operator)],
    history: Annotated[int, Query(ge=0, le=512)] = 50,
) -> AllocatorStatus:
    """Public; with a valid operator capability it also shows operator-only details (which
    advertised engine ports the controller cannot reach)."""
    now = service.clock()
    doc = status_document(service.controller, now, history=history, detail=operator)
    # The router's side (docs/addressing.md "Relay"): live tunnels, each route's last failure.
    return AllocatorStatus(
        **dict(doc),
        relay=[RelayTunnel.model_validate(t) for t in request.app.state.relay.describe(now)],
        route_failures=[
            RouteFailure.model_validate(f) for f in request.app.state.proxy.failure_rows()
        ],
        client_keys=keys_document(request.app.state.client_keys),
    )


@router.put("/models/{model_id}", dependencies=admin)
def put_model(
    model_id: ModelId,
    service: Service,
    profile: Annotated[
        ProfileUpdate, Body(description="The profile's fields; the rest take their defaults")
    ],
) -> ProfileReply:
    saved = service.controller.put_profile(model_id, profile.given(), service.clock())
    service.notify()
    return ProfileReply(profile=saved)


@router.delete("/models/{model_id}", dependencies=admin)
def delete_model(model_id: ModelId, service: Service) -> TombstoneReply:
    tomb = service.controller.remove_profile(model_id, service.clock())
    service.notify()
    return TombstoneReply(tombstone=tomb)


@router.put("/mode", dependencies=admin)
def put_mode(body: ModeRequest, service: Service) -> ModeReply:
    result = service.controller.set_mode(body.mode, service.clock())
    service.notify()
    return ModeReply.model_validate(result)


@router.post("/tick", dependencies=admin)
def post_tick(service: Service) -> TickReply:
    ctl = service.controller
    revision = ctl.request_tick()
    service.ensure_tick(revision)
    report = ctl.last_tick
    return TickReply(
        tick=None if report is None else report.model_copy(deep=True),
        revision=revision,
        success_revision=ctl.success_revision,
    )


@router.post("/observations", dependencies=admin)
def post_observations(body: ObservationBatch, service: Service) -> ObservationReply:
    ctl = service.controller
    workloads = ctl.config.demand.workloads
    parsed = []
    invalid: list[ObservationError] = []
    for index, raw in enumerate(body.observations):
        try:
            parsed.append(parse_observation(raw, workloads))
        except GridError as err:
            invalid.append(ObservationError(index=str(index), code=err.code, path=err.path))
    counts = ctl.observe(parsed, service.clock())
    if counts["accepted"]:
        service.notify()
    return ObservationReply(
        accepted=counts["accepted"],
        ignored=counts["ignored"],
        invalid=len(invalid),
        errors=invalid[:20],
    )
