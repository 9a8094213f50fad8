"""`grid up` and `grid down`: start and stop the local controller server in the background.

The process management itself lives in `grid.api.process` (the logical fleet uses it too).
`down` first stops this machine's managed node agent when it serves this controller, so its
model processes drain, unregister and exit while the controller can still hear the agent's last
heartbeat (spec "CLI workflow"); an agent that serves another controller is left running.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from pathlib import Path
from typing import Annotated, Any

import typer

from grid.api import (
    CONFIG_NAME,
    DEFAULT_HOST,
    DEFAULT_PORT,
    check_bind,
    check_open_access,
    check_server_files,
    config_path,
    default_state_dir,
    join_store,
    load_settings,
    start_server,
    stop_server,
)
from grid.cli.hints import default_node_dir, serves_controller, with_dirs
from grid.fleet import GridError
from grid.node.agent import load_config, running_agent, stop_agent

StateDirOption = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="Controller state folder (default $GRID_STATE_DIR, else ~/.grid/allocator).",
    ),
]
NodeDirOption = Annotated[
    Path | None,
    typer.Option(
        "--node-dir", help="Local node agent folder (default $GRID_NODE_DIR, else ~/.grid/node)."
    ),
]


def stop_local_node(state_dir: Path, node_dir: Path) -> str | None:
    """Stop the node agent of `node_dir` if it runs for this controller; returns a line to print
    (None when there is no such agent)."""
    node_dir = node_dir.expanduser().absolute()
    if running_agent(node_dir) is None or not (state_dir / CONFIG_NAME).exists():
        return None
    try:
        config = load_config(node_dir)
        settings = load_settings(state_dir)
    except GridError:
        return None  # we cannot tell whose agent it is: not ours to stop
    if not serves_controller(config.grid_url, settings):
        return None
    try:
        outcome = stop_agent(node_dir)
    except GridError as err:
        return f"Could not stop the node agent of host {config.host_id}: {err.message}"
    if outcome == "killed":
        return (
            f"The node agent of host {config.host_id} did not stop in time and was killed; "
            "its model processes may still run (a new start adopts them)."
        )
    return f"Stopped the node agent of host {config.host_id} and its model processes."


def _recorded_tls(folder: Path) -> bool:
    try:
        return bool(load_settings(folder.expanduser()).tls_cert)
    except GridError:
        return False


def _recorded_host(folder: Path) -> str:
    try:
        return load_settings(folder).host if config_path(folder).exists() else DEFAULT_HOST
    except GridError:
        return DEFAULT_HOST


def _listen(
    host: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    ca_file: Path | None,
    insecure_http: bool,
) -> dict[str, Any]:
    """The listening settings given on the command line, checked before anything starts."""
    if (tls_cert is None) != (tls_key is None):
        raise GridError(
            "tls_incomplete",
            "--tls-cert and --tls-key go together",
            fix="pass both (the certificate chain and its private key), or neither",
            next_command="grid up --help",
        )
    listen: dict[str, Any] = {}
    if host is not None:
        listen["host"] = host
    if tls_cert is not None and tls_key is not None:
        cert, key = tls_cert.expanduser().absolute(), tls_key.expanduser().absolute()
        check_server_files(cert, key)
        listen.update(tls_cert=str(cert), tls_key=str(key))
    if ca_file is not None:
        listen["ca_file"] = str(ca_file.expanduser().absolute())
    if insecure_http:
        listen["insecure_http"] = True
    return listen


_UpPort = Annotated[
    int | None,
    typer.Option(
        "--port",
        help=f"Port to listen on (default {DEFAULT_PORT}, or the one this state folder "
        "recorded; `grid test` uses 22100).",
    ),
]
_UpHost = Annotated[
    str | None,
    typer.Option(
        "--host",
        help="Address to listen on (default 127.0.0.1, or the one recorded). A "
        "non-loopback address needs --tls-cert/--tls-key or --insecure-http.",
    ),
]
_UpTlsCert = Annotated[
    Path | None,
    typer.Option("--tls-cert", help="PEM certificate chain whose SAN names --host."),
]
_UpTlsKey = Annotated[
    Path | None,
    typer.Option("--tls-key", help="PEM private key of --tls-cert (owner-only, mode 0600)."),
]
_UpCaFile = Annotated[
    Path | None,
    typer.Option(
        "--ca-file",
        help="CA that issued --tls-cert; this machine's CLI verifies the controller with it "
        "(default: the system store).",
    ),
]
_UpInsecureHttp = Annotated[
    bool,
    typer.Option(
        "--insecure-http",
        help="Allow plain HTTP on a non-loopback address (a TLS proxy in front of it). "
        "Grid clients still never send credentials over it.",
    ),
]
_UpTls = Annotated[
    bool,
    typer.Option(
        "--tls",
        help="Make the fleet's private CA and this controller's certificate (for --host, "
        "127.0.0.1, localhost and this machine's name) in STATE_DIR/pki, once, and serve "
        "HTTPS with them. Nodes verify the controller with STATE_DIR/pki/ca.pem.",
    ),
]
_UpInstallService = Annotated[
    bool,
    typer.Option(
        "--install-service",
        help="Record these settings and write a systemd unit that runs the controller "
        "(survives a reboot) instead of starting it now; prints the systemctl line.",
    ),
]
_UpUnitDir = Annotated[
    Path | None,
    typer.Option(
        "--unit-dir",
        help="Where --install-service writes the unit (default /etc/systemd/system as "
        "root, else ~/.config/systemd/user).",
    ),
]
_UpOpenAccess = Annotated[
    bool | None,
    typer.Option(
        "--open-access/--client-keys",
        help="/v1 without client keys (loopback only), or with them (the default; issue "
        "them with `grid allocator key create NAME`). Default: what this folder recorded.",
    ),
]
_UpStore = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="etcd://HOST:PORT,HOST:PORT,... (optionally ending in /PREFIX): keep state and "
        "the mutation lease in etcd, so several controllers elect one leader "
        "(docs/high-availability.md). Default: the state file in --state-dir.",
    ),
]
_UpEtcdCaFile = Annotated[
    Path | None, typer.Option("--etcd-ca-file", help="CA of the etcd members' certificates.")
]
_UpEtcdCertFile = Annotated[
    Path | None, typer.Option("--etcd-cert-file", help="Client certificate etcd asks for.")
]
_UpEtcdKeyFile = Annotated[
    Path | None, typer.Option("--etcd-key-file", help="Private key of --etcd-cert-file.")
]
_UpAdvertiseUrl = Annotated[
    str | None,
    typer.Option(
        "--advertise-url",
        help="URL nodes and the other controllers reach this one at (default: its listening URL).",
    ),
]


def up(
    state_dir: StateDirOption = None,
    port: _UpPort = None,
    host: _UpHost = None,
    tls_cert: _UpTlsCert = None,
    tls_key: _UpTlsKey = None,
    ca_file: _UpCaFile = None,
    insecure_http: _UpInsecureHttp = False,
    tls: _UpTls = False,
    install_service: _UpInstallService = False,
    unit_dir: _UpUnitDir = None,
    open_access: _UpOpenAccess = None,
    store: _UpStore = None,
    etcd_ca_file: _UpEtcdCaFile = None,
    etcd_cert_file: _UpEtcdCertFile = None,
    etcd_key_file: _UpEtcdKeyFile = None,
    advertise_url: _UpAdvertiseUrl = None,
) -> None:
    """Start the allocator controller in the background on 127.0.0.1:22101 (does nothing if it
    already runs). The operator capability is written to STATE_DIR/config.json (owner-only);
    admin commands on this machine read it from there."""
    folder = state_dir or default_state_dir()
    if tls and tls_cert is None:
        tls_cert, tls_key, ca_file = fleet_pki(folder.expanduser().absolute(), host)
    listen = _listen(host, tls_cert, tls_key, ca_file, insecure_http)
    check_bind(
        listen.get("host", DEFAULT_HOST),
        tls="tls_cert" in listen or _recorded_tls(folder),
        insecure_http=insecure_http,
    )
    if open_access is not None:
        listen["open_access"] = open_access
    check_open_access(listen.get("host", _recorded_host(folder)), open_access is True)
    if advertise_url is not None:
        listen["advertise_url"] = advertise_url
    etcd_files = (etcd_ca_file, etcd_cert_file, etcd_key_file)
    shared = join_store(folder.expanduser().absolute(), store, etcd_files, listen)
    if install_service:
        from grid.api import load_or_create_settings
        from grid.cli.service_units import CONTROLLER_UNIT, install_unit

        settings = load_or_create_settings(folder.expanduser(), port=port, listen=listen)
        path, command = install_unit(CONTROLLER_UNIT, folder, unit_dir)
        typer.echo(f"Wrote {path}: the controller for {settings.url} (not started)")
        typer.echo(f"Next: {command}")
        return
    settings, pid, started = start_server(folder, port, listen, secrets_from=shared)
    verb = "Started" if started else "Already running:"
    typer.echo(f"{verb} controller (pid {pid}) at {settings.url}")
    if settings.store:
        typer.echo(f"Store: {settings.store} (leader or standby: grid allocator status)")
    typer.echo(f"Operator capability: {folder.expanduser().resolve() / CONFIG_NAME} (owner-only)")
    if settings.ca_file:
        typer.echo(f"Fleet CA: {settings.ca_file} (copy it to each node; --ca-file)")
    from grid.cli.context import write_context

    where = write_context(
        settings.url, folder.expanduser().resolve() / CONFIG_NAME, settings.ca_file, "grid up"
    )
    typer.echo(f"Dashboard: {settings.url}/ui")
    typer.echo(f"Current controller: {settings.url} (client commands use it; {where})")
    typer.echo(_mode_line(settings.url, settings.ca_file or None))
    typer.echo("Next: " + with_dirs("grid allocator status", state_dir=state_dir))


def fleet_pki(folder: Path, host: str | None) -> tuple[Path, Path, Path]:
    """The fleet CA and this controller's certificate in FOLDER/pki, made once (a year)."""
    import socket

    from grid.api import generate_ca_and_server

    pki = folder / "pki"
    names = [host or DEFAULT_HOST, "127.0.0.1", "localhost", socket.gethostname()]
    if not (pki / "ca.pem").exists():
        folder.mkdir(parents=True, exist_ok=True)
        end = dt.datetime.now(dt.UTC) + dt.timedelta(days=365)
        unique = list(dict.fromkeys(n for n in names if n))
        generate_ca_and_server(pki, unique, not_after=end, common_name="Grid fleet CA", ca_days=366)
    return pki / "server.pem", pki / "server-key.pem", pki / "ca.pem"


