"""The FastAPI app factory: one router per resource, one error format, no secret in output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI

from grid import __version__
from grid.api import (
    routes_allocator,
    routes_credentials,
    routes_embeddings,
    routes_enroll,
    routes_evaluations,
    routes_externals,
    routes_metrics,
    routes_nodes,
    routes_openai,
)
from grid.api.auth import Credentials
from grid.api.credential_book import BOOK_NAME, CredentialBook
from grid.api.errors import install_error_handlers
from grid.api.limits import BodyLimit
from grid.api.proxy_state import ProxyState
from grid.api.reachability import Reachability
from grid.api.routes_externals import start_external_prober
from grid.api.settling import RouteWindow
from grid.api.ui import actions as ui_actions
from grid.api.ui import routes as ui_routes
from grid.router.breaker import BreakerPolicy
from grid.runtime.controller.service import ControllerService


def credential_book(service: ControllerService) -> CredentialBook:
    """The node credential book beside the controller's state file (memory only without one);
    an unreadable one was moved aside, and the controller warns about it."""
    location = service.controller.store.location
    book = CredentialBook(Path(location).with_name(BOOK_NAME) if location else None)
    if book.warning:
        service.controller.warn("credential_book_quarantined", book.warning)
    return book


def create_app(
    service: ControllerService,
    credentials: Credentials,
    *,
    instance: str = "",
    breaker: BreakerPolicy | None = None,
) -> FastAPI:
    app = FastAPI(
        title="Grid allocator controller",
        version=__version__,
        description=(
            "Fleet model allocator: node wire contract, control surface, metrics and the "
            "OpenAI-compatible inference proxy."
        ),
    )
    app.state.service = service
    app.state.credentials = credentials
    app.state.proxy = ProxyState(
        breaker
    )  # in memory only: circuits and measurements die with the app
    app.state.route_window = RouteWindow()  # the first heartbeats after a start (settling.py)
    # Background probes of advertised routes; a changed verdict is applied at once.
    app.state.reachability = Reachability(on_result=service.controller.set_unreachable)
    app.state.credential_book = credential_book(service)  # issued credentials, revocations
    install_error_handlers(app)
    app.add_middleware(BodyLimit)  # before authentication and parsing: see limits.py
    app.include_router(routes_nodes.router)
    app.include_router(routes_allocator.router)
    app.include_router(routes_credentials.router)
    app.include_router(routes_enroll.router)
    app.include_router(routes_evaluations.router)
    app.include_router(routes_metrics.router)
    app.include_router(routes_openai.router)
    app.include_router(routes_embeddings.router)
    app.include_router(routes_externals.router)
    start_external_prober(app, service)
    app.include_router(ui_actions.router)  # operator actions the dashboard offers
    app.include_router(ui_routes.router)  # the live dashboard, /ui

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, Any]:  # on the event loop: no worker thread to wait for
        return {"ok": True, "instance": instance, "mode": service.controller.mode.value}

    return app
