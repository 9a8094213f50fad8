"""`grid models` and `grid chat`: what a user of the grid runs (spec "Remote Grid deployment").

Both find the controller like every other command: `--grid URL`, else the local controller of
`--state-dir`; an https controller is verified with `--ca-file`, $GRID_CA_FILE, the CA `grid up`
recorded, or the system store. /v1 needs a client key (grid/api/client_keys.py) unless the
controller is on open access: `--api-key-file`, else $GRID_API_KEY, else (for this machine's
controller) the operator capability from its config.json. The key travels only in the
Authorization header, never over plain HTTP to a non-loopback address.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import httpx
import typer
from rich.console import Console
from rich.table import Table

from grid.api import config_path, default_state_dir, load_settings
from grid.cli.connection import CaFileOpt, GridOpt, JsonOpt, StateOpt, client
from grid.fleet import GridError
from grid.fleet.operator import StatusDocument
from grid.wire import is_loopback, transport_refusal

ApiKeyOpt = Annotated[
    Path | None,
    typer.Option(
        "--api-key-file",
        help="File holding a client key for /v1 (default: $GRID_API_KEY, else this machine's "
        "operator capability).",
    ),
]
API_KEY_ENV = "GRID_API_KEY"


def _api_key(
    api_key_file: Path | None, grid: str | None, state_dir: Path | None, base_url: str
) -> dict[str, str]:
    """The Authorization header for /v1, or none (an open-access controller needs none)."""
    key = ""
    if api_key_file is not None:
        try:
            key = api_key_file.expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise GridError(
                "api_key_file_unreadable",
                f"cannot read the client key file {api_key_file} ({exc.strerror})",
                fix="pass the file `grid allocator key create NAME -o FILE` wrote",
                next_command="grid allocator key create NAME -o FILE",
            ) from None
    key = key or os.environ.get(API_KEY_ENV, "").strip()
    if not key and grid is None:
        folder = (state_dir or default_state_dir()).expanduser()
        if config_path(folder).exists():
            key = load_settings(folder).operator_token
    if not key:
        return {}
    parts = urlsplit(base_url)
    if parts.scheme == "http" and not is_loopback(parts.hostname or ""):
        raise GridError(
            "insecure_transport",
            "a client key is never sent over plain HTTP to a non-loopback address",
            fix="use the controller's https:// URL",
        )
    return {"Authorization": f"Bearer {key}"}


def models(
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    ca_file: CaFileOpt = None,
    api_key_file: ApiKeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the model profiles and which models are served (ready on some host) now."""
    with client(grid, state_dir, admin=False, ca_file=ca_file) as api:
        status = api.status(history=0)
        auth = _api_key(api_key_file, grid, state_dir, api.base_url)
        try:
            served_doc = api.request("GET", "/v1/models", headers=auth)
            served = sorted(m["id"] for m in served_doc.get("data", []) if isinstance(m, dict))
        except GridError as err:
            if err.code not in ("client_key_required", "invalid_client_key"):
                raise
            served = _ready_in(status)  # without a client key: what status says is READY
    profiles = status.profiles
    if as_json:
        document = {
            "profiles": [{"model_id": p.model_id, "memory_mb": p.memory_mb} for p in profiles],
            "served": served,
        }
        typer.echo(json.dumps(document, indent=2))
        return
    table = Table(title=f"Models ({len(profiles)} profiles, {len(served)} served)")
    for column in ("model", "memory MB", "replicas", "served"):
        table.add_column(column)
    names = sorted({p.model_id for p in profiles} | set(served))
    by_id = {p.model_id: p for p in profiles}
    for name in names:
        p = by_id.get(name)
        table.add_row(
            name,
            str(p.memory_mb) if p else "-",
            f"{p.min_replicas}..{p.max_replicas}" if p else "(no profile)",
            "yes" if name in served else "no",
        )
    Console(highlight=False).print(table)
    if not served:
        typer.echo("Nothing is served yet. Next: grid allocator status")


def _ready_in(status: StatusDocument) -> list[str]:
    """Models READY on some host that admits work, read from the (public) status document."""
    return sorted(
        {
            r.model_id
            for h in status.hosts
            if h.state in ("accepting", "throttled")
            for r in h.residencies
            if r.state == "ready"
        }
    )


def chat(
    text: Annotated[str, typer.Argument(help="The message to send.")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model id (see `grid models`).")],
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=1, help="Most tokens in the reply.")
    ] = 128,
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    ca_file: CaFileOpt = None,
    api_key_file: ApiKeyOpt = None,
) -> None:
    """Send one message through the grid's router and stream the reply to stdout."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "stream": True,
    }
    api = client(grid, state_dir, admin=False, ca_file=ca_file)
    base = api.base_url
    auth = _api_key(api_key_file, grid, state_dir, base)
    try:
        with api, api.stream("POST", "/v1/chat/completions", json=body, headers=auth) as reply:
            if reply.status_code >= 400:
                raise _refused(reply, model, _mode(api))
            served_by = reply.headers.get("X-Grid-Served-By", "")
            if reply.headers.get("content-type", "").startswith("application/json"):
                reply.read()  # an engine that answered in one piece
                for choice in reply.json().get("choices", []):
                    sys.stdout.write((choice.get("message") or {}).get("content") or "")
            for delta in _deltas(reply.iter_lines()):
                sys.stdout.write(delta)
                sys.stdout.flush()
    except httpx.TransportError as exc:
        raise transport_refusal(base, exc) from None
    sys.stdout.write("\n")
    sys.stdout.flush()
    if served_by:
        typer.echo(f"(served by {served_by})", err=True)


def _deltas(lines: Any) -> Any:
    for line in lines:
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            continue
        for choice in chunk.get("choices", []) if isinstance(chunk, dict) else []:
            content = (choice.get("delta") or {}).get("content")
            if content:
                yield content


def _mode(api: Any) -> str | None:
    try:
        return api.healthz().mode.value
    except GridError:
        return None


def _refused(reply: httpx.Response, model: str, mode: str | None = None) -> GridError:
    reply.read()
    try:
        error = reply.json().get("error", {})
    except ValueError:
        error = {}
    code = str(error.get("code") or f"http_{reply.status_code}")
    if code == "model_unavailable" and mode in ("recommend", "observe"):
        # The router's "retry shortly" holds only when the allocator acts on demand.
        return GridError(
            code,
            f"{model} has no ready engine, and the controller is in {mode} mode: it records "
            "the demand and plans, but loads nothing",
            fix="let Grid load demanded models with `grid allocator mode automatic`, then retry",
            next_command="grid allocator mode automatic",
        )
    return GridError(
        code,
        str(error.get("message") or f"the router answered HTTP {reply.status_code}"),
        fix=str(error.get("fix") or f"wait until {model} is served, or pick a served model"),
        next_command="grid models",
    )
