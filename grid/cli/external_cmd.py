"""`grid node add-external | list-external | remove-external`: endpoints Grid does not run.

An external OpenAI-compatible endpoint (vLLM, Ollama, LM Studio, a llama-server someone else
started) becomes inventory: probed, routed, observed, and counted by the planner as external
residencies that Grid never drains or unloads (docs/engines.md "External endpoints").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from grid.cli.connection import GridOpt, JsonOpt, StateOpt, TokenFileOpt, client
from grid.cli.hints import with_dirs
from grid.cli.node_cmd import node_app
from grid.fleet import GridError
from grid.fleet.operator import ExternalList, ExternalView

# The external-endpoint commands join the node agent's own (`grid node`, `grid allocator node`).
node_root_app = node_app


def _models(text: str) -> list[str]:
    models = [m.strip() for m in text.split(",") if m.strip()]
    if not models:
        raise GridError(
            "no_models",
            "--models names no model",
            fix="pass the model ids the endpoint serves, comma-separated: --models a,b",
            next_command="grid node add-external --help",
        )
    return models


def _line(view: ExternalView) -> str:
    record, health = view.external, view.health
    state = "healthy" if health.healthy else f"unhealthy [{health.code}]"
    serving = ", ".join(view.serving) or "nothing"
    return f"{record.name}: {record.url} {state}: {health.reason} (routes: {serving})"


@node_root_app.command("add-external")
def add_external(
    name: Annotated[str, typer.Argument(help="A name for the endpoint (its host id).")],
    url: Annotated[
        str, typer.Option("--url", help="Base URL: https://HOST:PORT (a trailing /v1 is fine).")
    ],
    models: Annotated[str, typer.Option("--models", help="Model ids it serves, a,b,...")],
    ca_file: Annotated[
        Path | None, typer.Option("--ca-file", help="CA that signs its TLS certificate.")
    ] = None,
    capacity_mb: Annotated[
        int, typer.Option("--capacity-mb", min=0, help="Memory it stands for, MB.")
    ] = 0,
    runtime: Annotated[
        str, typer.Option("--runtime", help="What it runs (vllm, ollama, llama.cpp, ...).")
    ] = "openai",
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add (or replace) an external endpoint; it is probed at once."""
    body: dict[str, Any] = {
        "url": url,
        "models": _models(models),
        "capacity_mb": capacity_mb,
        "runtime": runtime,
    }
    if ca_file is not None:
        body["ca_file"] = str(ca_file.expanduser().absolute())
    with client(grid, state_dir, token_file) as api:
        view = ExternalView.model_validate(
            api.request("PUT", f"/allocator/externals/{name}", json=body)
        )
    if as_json:
        typer.echo(json.dumps(view.model_dump(mode="json"), indent=2))
        return
    typer.echo(_line(view))
    typer.echo("Next: " + with_dirs("grid allocator status", state_dir=state_dir))


@node_root_app.command("list-external")
def list_external(
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the external endpoints with their last health verdict."""
    with client(grid, state_dir, token_file) as api:
        doc = ExternalList.model_validate(api.request("GET", "/allocator/externals"))
    if as_json:
        typer.echo(json.dumps(doc.model_dump(mode="json"), indent=2))
        return
    for view in doc.externals:
        typer.echo(_line(view))
    if not doc.externals:
        typer.echo("No external endpoints. Next: grid node add-external NAME --url URL --models M")


@node_root_app.command("remove-external")
def remove_external(
    name: Annotated[str, typer.Argument(help="The endpoint's name.")],
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
) -> None:
    """Remove an external endpoint from the inventory (Grid never touches the endpoint)."""
    with client(grid, state_dir, token_file) as api:
        api.request("DELETE", f"/allocator/externals/{name}")
    typer.echo(f"Removed external endpoint {name}.")
