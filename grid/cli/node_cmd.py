"""`grid allocator node ...`: run this machine's node agent and fence it locally.

- `start` writes the node configuration (node.json) from its flags and starts the detached
  agent (idempotent: a running agent is left alone). The credential comes from
  GRID_ALLOCATOR_NODE_TOKEN (handed to the agent on its stdin) or `--token-file` (which the agent
  reads itself); with neither, the controller on this machine writes one into the node folder
  (`node.token`, 0600). It never appears in argv, output or logs.
- `stop` asks the agent to drain and stop its children gracefully (`--force` cuts busy ones).
- `status [--json]` shows what the agent last reported.
- `drain|pause|quarantine [--reason] [--for-seconds]` and `resume` set or clear the durable local
  override; it survives agent restarts and may expire by itself.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from grid.cli.engine_flags import engine_overrides, port_range
from grid.cli.hints import default_node_dir, with_dirs
from grid.cli.node_start import merged_config, start_source
from grid.cli.text import local_time
from grid.fleet import GridError, NodeStatus
from grid.node.agent import (
    clear_override,
    config_path,
    pid_record,
    read_override,
    read_status,
    running_agent,
    save_config,
    start_agent,
    stop_agent,
    write_override,
)
from grid.node.protection import LocalOverride, OverrideKind
from grid.wire import AllocatorClient

node_app = typer.Typer(
    name="node",
    help="Run this machine's allocator node agent and fence it locally.",
    no_args_is_help=True,
)

NodeDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--node-dir", help="Node state folder (default $GRID_NODE_DIR, else ~/.grid/node)."
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


FailureDomainOpt = Annotated[
    str | None,
    typer.Option("--failure-domain", help="Failure domain (rack, room, site) of this host."),
]
CapacityOpt = Annotated[
    int | None,
    typer.Option("--capacity-mb", min=0, help="Memory share for models, MB (default: all RAM)."),
]
ReservedOpt = Annotated[
    int | None,
    typer.Option("--reserved-mb", min=0, help="Memory kept free for the host itself, MB."),
]
TagOpt = Annotated[list[str] | None, typer.Option("--tag", help="Placement tag (repeat).")]
ModelOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--model",
        help="Pre-pulled GGUF as MODEL_ID=PATH[@SHA256] (repeat): how weights reach this node "
        "without an artifact source.",
    ),
]
EnginePortsOpt = Annotated[
    str | None, typer.Option("--engine-ports", help="Engine port range LOW-HIGH.")
]
HeartbeatOpt = Annotated[
    float | None,
    typer.Option("--heartbeat-seconds", min=0.1, help="Seconds between heartbeats."),
]


def _folder(node_dir: Path | None) -> Path:
    return (node_dir or default_node_dir()).expanduser().absolute()


_NodeStartGrid = Annotated[str | None, typer.Option("--grid", help="Controller URL.")]
_NodeStartTokenFile = Annotated[
    Path | None, typer.Option("--token-file", help="File holding the node credential.")
]
_NodeStartHostId = Annotated[str | None, typer.Option("--host-id", help="Stable host id.")]
_NodeStartDedicated = Annotated[
    bool | None,
    typer.Option("--dedicated/--workstation", help="Always-on server (ignore user activity)."),
]
_NodeStartTelemetry = Annotated[
    str | None,
    typer.Option("--telemetry", help="host: this machine's sensors; logical: a lab partition."),
]
_NodeStartStateDir = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="The local controller's folder; with no credential given, that controller "
        "writes this node one (default $GRID_STATE_DIR, else ~/.grid/allocator).",
    ),
]
_NodeStartAdvertiseAddress = Annotated[
    str | None,
    typer.Option(
        "--advertise-address",
        help="Address of this machine the controller's router dials; engines bind to it "
        "(default 127.0.0.1: a node on the controller's machine).",
    ),
]
_NodeStartCaFile = Annotated[
    Path | None,
    typer.Option(
        "--ca-file", help="CA that verifies an https controller (default: the system store)."
    ),
]
_NodeStartThreads = Annotated[
    int | None, typer.Option("--threads", min=1, help="Engine threads (node default).")
]
_NodeStartContext = Annotated[
    int | None, typer.Option("--context", min=64, help="Engine context tokens (default).")
]
_NodeStartLlamaServer = Annotated[
    Path | None, typer.Option("--llama-server", help="llama-server binary of this host.")
]
_NodeStartRuntime = Annotated[
    list[str] | None, typer.Option("--runtime", help="Runtime offered (repeat).")
]
_NodeStartGpuMemoryMb = Annotated[
    list[int] | None, typer.Option("--gpu-memory-mb", min=0, help="One GPU's MB (repeat).")
]
_NodeStartEngineOverride = Annotated[
    list[str] | None,
    typer.Option(
        "--engine-override",
        help="MODEL:KEY=VALUE over the profile's engine settings (MODEL may be *; repeat).",
    ),
]
_NodeStartController = Annotated[
    list[str] | None,
    typer.Option(
        "--controller",
        help="A controller URL of a controller cluster on etcd (repeat for each); "
        "heartbeats follow its leader. The first one stands for --grid.",
    ),
]


@node_app.command("start")
def start(
    node_dir: NodeDirOpt = None,
    grid: _NodeStartGrid = None,
    token_file: _NodeStartTokenFile = None,
    host_id: _NodeStartHostId = None,
    failure_domain: FailureDomainOpt = None,
    capacity_mb: CapacityOpt = None,
    reserved_mb: ReservedOpt = None,
    tag: TagOpt = None,
    model: ModelOpt = None,
    engine_ports: EnginePortsOpt = None,
    dedicated: _NodeStartDedicated = None,
    heartbeat_s: HeartbeatOpt = None,
    telemetry: _NodeStartTelemetry = None,
    state_dir: _NodeStartStateDir = None,
    advertise_address: _NodeStartAdvertiseAddress = None,
    ca_file: _NodeStartCaFile = None,
    threads: _NodeStartThreads = None,
    context: _NodeStartContext = None,
    llama_server: _NodeStartLlamaServer = None,
    runtime: _NodeStartRuntime = None,
    gpu_memory_mb: _NodeStartGpuMemoryMb = None,
    engine_override: _NodeStartEngineOverride = None,
    controller: _NodeStartController = None,
) -> None:
    """Start this machine's node agent in the background (does nothing if it already runs).

    On the controller's machine no flag is needed: the local controller writes the node a
    host-scoped credential. On another machine pass --grid and --token-file (a file written by
    `grid allocator token write FILE --host-id ID` on the controller), or set
    GRID_ALLOCATOR_NODE_TOKEN."""
    if controller:
        grid = grid or controller[0]
    folder = _folder(node_dir)
    running = running_agent(folder)
    if running is not None:
        typer.echo(f"Already running: node agent (pid {running.pid}) in {folder}")
        typer.echo("Next: " + with_dirs("grid allocator node status", node_dir=node_dir))
        return
    source = start_source(folder, token_file, host_id, grid, state_dir, ca_file)
    updates = source.base_updates(controller)
    for key, value in (
        ("failure_domain", failure_domain),
        ("capacity_mb", capacity_mb),
        ("reserved_mb", reserved_mb),
        ("tags", tag),
        ("engine_port_range", port_range(engine_ports)),
        ("dedicated", dedicated),
        ("heartbeat_interval_s", heartbeat_s),
        ("telemetry", telemetry),
        ("advertise_address", advertise_address),
        ("ca_file", str(source.ca_file.expanduser().absolute()) if source.ca_file else None),
        ("engine_threads", threads),
        ("engine_context", context),
        ("llama_server", str(llama_server.expanduser().absolute()) if llama_server else None),
        ("runtimes", runtime),
        ("gpu_memory_mb", gpu_memory_mb),
        ("engine_overrides", engine_overrides(engine_override, source.existing)),
    ):
        if value is not None:
            updates[key] = value
    config = merged_config(source.existing, updates, model)
    # Refuse a URL credentials may not travel to before anything starts.
    AllocatorClient(
        config.grid_url, node_token=source.token or "check", ca_file=config.ca_file
    ).close()
    save_config(folder, config)
    started = start_agent(folder, token=source.env_text)  # token and reply key, on its stdin
    status = read_status(folder)
    typer.echo(f"Started node agent (pid {started.pid}) for host {config.host_id} -> {source.url}")
    if status is None or not status.registered:
        why = status.last_error if status is not None else ""
        typer.echo(f"Not registered yet: {why or 'waiting for the controller'}")
    typer.echo(f"State: {folder} (log: {folder / 'agent.log'})")
    typer.echo("Next: " + with_dirs("grid allocator node status", node_dir=node_dir))


@node_app.command("stop")
def stop(
    node_dir: NodeDirOpt = None,
    force: Annotated[
        bool, typer.Option("--force", help="Cut requests still running in owned engines.")
    ] = False,
    timeout_s: Annotated[
        float,
        typer.Option("--timeout-seconds", min=1.0, help="How long to wait for the agent to stop."),
    ] = 120.0,
) -> None:
    """Drain, stop owned model processes, and stop the node agent."""
    folder = _folder(node_dir)
    outcome = stop_agent(folder, force=force, timeout_s=timeout_s)
    typer.echo(
        {
            "stopped": "Stopped the node agent and its model processes.",
            "killed": "The node agent did not stop in time and was killed; "
            "its model processes may still run (a new start adopts them).",
            "not_running": "No node agent is running for this folder.",
            "stale": "The node agent was not running (removed a stale pid record).",
        }[outcome]
    )
    status = read_status(folder)
    left = [r for r in status.residencies if r.state != "cached"] if status is not None else []
    for row in left:
        typer.echo(f"Still running: {row.model_id} ({row.state}, pid {row.pid})")


def status_document(folder: Path) -> dict[str, Any]:
    running = running_agent(folder)
    status = read_status(folder)
    override = read_override(folder)
    return {
        "node_dir": str(folder),
        "configured": config_path(folder).exists(),
        "running": running is not None,
        "pid": running.pid if running is not None else None,
        "pid_record": pid_record(folder) is not None,
        "override": override.model_dump(mode="json") if override is not None else None,
        "agent": status.model_dump(mode="json") if status is not None else None,
        "status_age_s": round(time.time() - status.updated_at, 1) if status is not None else None,
    }


@node_app.command("status")
def status(node_dir: NodeDirOpt = None, as_json: JsonOpt = False) -> None:
    """Show the node agent's lifecycle, residencies and latest receipts."""
    doc = status_document(_folder(node_dir))
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    state = "running" if doc["running"] else "not running"
    typer.echo(f"Node agent: {state}" + (f" (pid {doc['pid']})" if doc["pid"] else ""))
    agent = NodeStatus.model_validate(doc["agent"]) if doc["agent"] else None
    if agent is None:
        typer.echo(
            "No status yet. Next: " + with_dirs("grid allocator node start", node_dir=node_dir)
        )
        return
    typer.echo(
        f"Host {agent.host_id}: {agent.lifecycle} "
        f"({', '.join(agent.reasons) or 'no conditions'}); "
        f"controller {agent.grid_url} mode {agent.controller_mode or '?'}"
    )
    if agent.last_error:
        typer.echo(f"Last error: {agent.last_error}")
    if agent.relay is not None:  # the tunnel the router reaches this host's engines over
        relay = agent.relay
        state = "connected" if relay.get("connected") else "not connected"
        why = f" ({relay['last_error']})" if relay.get("last_error") else ""
        typer.echo(f"Relay tunnel: {state}{why}, {relay.get('requests', 0)} requests served")
    if doc["override"]:
        o = doc["override"]
        until = f" until {local_time(o['expires_at'], time.time())}" if o.get("expires_at") else ""
        typer.echo(f"Local override: {o['kind']}{until} ({o.get('reason') or 'no reason'})")
    for row in agent.residencies:
        typer.echo(
            f"  {row.model_id}: {row.state} {row.memory_mb} MB"
            + (f" pid {row.pid} port {row.port}" if row.pid else "")
            + (f" {row.runtime or ''} {json.dumps(row.settings)}" if row.settings else "")
        )
    for receipt in agent.receipts[-5:]:
        typer.echo(
            f"  {receipt.kind} {receipt.model_id}: {receipt.status} "
            f"{receipt.code or receipt.message}"
        )


