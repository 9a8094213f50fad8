"""`grid allocator key create|list|revoke`: client keys for the OpenAI-compatible /v1 API.

A key is shown once, when it is created (or written to `-o FILE`, mode 0600, and not printed);
the controller keeps only its SHA-256. Clients send it as `Authorization: Bearer KEY` (the
openai SDK's `api_key`); `grid chat` and `grid models` read it from `--api-key-file` or
$GRID_API_KEY. All three commands need the operator capability.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer
from rich.console import Console
from rich.table import Table

from grid.cli.connection import CaFileOpt, GridOpt, JsonOpt, StateOpt, TokenFileOpt, client
from grid.fleet import GridError, atomic_write_text

key_app = typer.Typer(
    help="Client keys for /v1 (inference): create (shown once), list, revoke.",
    no_args_is_help=True,
)

NameArg = Annotated[str, typer.Argument(help="The key's name (letters, digits, . _ -).")]


def _when(stamp: Any) -> str:
    if not isinstance(stamp, int | float):
        return "-"
    return dt.datetime.fromtimestamp(stamp, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


@key_app.command("create")
def create(
    name: NameArg,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Write the key to this file (0600) instead."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --output.")] = False,
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    ca_file: CaFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Issue a client key for NAME; it is shown once and cannot be read back."""
    if output is not None and output.exists() and not force:
        raise GridError(
            "output_exists",
            f"{output} exists already",
            fix="pass --force to overwrite it, or another path",
            next_command=f"grid allocator key create {name} -o {output} --force",
        )
    with client(grid, state_dir, token_file, ca_file=ca_file) as api:
        made: dict[str, Any] = api.request("POST", "/allocator/keys", json={"name": name})
    if output is not None:
        atomic_write_text(output.expanduser(), str(made["key"]) + "\n", 0o600)
        made = {k: v for k, v in made.items() if k != "key"} | {"key_file": str(output)}
    if as_json:
        typer.echo(json.dumps(made, indent=2))
        return
    if output is not None:
        typer.echo(f"Client key {name!r} written to {output} (owner-only); it is not shown.")
    else:
        typer.echo(f"Client key {name!r} (shown once, Grid keeps only its hash):")
        typer.echo(str(made["key"]))
    typer.echo("Use it as: Authorization: Bearer <key>  (openai SDK: api_key=...)")


@key_app.command("list")
def list_keys(
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    ca_file: CaFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The client keys (never the keys themselves) with their request counts."""
    with client(grid, state_dir, token_file, ca_file=ca_file) as api:
        doc: dict[str, Any] = api.request("GET", "/allocator/keys")
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    access = "open on loopback (no key needed)" if doc.get("open_access") else "client keys"
    table = Table(title=f"Client keys (/v1 access: {access})")
    for column in ("name", "prefix", "created", "revoked", "requests", "last used"):
        table.add_column(column)
    for row in doc.get("keys", []):
        table.add_row(
            str(row["name"]),
            str(row["prefix"]) + "…",
            _when(row.get("created_at")),
            _when(row.get("revoked_at")),
            str(row.get("requests", 0)),
            _when(row.get("last_used_at")),
        )
    Console(highlight=False).print(table)
    others = {k: v for k, v in doc.get("requests", {}).items() if k in ("operator", "anonymous")}
    if others:
        typer.echo("Also counted: " + ", ".join(f"{k} {v}" for k, v in sorted(others.items())))
    if not doc.get("keys"):
        typer.echo("No client keys yet. Next: grid allocator key create NAME")


@key_app.command("revoke")
def revoke(
    name: NameArg,
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    ca_file: CaFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke the client key NAME at once: its next request is refused (401)."""
    with client(grid, state_dir, token_file, ca_file=ca_file) as api:
        doc: dict[str, Any] = api.request("DELETE", f"/allocator/keys/{quote(name, safe='')}")
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    typer.echo(f"Revoked client key {name!r}.")