def _mode_line(url: str, ca_file: str | None) -> str:
    """What the controller will do with demand: in recommend or observe mode, nothing."""
    from grid.wire import AllocatorClient

    try:
        with AllocatorClient(url, timeout_s=3.0, ca_file=ca_file) as api:
            mode = api.healthz().mode.value
    except GridError:
        return "Mode: unknown (the controller did not answer yet)"
    if mode == "automatic":
        return "Mode: automatic (Grid loads and unloads models on its own)"
    return (
        f"Mode: {mode}: Grid plans but loads nothing until you run `grid allocator mode automatic`"
    )


def down(state_dir: StateDirOption = None, node_dir: NodeDirOption = None) -> None:
    """Stop the local node agent (if it serves this controller), then the controller."""
    folder = (state_dir or default_state_dir()).expanduser().resolve()
    node_line = stop_local_node(folder, node_dir or default_node_dir())
    if node_line is not None:
        typer.echo(node_line)
    outcome = stop_server(folder)
    from grid.cli.context import clear_context

    with contextlib.suppress(GridError):
        clear_context(load_settings(folder).url)
    typer.echo(
        {
            "stopped": "Stopped the controller.",
            "not_running": "No controller is running for this state folder.",
            "stale": "The controller was not running (removed a stale pid file).",
        }[outcome]
    )