def _override(kind: OverrideKind, node_dir: Path | None, reason: str, for_s: float | None) -> None:
    folder = _folder(node_dir)
    now = time.time()
    write_override(
        folder,
        LocalOverride(
            kind=kind,
            reason=reason,
            set_at=now,
            expires_at=now + for_s if for_s is not None else None,
        ),
    )
    until = f" for {for_s:g} s" if for_s is not None else " until `grid allocator node resume`"
    typer.echo(f"Local override: {kind.value}{until}.")
    if running_agent(folder) is None:
        typer.echo("The node agent is not running; the override applies when it starts.")


ReasonOpt = Annotated[str, typer.Option("--reason", help="Why (shown in status).")]
ForOpt = Annotated[
    float | None, typer.Option("--for-seconds", min=1.0, help="Expire after this long.")
]


@node_app.command("drain")
def drain(node_dir: NodeDirOpt = None, reason: ReasonOpt = "", for_seconds: ForOpt = None) -> None:
    """Take no new work; let running requests finish."""
    _override(OverrideKind.DRAIN, node_dir, reason, for_seconds)


@node_app.command("pause")
def pause(node_dir: NodeDirOpt = None, reason: ReasonOpt = "", for_seconds: ForOpt = None) -> None:
    """Pause the host for allocator work."""
    _override(OverrideKind.PAUSE, node_dir, reason, for_seconds)


