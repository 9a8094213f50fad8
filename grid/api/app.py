"""The FastAPI app factory: one router per resource, one error format, no secret in output."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI

from grid import __version__
from grid.api import (
    relay_route,
    routes_allocator,
    routes_credentials,
    routes_embeddings,
    routes_enroll,
    routes_evaluations,
    routes_externals,
    routes_keys,
    routes_metrics,
    routes_nodes,
    routes_openai,
)
from grid.api.auth import Credentials
from grid.api.client_keys import ClientKeyGate, ClientKeys
from grid.api.credential_book import BOOK_NAME, CredentialBook
from grid.api.errors import install_error_handlers
from grid.api.limits import BodyLimit
from grid.api.proxy_state import ProxyState
from grid.api.reachability import Reachability
from grid.api.relay import RelayHub
from grid.api.relay_dial import Dialer
from grid.api.routes_externals import start_external_prober
from grid.api.settling import RouteWindow
from grid.api.standby import StandbyRedirect
from grid.api.ui import actions as ui_actions
from grid.api.ui import routes as ui_routes
from grid.fleet.operator import Health
from grid.router import BreakerPolicy
from grid.runtime.controller import ControllerService, StateStore
from grid.runtime.controller.etcd import EtcdStore, HAService


def credential_book(service: ControllerService) -> CredentialBook:
    """The node credential book beside the controller's state file (memory only without one);
    an unreadable one was moved aside, and the controller warns about it."""
    store = service.controller.store
    state = store.path if isinstance(store, StateStore | EtcdStore) else None
    book = CredentialBook(Path(state).with_name(BOOK_NAME) if state is not None else None)
    if book.warning:
        service.controller.warn("credential_book_quarantined", book.warning)
    return book


def create_app(
    service: ControllerService,
    credentials: Credentials,
    *,
    instance: str = "",
    breaker: BreakerPolicy | None = None,
    client_keys: ClientKeys | None = None,
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
    # The relay: each node's tunnel (grid/api/relay.py); the router sends relay routes down it.
    app.state.relay = RelayHub()
    app.state.dialer = Dialer(app.state.relay)
    # In memory only: circuits and measurements die with the app. The measurements are the
    # controller's store (placement reads what the router records).
    app.state.proxy = ProxyState(
        breaker, connected=app.state.relay.connected, measurements=service.controller.measured
    )
    app.state.route_window = RouteWindow()  # the first heartbeats after a start (settling.py)
    # Background probes of advertised routes; a changed verdict is applied at once.
    app.state.reachability = Reachability(on_result=service.controller.set_unreachable)
    app.state.credential_book = credential_book(service)  # issued credentials, revocations
    install_error_handlers(app)
    app.add_middleware(BodyLimit)  # before authentication and parsing: see limits.py
    if isinstance(service, HAService):  # a standby never acts: mutations go to the leader
        app.add_middleware(StandbyRedirect, service=service)
    # /v1 needs a client key (or open access); outermost, so a refused request is never read.
    keys = client_keys or ClientKeys(service, operator_token=credentials.operator_token)
    app.state.client_keys = keys
    app.add_middleware(ClientKeyGate, keys=keys, clock=service.clock)
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
    app.include_router(relay_route.router)
    app.include_router(routes_keys.router)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> Health:  # on the event loop: no worker thread to wait for
        return Health(ok=True, instance=instance, mode=service.controller.mode)

    return app
