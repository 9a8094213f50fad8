"""`python -m grid.api.server --state-dir DIR`: the controller process `grid up` starts.

Secrets are read from DIR/config.json (owner-only), never from the command line or the
environment, so `ps` shows nothing sensitive. State lives in DIR/state.json with its lease
beside it. The server binds to loopback unless the config names another address; a
non-loopback address needs TLS (`tls_cert`, `tls_key`) or an explicit `insecure_http`.
"""

from __future__ import annotations

import argparse
import logging
import secrets
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI

from grid.api.app import create_app
from grid.api.client_keys import KEYS_NAME, ClientKeys, check_open_access, import_key_file
from grid.api.ha_setup import build_service
from grid.api.settings import STATE_NAME, Settings, load_settings
from grid.api.tls import check_bind, check_server_files
from grid.demand import DemandConfig
from grid.fleet import GridError, refuse_unknown
from grid.router import BreakerPolicy
from grid.runtime.controller import (
    Attestor,
    Controller,
    ControllerConfig,
    ControllerService,
    LeaseFile,
    StateStore,
)
from grid.wire import MAX_FRAME_BYTES

log = logging.getLogger("grid.server")
RELAY_PING_INTERVAL_S = 5.0
RELAY_PING_TIMEOUT_S = 10.0


def controller_config(overrides: dict[str, Any]) -> ControllerConfig:
    """ControllerConfig from config.json's `controller` section; a misspelt name is refused
    (a silently ignored setting would leave the default in force without a word)."""
    known = {f.name for f in fields(ControllerConfig)}
    refuse_unknown("invalid_controller_config", "controller", overrides, known)
    chosen = {k: v for k, v in overrides.items() if k != "demand"}
    demand = overrides.get("demand")
    if demand is not None:
        if not isinstance(demand, dict):
            raise GridError(
                "invalid_controller_config",
                "controller setting demand must be an object of demand settings",
                fix='write it as {"bucket_s": 60, ...} or remove it',
            )
        demand_known = [f.name for f in fields(DemandConfig)]
        refuse_unknown("invalid_controller_config", "controller.demand", demand, demand_known)
        chosen["demand"] = DemandConfig(**demand)
    try:
        return ControllerConfig(**chosen)
    except TypeError as exc:
        raise GridError(
            "invalid_controller_config",
            f"controller settings: {exc}",
            fix="correct the `controller` section of config.json",
        ) from None


def build(state_dir: Path, settings: Settings) -> tuple[FastAPI, ControllerService]:
    config = controller_config(settings.controller)
    # The key of the controller's attestations (term proofs, route grants) derives from the
    # node-signing key: it survives a lost state.json, and every controller of the config (and
    # of a controller cluster, which shares that key) has it.
    attestor = Attestor.derived(settings.credentials.node_signing_key)
    service: ControllerService
    if settings.store:  # several controllers on etcd (docs/high-availability.md)
        service = build_service(state_dir, settings, config, attestor=attestor)
    else:
        state_path = state_dir / STATE_NAME
        lease = LeaseFile(
            state_path.with_name(STATE_NAME + ".lease"),
            controller_id=secrets.token_hex(8),
            ttl_s=config.lease_ttl_s,
        )
        controller = Controller(
            StateStore(state_path), now=time.time(), config=config, lease=lease, attestor=attestor
        )
        service = ControllerService(controller)
    breaker = BreakerPolicy.from_overrides(settings.breaker)
    keys = ClientKeys(
        service, open_access=settings.open_access, operator_token=settings.operator_token
    )
    try:
        import_key_file(state_dir / KEYS_NAME, keys, time.time())
    except GridError as err:  # a standby cannot save: the leader imports it at its start
        if err.code == "client_keys_unreadable":
            raise
        log.warning("client key file not imported yet: %s", err.message)
    app = create_app(
        service,
        settings.credentials,
        instance=settings.instance,
        breaker=breaker,
        client_keys=keys,
    )
    return app, service


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grid-allocator-server")
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        settings = load_settings(args.state_dir)
        check_bind(settings.host, tls=bool(settings.tls_cert), insecure_http=settings.insecure_http)
        check_open_access(settings.host, settings.open_access)
        tls: dict[str, Any] = {}
        if settings.tls_cert:
            check_server_files(Path(settings.tls_cert), Path(settings.tls_key))
            tls = {"ssl_certfile": settings.tls_cert, "ssl_keyfile": settings.tls_key}
        app, service = build(args.state_dir, settings)
    except GridError as err:
        print(f"Error [{err.code}]: {err.message}", file=sys.stderr)
        if err.fix:
            print(f"To fix: {err.fix}", file=sys.stderr)
        return 2
    port = args.port or settings.port
    service.start()
    log.info(
        "controller %s listening on %s:%d, %s (state %s)",
        service.controller.controller_id,
        settings.host,
        port,
        "TLS" if tls else "plain HTTP",
        settings.store or args.state_dir / STATE_NAME,
    )
    try:
        uvicorn.run(
            app,
            host=settings.host,
            port=port,
            log_level="info",
            access_log=True,
            # The relay's tunnels (grid/api/relay.py): a silent drop is noticed within seconds.
            ws_ping_interval=RELAY_PING_INTERVAL_S,
            ws_ping_timeout=RELAY_PING_TIMEOUT_S,
            ws_max_size=MAX_FRAME_BYTES,
            ws_per_message_deflate=False,
            **tls,
        )
    finally:
        service.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