@node_app.command("quarantine")
def quarantine(
    node_dir: NodeDirOpt = None, reason: ReasonOpt = "", for_seconds: ForOpt = None
) -> None:
    """Fence the host until explicitly released."""
    _override(OverrideKind.QUARANTINE, node_dir, reason, for_seconds)


@node_app.command("resume")
def resume(node_dir: NodeDirOpt = None) -> None:
    """Clear the local override (local protection still applies)."""
    cleared = clear_override(_folder(node_dir))
    typer.echo("Local override cleared." if cleared else "No local override was set.")


@node_app.command("install-service")
def install_service(
    node_dir: NodeDirOpt = None,
    unit_dir: Annotated[
        Path | None,
        typer.Option(
            "--unit-dir",
            help="Where to write the unit (default /etc/systemd/system as root, else "
            "~/.config/systemd/user).",
        ),
    ] = None,
) -> None:
    """Write a systemd unit that runs this node agent with its recorded settings, so the node
    survives a reboot (starts nothing; prints the systemctl line)."""
    from grid.cli.service_units import NODE_UNIT, install_unit

    folder = _folder(node_dir)
    if not config_path(folder).exists():
        raise GridError(
            "no_node_config",
            f"no node settings in {folder}: the unit would have nothing to run",
            fix="start the node once so its settings and credential are recorded "
            "(grid allocator join URL --enrollment-token FILE, or grid allocator node start)",
            next_command="grid allocator node start",
        )
    path, command = install_unit(NODE_UNIT, folder, unit_dir)
    typer.echo(f"Wrote {path}: the node agent of {folder} (not started)")
    if running_agent(folder) is not None:
        typer.echo("The node agent runs now: stop it first (grid allocator node stop).")
    typer.echo(f"Next: {command}")
