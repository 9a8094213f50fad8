"""`grid allocator node-credential ...`: list and revoke the node credentials a controller issued.

- `list [--host-id H] [--json]`: one row per credential (id, host, how it was issued, issued,
  expires, last seen, state); never a token or a key.
- `revoke ID` or `revoke --host-id H`: the credential (or every credential of the host) is
  refused from the host's next request on, and its routes stop being used at once.

`write_credential_file` is how every command that hands out a credential writes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from grid.cli.connection import CaFileOpt, GridOpt, JsonOpt, StateOpt, TokenFileOpt, client
from grid.cli.text import local_time
from grid.fleet import GridError, reply_key_path
from grid.fleet.operator import CredentialList, IssuedCredential
from grid.node.agent import credential_text

credential_app = typer.Typer(
    help="List and revoke the host-scoped node credentials this controller issued.",
    no_args_is_help=True,
)


def write_credential_file(target: Path, minted: IssuedCredential, *, force: bool) -> None:
    """A minted node credential as one file (mode 0600): the token, then `reply-key <key>`,
    the key the node verifies every controller reply with (grid/node/agent/credential.py). Copying
    that one file carries both; GRID_ALLOCATOR_NODE_TOKEN="$(cat FILE)" too."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (0 if force else os.O_EXCL)
    fd = os.open(target, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, credential_text(minted.token, minted.reply_key).encode())
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):  # an older sidecar key would only confuse a reader
        reply_key_path(target).unlink()


HostOpt = Annotated[str | None, typer.Option("--host-id", help="Only this host's credentials.")]


def _when(stamp: float | None, now: float) -> str:
    return "-" if stamp is None else local_time(stamp, now)


@credential_app.command("list")
def list_credentials(
    host_id: HostOpt = None,
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    ca_file: CaFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List node credentials: id, host, source, issued, expires, last seen, state."""
    with client(grid, state_dir, token_file, ca_file=ca_file) as api:
        rows = api.node_credentials(host_id)
    if as_json:
        listing = CredentialList(credentials=rows).model_dump(mode="json")
        typer.echo(json.dumps(listing, indent=2))
        return
    now = time.time()
    table = Table(title="Node credentials")
    for column in ("id", "host", "source", "issued", "expires", "last seen", "state"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row.credential_id,
            row.host_id,
            row.source,
            _when(row.issued_at, now),
            _when(row.expires_at, now),
            _when(row.last_seen_at, now),
            row.state,
        )
    Console(highlight=False).print(table)
    if not rows:
        typer.echo("No node credential is known to this controller.")


@credential_app.command("revoke")
def revoke(
    credential_id: Annotated[
        str | None, typer.Argument(help="The credential id `node-credential list` shows.")
    ] = None,
    host_id: Annotated[
        str | None, typer.Option("--host-id", help="Revoke every credential of this host.")
    ] = None,
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    ca_file: CaFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke one credential, or every credential of a host: refused from its next request."""
    if (credential_id is None) == (host_id is None):
        raise GridError(
            "invalid_option",
            "name one credential id or pass --host-id (not both, not neither)",
            fix="list the ids with `grid allocator node-credential list`",
            next_command="grid allocator node-credential list",
        )
    with client(grid, state_dir, token_file, ca_file=ca_file) as api:
        result = api.revoke_node_credentials(credential_id=credential_id, host_id=host_id)
    if as_json:
        typer.echo(json.dumps(result.model_dump(mode="json"), indent=2))
        return
    revoked = result.revoked
    hosts = ", ".join(result.hosts) or "-"
    typer.echo(
        f"Revoked {len(revoked)} credential(s) of host(s) {hosts}; the host's next request is "
        "refused and its routes are no longer used."
    )
    if host_id is not None:
        typer.echo(
            "Credentials of that host issued before now are refused even if not listed; "
            "a new one: grid allocator token write FILE --host-id " + host_id
        )
