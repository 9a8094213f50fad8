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
from grid.fleet import NAME_PATTERN, ExternalEndpoint, ExternalSpec, GridError, url_problem
from grid.fleet.operator import ExternalList, ExternalRemoved, ExternalView
from grid.runtime.controller import ControllerService

router = APIRouter(prefix="/allocator", tags=["allocator"])
admin = [Depends(require_operator)]
Name = Annotated[str, Path(min_length=1, max_length=200, pattern=NAME_PATTERN)]


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


@router.put("/externals/{name}", dependencies=admin)
def put_external(name: Name, spec: ExternalSpec, service: Service) -> ExternalView:
    ctl = service.controller
    endpoint = _checked(name, spec, service.clock())
    ctl.put_external(endpoint, service.clock())  # refused when a node uses the name
    apply_health(service, name, probe(endpoint, service.clock()))
    service.notify()
    return ctl.external_rows([name])[0]


@router.get("/externals", dependencies=admin)
def list_externals(service: Service) -> ExternalList:
    return ExternalList(externals=service.controller.external_rows())


@router.delete("/externals/{name}", dependencies=admin)
def delete_external(name: Name, service: Service) -> ExternalRemoved:
    service.controller.remove_external(name, service.clock())
    service.notify()
    return ExternalRemoved(removed=name)
