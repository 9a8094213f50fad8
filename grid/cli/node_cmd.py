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

import contextlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from grid.api.settings import config_path as config_path_of_controller
from grid.api.settings import default_state_dir, load_settings
from grid.cli.credential_cmd import write_credential_file
from grid.cli.engine_flags import engine_overrides
from grid.cli.hints import NODE_TOKEN_ENV, default_node_dir, serves_controller, with_dirs
from grid.cli.text import local_time
from grid.fleet.errors import GridError
from grid.fleet.wire import NodeStatus
from grid.node.agent import (
    CatalogEntry,
    NodeConfig,
    clear_override,
    config_path,
    credential_id,
    load_config,
    no_reply_key,
    parse_config,
    parse_credential,
    pid_record,
    read_credential_file,
    read_override,
    read_status,
    reusable,
    running_agent,
    save_config,
    start_agent,
    stop_agent,
    token_claims,
    write_override,
)
from grid.node.protection import LocalOverride, OverrideKind
from grid.wire import AllocatorClient

TOKEN_ENV = NODE_TOKEN_ENV
LOCAL_TOKEN_NAME = "node.token"  # a credential the local controller wrote, in the node folder

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


def credential_host(token: str) -> str | None:
    """The host id a node credential names (read, not verified: the controller verifies)."""
    return token_claims(token)[0]


def _read_token_file(path: Path) -> str:
    """The token of a credential file, which must also carry its reply key."""
    try:
        token, key = read_credential_file(path)
    except OSError as exc:
        raise GridError(
            "token_file_unreadable",
            f"cannot read {path} ({exc.strerror})",
            fix="check the --token-file path and its permissions",
        ) from None
    if key is None:
        raise no_reply_key(str(path))
    return token


def _catalog(values: list[str] | None, existing: list[CatalogEntry]) -> list[CatalogEntry]:
    entries = {e.model_id: e for e in existing}
    for raw in values or []:
        model_id, sep, rest = raw.partition("=")
        path, _at, digest = rest.partition("@")
        if not sep or not model_id or not path:
            raise GridError(
                "invalid_option",
                f"--model {raw!r} is not MODEL_ID=/absolute/path.gguf[@sha256]",
                fix="name each pre-pulled GGUF as MODEL_ID=PATH, optionally with @SHA256",
            )
        entries[model_id] = CatalogEntry(
            model_id=model_id, path=str(Path(path).expanduser().absolute()), sha256=digest or None
        )
    return list(entries.values())


def _shipped_catalog() -> list[CatalogEntry]:
    """The SmolLM2 weights shipped with the install, when present."""
    from grid.node.artifacts import SMOLLM2_MODEL_ID, SMOLLM2_SHA256, smollm2_path

    try:
        path = smollm2_path()
    except GridError:
        return []
    return [CatalogEntry(model_id=SMOLLM2_MODEL_ID, path=str(path), sha256=SMOLLM2_SHA256)]


