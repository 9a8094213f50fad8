"""External endpoints as inventory: PUT, GET and DELETE /allocator/externals (operator only).

PUT checks the URL (TLS, or plain http to loopback only) and the CA file, probes the endpoint
once and saves it with the controller state; the answer carries the probe's verdict. The prober
(grid/api/externals.py) checks every endpoint again on a fixed interval while the app runs.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Path

from grid.api.deps import Service, require_operator
from grid.api.externals import ExternalProber, apply_health, probe
from grid.fleet.errors import GridError
from grid.fleet.externals import NAME_PATTERN, ExternalEndpoint, ExternalSpec, url_problem
from grid.runtime.controller.service import ControllerService

router = APIRouter(prefix="/allocator", tags=["allocator"])
admin = [Depends(require_operator)]
Name = Annotated[str, Path(min_length=1, max_length=200, pattern=NAME_PATTERN)]
LIST = "grid node list-external"


def start_external_prober(app: FastAPI, service: ControllerService) -> None:
    """Run the prober for as long as the app is served (its lifespan)."""
    prober, original = ExternalProber(service), app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(served: Any) -> AsyncIterator[Any]:
        prober.start()
        try:
            async with original(served) as state:
                yield state
        finally:
            prober.stop()

    app.router.lifespan_context = lifespan


def _refused(code: str, message: str, fix: str, next_command: str = "") -> GridError:
    return GridError(
        code, message, fix=fix, next_command=next_command, details={"http_status": 400}
    )


def _checked(name: str, spec: ExternalSpec, now: float) -> ExternalEndpoint:
    problem = url_problem(spec.url)
    if problem is not None:
        raise _refused(
            "external_url_refused",
            f"the URL {spec.url!r} of external endpoint {name} is refused: {problem}",
            fix="give the endpoint's https:// URL (with --ca-file for a private CA)",
            next_command=f"grid node add-external {name} --url https://HOST:PORT --models M",
        )
    if spec.ca_file is not None:
        try:
            ssl.create_default_context(cafile=spec.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise _refused(
                "ca_file_unreadable",
                f"the CA file {spec.ca_file} cannot be read as PEM certificates ({exc})",
                fix="pass the PEM file of the CA that signed the endpoint's certificate",
                next_command=f"openssl x509 -noout -subject -in {spec.ca_file}",
            ) from None
    return ExternalEndpoint(name=name, added_at=now, **spec.model_dump())


def _view(service: ControllerService, name: str) -> dict[str, Any]:
    inventory = service.controller.state.externals
    record = inventory.records[name]
    return {
        "external": record.model_dump(mode="json"),
        "health": inventory.health_of(name).model_dump(mode="json"),
        "serving": inventory.serving(name),
    }


@router.put("/externals/{name}", dependencies=admin)
def put_external(name: Name, spec: ExternalSpec, service: Service) -> dict[str, Any]:
    ctl = service.controller
    endpoint = _checked(name, spec, service.clock())
    with ctl.lock:
        if name in ctl.registry.hosts:
            raise GridError(
                "external_name_taken",
                f"{name} is a registered node's host id",
                fix="name the external endpoint differently",
                next_command=LIST,
                details={"http_status": 409},
            )
        inventory = ctl.state.externals
        previous = inventory.records.get(name)
        inventory.records[name] = endpoint
        inventory.health.pop(name, None)
        try:
            ctl.save(service.clock())
        except GridError:
            if previous is None:
                del inventory.records[name]
            else:
                inventory.records[name] = previous
            raise
        ctl.state.revisions.bump(safety=True)
    apply_health(service, name, probe(endpoint, service.clock()))
    service.notify()
    with ctl.lock:
        return _view(service, name)


@router.get("/externals", dependencies=admin)
def list_externals(service: Service) -> dict[str, Any]:
    ctl = service.controller
    with ctl.lock:
        return {"externals": [_view(service, n) for n in sorted(ctl.state.externals.records)]}


@router.delete("/externals/{name}", dependencies=admin)
def delete_external(name: Name, service: Service) -> dict[str, Any]:
    ctl = service.controller
    with ctl.lock:
        inventory = ctl.state.externals
        record = inventory.records.pop(name, None)
        if record is None:
            raise GridError(
                "unknown_external",
                f"no external endpoint named {name!r}",
                fix="list them first",
                next_command=LIST,
                details={"http_status": 404},
            )
        inventory.health.pop(name, None)
        try:
            ctl.save(service.clock())
        except GridError:
            inventory.records[name] = record
            raise
        ctl.state.revisions.bump(safety=True)
    service.notify()
    return {"removed": name}
