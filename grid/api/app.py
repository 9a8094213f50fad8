"""The FastAPI app factory: one router per resource, one error format, no secret in output."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from grid import __version__
from grid.api import (
    routes_allocator,
    routes_embeddings,
    routes_enroll,
    routes_evaluations,
    routes_externals,
    routes_metrics,
    routes_nodes,
    routes_openai,
)
from grid.api.auth import Credentials
from grid.api.errors import install_error_handlers
from grid.api.limits import BodyLimit
from grid.api.proxy_state import ProxyState
from grid.api.routes_externals import start_external_prober
from grid.api.settling import RouteWindow
from grid.api.ui import actions as ui_actions
from grid.api.ui import routes as ui_routes
from grid.router.breaker import BreakerPolicy
from grid.runtime.controller.service import ControllerService


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
    install_error_handlers(app)
    app.add_middleware(BodyLimit)  # before authentication and parsing: see limits.py
    app.include_router(routes_nodes.router)
    app.include_router(routes_allocator.router)
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
    def healthz() -> dict[str, Any]:
        return {"ok": True, "instance": instance, "mode": service.controller.mode.value}

    return app