def _port_range(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    low, sep, high = text.partition("-")
    try:
        if not sep:
            raise ValueError
        return int(low), int(high)
    except ValueError:
        raise GridError(
            "invalid_option",
            f"--engine-ports {text!r} is not LOW-HIGH",
            fix="pass a port range such as 39100-39199",
        ) from None


def _state(state_dir: Path | None) -> Path:
    return (state_dir or default_state_dir()).expanduser()


def _remote_fix() -> str:
    return (
        "on the controller's machine run `grid allocator token write node.token --host-id ID`, "
        "copy the file here, then pass --grid URL --token-file node.token "
        f"(or set {TOKEN_ENV})"
    )


def _local_credential(folder: Path, host: str, grid: str | None, state_dir: Path | None) -> Path:
    """With no credential given: the controller on this machine mints one for `host` and it is
    written to the node folder (mode 0600). A remote controller cannot be asked this way."""
    state = _state(state_dir)
    if not config_path_of_controller(state).exists():
        raise GridError(
            "no_node_credential",
            f"no node credential was given and no controller runs from {state} on this machine",
            fix="start the local controller first (then no flag is needed), or " + _remote_fix(),
            next_command=with_dirs("grid up", state_dir=state_dir),
        )
    settings = load_settings(state)
    if grid is not None and not serves_controller(grid, settings):
        raise GridError(
            "no_node_credential",
            f"no node credential was given for the controller at {grid}, which is not the one "
            f"on this machine ({settings.url})",
            fix=_remote_fix(),
        )
    target = folder / LOCAL_TOKEN_NAME
    with AllocatorClient(
        settings.url, operator_token=settings.operator_token, ca_file=settings.ca_file or None
    ) as api:
        if _still_valid(api, target, host):
            typer.echo(f"Reusing the credential for host {host} in {target}")
            return target
        minted = api.node_credential(host)
    folder.mkdir(parents=True, exist_ok=True)
    write_credential_file(target, minted, force=True)
    typer.echo(f"The local controller wrote a credential for host {host} to {target} (mode 0600)")
    return target


def _still_valid(api: AllocatorClient, target: Path, host: str) -> bool:
    """A credential file the controller may keep honouring: it names `host`, carries its
    reply key, lives past a day, and the controller lists it as valid (not revoked)."""
    token = reusable(target, host, time.time())
    if token is None:
        return False
    wanted = credential_id(token)
    return any(r.credential_id == wanted and r.state == "valid" for r in api.node_credentials(host))


def _start_credential(
    folder: Path,
    existing: dict[str, Any],
    env_token: str | None,
    token_file: Path | None,
    host_id: str | None,
    grid: str | None,
    state_dir: Path | None,
) -> tuple[str | None, Path | None, str]:
    """(the node token, its file, the host id) for `start`: the environment's credential, the
    --token-file, or a host-scoped one the local controller writes; a credential for another
    host than --host-id is refused."""
    token = env_token or (_read_token_file(token_file) if token_file else None)
    if token is None and token_file is None and not existing.get("token_file"):
        wanted = host_id or existing.get("host_id") or f"host-{socket.gethostname()}"
        token_file = _local_credential(folder, wanted, grid, state_dir)
        token = _read_token_file(token_file)
    named = credential_host(token) if token else None
    chosen_host = host_id or named or existing.get("host_id") or f"host-{socket.gethostname()}"
    if named is not None and chosen_host != named:
        raise GridError(
            "wrong_host",
            f"the credential is for host {named!r}, not {chosen_host!r}",
            fix="use the credential written for this host, or drop --host-id",
        )
    return token, token_file, chosen_host


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
    env_text = os.environ.get(TOKEN_ENV, "").strip() or None  # the whole credential text
    env_token = parse_credential(env_text)[0] if env_text else None
    if env_text is not None and parse_credential(env_text)[1] is None:
        raise no_reply_key(TOKEN_ENV)
    existing: dict[str, Any] = {}
    if config_path(folder).exists():
        existing = load_config(folder).model_dump(mode="json")
    token, token_file, chosen_host = _start_credential(
        folder, existing, env_token, token_file, host_id, grid, state_dir
    )
    url = grid or existing.get("grid_url") or load_settings(_state(state_dir)).url
    if ca_file is None and not existing.get("ca_file") and grid is None:
        with contextlib.suppress(GridError):  # a TLS controller on this machine: its own CA
            recorded = load_settings(_state(state_dir)).ca_file
            ca_file = Path(recorded) if recorded else None
    updates: dict[str, Any] = {"grid_url": url, "host_id": chosen_host}
    if controller:
        updates["controllers"] = [c for c in dict.fromkeys(controller) if c != url]
    if token_file is not None and env_token is None:
        updates["token_file"] = str(token_file.expanduser().absolute())
    elif env_token is not None:
        updates["token_file"] = None
    for key, value in (
        ("failure_domain", failure_domain),
        ("capacity_mb", capacity_mb),
        ("reserved_mb", reserved_mb),
        ("tags", tag),
        ("engine_port_range", _port_range(engine_ports)),
        ("dedicated", dedicated),
        ("heartbeat_interval_s", heartbeat_s),
        ("telemetry", telemetry),
        ("advertise_address", advertise_address),
        ("ca_file", str(ca_file.expanduser().absolute()) if ca_file else None),
        ("engine_threads", threads),
        ("engine_context", context),
        ("llama_server", str(llama_server.expanduser().absolute()) if llama_server else None),
        ("runtimes", runtime),
        ("gpu_memory_mb", gpu_memory_mb),
        ("engine_overrides", engine_overrides(engine_override, existing)),
    ):
        if value is not None:
            updates[key] = value
    base = existing or {"catalog": [e.model_dump() for e in _shipped_catalog()]}
    merged = {**base, **updates}
    current = [CatalogEntry.model_validate(e) for e in merged.get("catalog", [])]
    merged["catalog"] = [e.model_dump() for e in _catalog(model, current)]
    config: NodeConfig = parse_config(merged, "the node start flags")
    # Refuse a URL credentials may not travel to before anything starts.
    AllocatorClient(config.grid_url, node_token=token or "check", ca_file=config.ca_file).close()
    save_config(folder, config)
    started = start_agent(folder, token=env_text)  # token and reply key, on its stdin
    status = read_status(folder)
    typer.echo(f"Started node agent (pid {started.pid}) for host {config.host_id} -> {url}")
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
