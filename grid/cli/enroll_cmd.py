"""`grid allocator enroll` and `grid allocator join`: bring a new machine in with one token.

On the controller (operator capability):

    grid allocator enroll --host-id worker-01 [--ttl 900]

prints a one-time enrollment token (valid --ttl seconds, default 15 minutes). Copy it to the
new machine over a secure channel as a file, then there:

    grid allocator join https://controller:22101 --enrollment-token FILE [--dedicated]

exchanges it for the host-scoped credential (written owner-only, mode 0600, into the node
folder; never printed) and starts the node agent. A used, expired or unknown token is refused
with its code (`enrollment_token_used`, `..._expired`, `..._invalid`). See docs/addressing.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from grid.cli.connection import CaFileOpt, GridOpt, JsonOpt, StateOpt, TokenFileOpt, client
from grid.cli.credential_cmd import write_credential_file
from grid.cli.node_cmd import (
    CapacityOpt,
    EnginePortsOpt,
    FailureDomainOpt,
    HeartbeatOpt,
    ModelOpt,
    NodeDirOpt,
    ReservedOpt,
    TagOpt,
)
from grid.fleet import GridError, atomic_write_text
from grid.fleet.operator import EnrolledCredential
from grid.wire import AllocatorClient

ENROLLED_TOKEN_NAME = "node.token"  # in the node folder, like a locally minted credential


def enroll(
    host_id: Annotated[
        str, typer.Option("--host-id", help="Stable host id the new machine will serve as.")
    ],
    ttl: Annotated[
        float,
        typer.Option(
            "--ttl", min=1, help="Seconds the enrollment token stays valid (default 900)."
        ),
    ] = 900.0,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Write the token to this file (mode 0600) instead of printing."
        ),
    ] = None,
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    ca_file: CaFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print a one-time enrollment token for one host (needs the operator capability)."""
    with client(grid, state_dir, token_file, ca_file=ca_file) as api:
        issued = api.create_enrollment(host_id, ttl_s=ttl)
        url = api.base_url
    line = join_line(url, output, _controller_ca(grid, state_dir), host_id)
    if output is not None:
        atomic_write_text(output.expanduser(), issued.token + "\n", 0o600)
        where = f"Wrote the enrollment token to {output} (mode 0600)"
    else:
        where = issued.token
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "host_id": issued.host_id,
                    "expires_at": issued.expires_at,
                    "token": None if output else issued.token,
                    "file": str(output) if output else None,
                    "join": line,
                }
            )
        )
        return
    typer.echo(where)
    saved = "" if output else f" Save the token above as {host_id}.enroll there, then:"
    typer.echo(
        f"One-time token for host {issued.host_id}, valid {ttl:g} s. Copy it to the new "
        f"machine over a secure channel{' with the CA file' if '--ca-file' in line else ''}."
        f"{saved} On the new machine run:"
    )
    typer.echo(f"  {line}")
    typer.echo(
        "  (add the node's settings to it: --capacity-mb MB, --reserved-mb MB, --tag TAG, "
        "--engine-ports LOW-HIGH, --model ID=PATH; see grid allocator join --help)"
    )


def _controller_ca(grid: str | None, state_dir: Path | None) -> str | None:
    """The CA file `grid up` recorded for this machine's controller (None: the system store)."""
    from grid.api import default_state_dir, load_settings

    if grid is not None:
        return os.environ.get("GRID_CA_FILE") or None
    try:
        return load_settings((state_dir or default_state_dir()).expanduser()).ca_file or None
    except GridError:
        return None


def join_line(url: str, token_file: Path | None, ca_file: str | None, host_id: str) -> str:
    """The exact command to paste on the new machine (the files named as they will be there:
    the token file and the CA file keep their names in the current folder)."""
    token = token_file.name if token_file is not None else f"{host_id}.enroll"
    line = f"grid allocator join {url} --enrollment-token {token}"
    if ca_file:
        line += f" --ca-file {Path(ca_file).name}"
    return line


def join(
    url: Annotated[str, typer.Argument(help="The controller's URL (https:// off this machine).")],
    enrollment_token: Annotated[
        Path,
        typer.Option(
            "--enrollment-token", help="File holding the token `grid allocator enroll` printed."
        ),
    ],
    dedicated: Annotated[
        bool,
        typer.Option("--dedicated/--workstation", help="Always-on server (ignore user activity)."),
    ] = False,
    node_dir: NodeDirOpt = None,
    advertise_address: Annotated[
        str | None,
        typer.Option(
            "--advertise-address",
            help="Address of this machine the controller's router dials; engines bind to it.",
        ),
    ] = None,
    ca_file: Annotated[
        Path | None,
        typer.Option("--ca-file", help="CA that verifies the controller (default: system store)."),
    ] = None,
    telemetry: Annotated[
        str | None,
        typer.Option("--telemetry", help="host: this machine's sensors; logical: a lab partition."),
    ] = None,
    failure_domain: FailureDomainOpt = None,
    capacity_mb: CapacityOpt = None,
    reserved_mb: ReservedOpt = None,
    tag: TagOpt = None,
    model: ModelOpt = None,
    engine_ports: EnginePortsOpt = None,
    heartbeat_s: HeartbeatOpt = None,
) -> None:
    """Exchange a one-time enrollment token for this host's credential and start the node with
    these settings (memory share, reserve, tags, engine ports, pre-pulled models)."""
    from grid.cli import node_cmd

    token = _read_enrollment_token(enrollment_token.expanduser())
    minted = _enroll(url, token, ca_file)
    controllers = list(minted.controllers)
    folder = node_cmd._folder(node_dir)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    target = folder / ENROLLED_TOKEN_NAME
    write_credential_file(target, minted, force=True)
    typer.echo(f"Enrolled as host {minted.host_id}; credential in {target} (mode 0600)")
    node_cmd.start(
        node_dir=folder,
        grid=url,
        token_file=target,
        host_id=minted.host_id,
        failure_domain=failure_domain,
        capacity_mb=capacity_mb,
        reserved_mb=reserved_mb,
        tag=tag,
        model=model,
        engine_ports=engine_ports,
        dedicated=dedicated,
        heartbeat_s=heartbeat_s,
        telemetry=telemetry,
        state_dir=None,
        advertise_address=advertise_address,
        ca_file=ca_file,
        controller=[url, *controllers] if controllers else None,
    )


def _enroll(url: str, token: str, ca_file: Path | None) -> EnrolledCredential:
    """Redeem the token; a standby of a controller cluster names its leader: redeem it there."""
    try:
        with AllocatorClient(url, ca_file=ca_file) as api:
            return api.enroll(token)
    except GridError as err:
        location = err.details.get("location")
        if err.code != "not_leader" or not isinstance(location, str):
            raise
    leader = location.split("/enroll", 1)[0]
    with AllocatorClient(leader, ca_file=ca_file) as api:
        return api.enroll(token)


def _read_enrollment_token(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise GridError(
            "enrollment_token_unreadable",
            f"the enrollment token file {path} cannot be read ({exc.strerror or exc})",
            fix="copy the token `grid allocator enroll` printed into that file",
            next_command="grid allocator enroll --host-id ID   (on the controller)",
        ) from None
    token = text.splitlines()[0].strip() if text else ""
    if not token:
        raise GridError(
            "enrollment_token_unreadable",
            f"the enrollment token file {path} is empty",
            fix="copy the token `grid allocator enroll` printed into that file",
            next_command="grid allocator enroll --host-id ID   (on the controller)",
        )
    return token
