"""`grid up` and `grid down`: start and stop the local controller server in the background.

The process management itself lives in `grid.api.process` (the logical fleet uses it too).
`down` first stops this machine's managed node agent when it serves this controller, so its
model processes drain, unregister and exit while the controller can still hear the agent's last
heartbeat (spec "CLI workflow"); an agent that serves another controller is left running.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from grid.api.process import start_server, stop_server
from grid.api.settings import (
    CONFIG_NAME,
    DEFAULT_PORT,
    default_state_dir,
    load_settings,
)
from grid.cli.hints import default_node_dir, serves_controller, with_dirs
from grid.fleet.errors import GridError
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


def up(
    state_dir: StateDirOption = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port",
            help=f"Port on 127.0.0.1 (default {DEFAULT_PORT}, or the one this state folder "
            "recorded; `grid test` uses 22100).",
        ),
    ] = None,
) -> None:
    """Start the allocator controller in the background on 127.0.0.1:22101 (does nothing if it
    already runs). The operator capability is written to STATE_DIR/config.json (owner-only);
    admin commands on this machine read it from there."""
    folder = state_dir or default_state_dir()
    settings, pid, started = start_server(folder, port)
    verb = "Started" if started else "Already running:"
    typer.echo(f"{verb} controller (pid {pid}) at {settings.url}")
    typer.echo(f"Operator capability: {folder.expanduser().resolve() / CONFIG_NAME} (owner-only)")
    typer.echo("Next: " + with_dirs("grid allocator status", state_dir=state_dir))


def down(state_dir: StateDirOption = None, node_dir: NodeDirOption = None) -> None:
    """Stop the local node agent (if it serves this controller), then the controller."""
    folder = (state_dir or default_state_dir()).expanduser().resolve()
    node_line = stop_local_node(folder, node_dir or default_node_dir())
    if node_line is not None:
        typer.echo(node_line)
    outcome = stop_server(folder)
    typer.echo(
        {
            "stopped": "Stopped the controller.",
            "not_running": "No controller is running for this state folder.",
            "stale": "The controller was not running (removed a stale pid file).",
        }[outcome]
    )
