"""`grid up --store etcd://...`: check the etcd cluster, share the cluster's credentials, build the
controller service that leads or stands by (grid/runtime/controller/etcd).

Controllers on one store are one cluster: a node credential minted by one verifies on all, and
any of them signs replies the node trusts. The first controller to start puts its operator
token and node-signing key under `P/cluster/secrets` (create-only); every later one adopts
them into its own `config.json`. A state folder whose config already holds other credentials
is refused (`cluster_secrets_differ`) rather than overwritten.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

from grid.api.auth import new_secret
from grid.api.settings import CONFIG_NAME, STATE_NAME, Settings, load_settings
from grid.fleet import GridError
from grid.runtime.controller import Attestor, ControllerConfig
from grid.runtime.controller.etcd import (
    EtcdClient,
    EtcdLease,
    EtcdStore,
    EtcdTarget,
    HAController,
    HAService,
    cluster_secrets,
    parse_store_url,
)


def _readable(path: str, flag: str, code: str) -> str:
    if not path:
        return ""
    resolved = Path(path).expanduser().absolute()
    if not resolved.is_file() or not os.access(resolved, os.R_OK):
        raise GridError(
            code,
            f"{flag} {resolved} does not exist or cannot be read",
            fix=f"give {flag} the PEM file etcd's certificates were made with",
            next_command="grid up --help",
        )
    return str(resolved)


def store_target(
    url: str, ca_file: str = "", cert_file: str = "", key_file: str = ""
) -> EtcdTarget:
    """The parsed `--store` with its files checked (no connection yet)."""
    return parse_store_url(
        url,
        ca_file=_readable(ca_file, "--etcd-ca-file", "etcd_ca_missing"),
        cert_file=_readable(cert_file, "--etcd-cert-file", "etcd_cert_missing"),
        key_file=_readable(key_file, "--etcd-key-file", "etcd_key_missing"),
    )


def settings_target(settings: Settings) -> EtcdTarget:
    return store_target(
        settings.store, settings.etcd_ca_file, settings.etcd_cert_file, settings.etcd_key_file
    )


def open_client(target: EtcdTarget) -> EtcdClient:
    """A client that has proved the cluster answers (refusals: etcd_unreachable,
    etcd_tls_failed, etcd_unavailable, etcd_certificate_invalid)."""
    try:
        client = EtcdClient(target)
    except (OSError, ValueError) as exc:
        raise GridError(
            "etcd_certificate_invalid",
            f"the etcd CA or client certificate cannot be loaded ({type(exc).__name__})",
            fix="give PEM files: --etcd-ca-file CA, --etcd-cert-file CERT, --etcd-key-file KEY",
            next_command="grid up --help",
        ) from None
    try:
        client.status()
    except GridError:
        client.close()
        raise
    return client


def check_secrets(state_dir: Path, existing: Settings | None, shared: tuple[str, str]) -> None:
    if existing is None:
        return
    if (existing.operator_token, existing.node_signing_key) != shared:
        raise GridError(
            "cluster_secrets_differ",
            f"{state_dir}/config.json holds other credentials than the controller cluster "
            "in this etcd store, so the nodes and operators of one could not use the other",
            fix="start this controller from a fresh --state-dir (it adopts the cluster's), or "
            "use another store prefix (etcd://HOST:PORT/OTHER)",
            next_command="grid up --state-dir NEW_DIR --store etcd://HOST:PORT",
        )


def build_service(
    state_dir: Path, settings: Settings, config: ControllerConfig, attestor: Attestor | None = None
) -> HAService:
    """The controller service of one member of a controller cluster."""
    target = settings_target(settings)
    client = open_client(target)
    url = settings.advertise_url or settings.url
    lease = EtcdLease(
        client, target.prefix, controller_id=secrets.token_hex(8), url=url, ttl_s=config.lease_ttl_s
    )
    store = EtcdStore(
        client,
        target.prefix,
        fence=lease.fence,
        term_key=lease.term_key,
        leader_key=lease.leader_key,
        local_path=state_dir / STATE_NAME,
    )

    def build(now: float) -> HAController:
        return HAController(store, now=now, config=config, lease=lease, attestor=attestor)

    service = HAService(build, lease=lease, store=store, client=client)
    service.step(time.time())  # take the lease at once if nobody holds it
    return service


def join_store(
    folder: Path, store: str | None, files: tuple[Path | None, ...], listen: dict[str, Any]
) -> tuple[str, str] | None:
    """`grid up` with an etcd store (given, or recorded in the folder): check the cluster
    answers, record the store in `listen`, and return the credentials the controller cluster
    shares (None: the file store)."""
    existing = load_settings(folder) if (folder / CONFIG_NAME).exists() else None
    recorded = existing.store if existing is not None else ""
    if store is None and not recorded:
        if any(f is not None for f in files):
            raise GridError(
                "etcd_files_without_store",
                "--etcd-ca-file, --etcd-cert-file and --etcd-key-file need --store etcd://...",
                fix="add --store etcd://HOST:PORT, or drop the --etcd-* options",
                next_command="grid up --help",
            )
        return None
    ca, cert, key = (str(f) if f is not None else "" for f in files)
    if store is None and existing is not None:
        ca = ca or existing.etcd_ca_file
        cert = cert or existing.etcd_cert_file
        key = key or existing.etcd_key_file
    target = store_target(store or recorded, ca, cert, key)
    client = open_client(target)
    try:
        proposal = (
            (existing.operator_token, existing.node_signing_key)
            if existing is not None
            else (new_secret(), new_secret())
        )
        shared = cluster_secrets(client, target.prefix, proposal)
    finally:
        client.close()
    check_secrets(folder, existing, shared)
    listen.update(
        store=target.url,
        etcd_ca_file=target.ca_file,
        etcd_cert_file=target.cert_file,
        etcd_key_file=target.key_file,
    )
    return shared
