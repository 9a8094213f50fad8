"""`grid test start|status|watch|stop`: a logical fleet with real llama.cpp on this machine.

`start` brings up one controller and N node agents (see `grid.lab.logical_fleet`), configures
the model as a baseline profile in automatic mode and, by default, waits until it is READY.
Starting again with the same settings does nothing; `stop` leaves no process behind.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from grid.cli.candidates import candidate_models
from grid.cli.fleet_watch import failures, node_lines, ready_hosts, split_outcome, start_failed
from grid.cli.hints import with_dirs
from grid.cli.text import local_time, plural
from grid.fleet import GridError
from grid.lab import (
    DEFAULT_ENGINE_PORT_BASE,
    DEFAULT_PORT,
    MAX_MACHINES,
    FleetSettings,
    LogicalFleet,
    available_mb,
    capacity_shares,
    resolve_model,
)
from grid.node.artifacts import SMOLLM2_MODEL_ID

test_app = typer.Typer(
    name="test",
    help="Run a logical fleet (one controller, N node agents, real llama.cpp) on this machine.",
    no_args_is_help=True,
)

RunDirOpt = Annotated[
    Path | None,
    typer.Option("--run-dir", help="Run folder (default $GRID_TEST_DIR, else ~/.grid/test)."),
]


def _floats(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise GridError(
            "invalid_capacities",
            f"--capacities-gib {text!r} is not a comma-separated list of numbers",
            fix="pass values such as 2,2.5",
        ) from None


_StartMachines = Annotated[
    int,
    typer.Option("--machines", min=1, max=MAX_MACHINES, help="Logical machines (node agents)."),
]
_StartModel = Annotated[
    str, typer.Option("--model", help="smollm2-135m, gemma-3-270m or a GGUF path.")
]
_StartCapacitiesGib = Annotated[
    str | None, typer.Option("--capacities-gib", help="One capacity per machine, e.g. 2,2.")
]
_StartMemoryMb = Annotated[
    int | None, typer.Option("--memory-mb", min=1, help="Resident budget per replica.")
]
_StartMinReplicas = Annotated[
    int, typer.Option("--min-replicas", min=0, help="Baseline replicas of the model.")
]
_StartMaxReplicas = Annotated[
    int | None,
    typer.Option("--max-replicas", min=0, help="Most replicas of the model (default: min)."),
]
_StartPriority = Annotated[
    int, typer.Option("--priority", min=0, help="Priority class of the model.")
]
_StartPort = Annotated[
    int, typer.Option("--port", help="Controller port on 127.0.0.1 (`grid up` uses 22101).")
]
_StartEnginePortBase = Annotated[
    int, typer.Option("--engine-port-base", help="First engine port of the first node.")
]
_StartHeartbeatS = Annotated[
    float, typer.Option("--heartbeat-seconds", min=0.1, help="Node heartbeat interval.")
]
_StartWaitS = Annotated[
    float, typer.Option("--wait-seconds", min=0.0, help="Wait this long for READY.")
]
_StartCandidateModel = Annotated[
    list[str] | None,
    typer.Option(
        "--candidate-model",
        help="A model every node holds but nothing pins (min_replicas 0): the allocator "
        "may load it on its own. Repeatable.",
    ),
]
_StartWorkloadModel = Annotated[
    list[str] | None,
    typer.Option(
        "--workload-model",
        help="WORKLOAD=MODEL: MODEL gets workload score 1 for WORKLOAD (a model not yet "
        "named becomes a candidate). Repeatable.",
    ),
]
_StartDistinctAddresses = Annotated[
    bool,
    typer.Option(
        "--distinct-addresses",
        help="Each machine on its own loopback address (127.0.0.2, ...) and the controller "
        "on TLS with a generated CA (`grid test status --json` shows ca_file).",
    ),
]


@test_app.command("start")
def start(
    machines: _StartMachines = 2,
    model: _StartModel = SMOLLM2_MODEL_ID,
    capacities_gib: _StartCapacitiesGib = None,
    memory_mb: _StartMemoryMb = None,
    min_replicas: _StartMinReplicas = 1,
    max_replicas: _StartMaxReplicas = None,
    priority: _StartPriority = 0,
    port: _StartPort = DEFAULT_PORT,
    engine_port_base: _StartEnginePortBase = (DEFAULT_ENGINE_PORT_BASE),
    heartbeat_s: _StartHeartbeatS = 1.0,
    wait_s: _StartWaitS = 180.0,
    candidate_model: _StartCandidateModel = None,
    workload_model: _StartWorkloadModel = None,
    distinct_addresses: _StartDistinctAddresses = False,
    run_dir: RunDirOpt = None,
) -> None:
    """Start (or find) the logical fleet on 127.0.0.1:22100; the model becomes READY with no
    further step. Each node's state is printed as it changes; a model that fails to start stops
    the wait with the engine's reason and a non-zero exit."""
    fleet = LogicalFleet(run_dir)
    chosen = resolve_model(model, fleet.run_dir / "weights", memory_mb)
    model_scores, candidates = candidate_models(
        chosen, candidate_model or [], workload_model or [], fleet.run_dir / "weights"
    )
    capacities = _floats(capacities_gib)
    shares = (
        _previous_or_default(fleet, machines, chosen.memory_mb)
        if capacities is None
        else capacity_shares(machines, capacities, chosen.memory_mb, available_mb())
    )
    settings = FleetSettings(
        machines=machines,
        model=chosen,
        capacities_mb=shares,
        port=port,
        engine_port_base=engine_port_base,
        heartbeat_s=heartbeat_s,
        min_replicas=min_replicas,
        max_replicas=max_replicas if max_replicas is not None else max(1, min_replicas),
        priority=priority,
        model_scores=model_scores,
        candidates=candidates,
        distinct_addresses=distinct_addresses,
    )
    report = fleet.start(settings, wait_ready_s=0)
    verb = "Started" if report.started_now else "Already running:"
    typer.echo(f"{verb} logical fleet of {plural(machines, 'machine')} at {report.url}")
    for index, host in enumerate(report.hosts):
        low, high = settings.engine_ports(index)
        typer.echo(
            f"  {host}: {settings.capacities_mb[index]} MB, domain "
            f"{settings.failure_domain(index)}, engines on "
            f"{settings.address(index) or '127.0.0.1'} ports {low}-{high}"
        )
    if distinct_addresses:
        typer.echo(f"Controller TLS CA: {fleet.ca_file()} (pass it as --ca-file)")
    for candidate in candidates:
        scores = ", ".join(f"{w}={s:g}" for w, s in candidate.workload_scores.items()) or "none"
        typer.echo(f"  candidate {candidate.model_id} (workload scores: {scores})")
    typer.echo(f"Operator capability (owner-only): {report.token_file}")
    from grid.cli.context import write_context

    write_context(report.url, report.token_file, fleet.ca_file(), "grid test start")
    typer.echo(f"Current controller: {report.url} (grid models, grid chat and the allocator "
               f"commands use it; dashboard {report.url}/ui)")  # fmt: skip
    if wait_s > 0:
        ready = _wait_ready(fleet, chosen.model_id, max(1, min_replicas), wait_s, run_dir)
        if ready:
            typer.echo(f"{chosen.model_id} is READY on {', '.join(ready)}")
        else:
            watch_hint = with_dirs("grid test watch", run_dir=run_dir)
            typer.echo(f"{chosen.model_id} is not READY yet; follow it with `{watch_hint}`")
    typer.echo("Next: " + with_dirs("grid test status", run_dir=run_dir))


def _wait_ready(
    fleet: LogicalFleet, model_id: str, wanted: int, timeout_s: float, run_dir: Path | None
) -> list[str]:
    """Print each node's state as it changes until `wanted` hosts have the model READY or the
    timeout passes; a start that failed with nothing in flight ends it (fleet_watch.py)."""
    deadline = time.monotonic() + timeout_s
    shown: dict[str, str] = {}
    while True:
        doc = fleet.status()
        for host, line in sorted(node_lines(doc).items()):
            if shown.get(host) != line:
                typer.echo(f"  {time.strftime('%H:%M:%S')} {host}: {line}")
                shown[host] = line
        ready = ready_hosts(doc, model_id)
        if len(ready) >= wanted:
            return ready
        failed = start_failed(doc, model_id)
        if failed:
            raise GridError(
                failed[0].code,
                f"{model_id} failed to start: " + "; ".join(f.line() for f in failed),
                fix="check that the model file is a GGUF llama.cpp loads (the error says what the "
                "engine reported); "
                "the fleet keeps running so you can look at it",
                next_command=with_dirs("grid test stop", run_dir=run_dir),
            )
        if time.monotonic() >= deadline:
            return ready
        time.sleep(0.5)


def _previous_or_default(fleet: LogicalFleet, machines: int, model_mb: int) -> list[int]:
    """Reuse the shares of the running fleet, so an idempotent start compares equal."""
    previous = fleet.settings()
    if previous is not None and previous.machines == machines:
        return list(previous.capacities_mb)
    return capacity_shares(machines, None, model_mb, available_mb())


@test_app.command("status")
def status(
    run_dir: RunDirOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON document.")] = False,
) -> None:
    """Show the controller, every logical node and its residencies."""
    doc = LogicalFleet(run_dir).status()
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    ctl = doc["controller"]
    if doc["settings"] is None:
        typer.echo(
            "No logical fleet in this run folder. Next: "
            + with_dirs("grid test start", run_dir=run_dir)
        )
        return
    if ctl["running"]:
        typer.echo(f"Controller {ctl['url']}: running, mode {ctl['mode'] or 'unknown'}")
    else:
        typer.echo(f"Controller {ctl['url']}: not running")
    for node in doc["nodes"]:
        rows = ", ".join(
            f"{r['model_id']} {r['state']}" + (f" (pid {r['pid']})" if r.get("pid") else "")
            for r in node["residencies"]
        )
        state = node["lifecycle"] if node["running"] else "stopped"
        typer.echo(f"  {node['host_id']}: {state}; {rows or 'no residencies'}")
    for unmet in ctl["unmet"] or []:
        typer.echo(f"  unmet: {unmet['model_id']} {unmet['code']}: {unmet['message']}")
    now = time.time()
    for failure in failures(doc):
        when = f", {local_time(failure.finished_at, now)}" if failure.finished_at else ""
        typer.echo(f"  failed: {failure.line()} (attempt {failure.attempt}{when})")


def _transitions(doc: dict[str, Any]) -> dict[str, str]:
    return {
        f"{h['host_id']}/{r['model_id']}": r["state"]
        for h in doc["hosts"]
        for r in h.get("residencies", [])
    }


@test_app.command("watch")
def watch(
    run_dir: RunDirOpt = None,
    interval_s: Annotated[
        float, typer.Option("--interval-seconds", min=0.2, help="Status poll interval.")
    ] = 1.0,
    duration_s: Annotated[
        float | None, typer.Option("--for-seconds", help="Stop watching after this long.")
    ] = None,
) -> None:
    """Follow residency transitions and command outcomes (Ctrl-C stops watching, not the Grid)."""
    fleet = LogicalFleet(run_dir)
    seen_states: dict[str, str] = {}
    seen_records: dict[str, str] = {}
    end = time.monotonic() + duration_s if duration_s is not None else None
    try:
        while end is None or time.monotonic() < end:
            doc = fleet.status()
            for key, state in sorted(_transitions(doc).items()):
                if seen_states.get(key) != state:
                    typer.echo(f"{time.strftime('%H:%M:%S')} {key}: {state}")
                    seen_states[key] = state
            for record in doc["history"]:
                label = f"{record['kind']} {record['model_id']}@{record['host_id']}"
                if seen_records.get(record["action_id"]) != record["status"]:
                    why = ""
                    if record["status"] == "failed":
                        why = " ({}: {})".format(*split_outcome(record.get("outcome") or ""))
                    typer.echo(f"{time.strftime('%H:%M:%S')} {label}: {record['status']}{why}")
                    seen_records[record["action_id"]] = record["status"]
            time.sleep(interval_s)
    except KeyboardInterrupt:
        typer.echo("Stopped watching; the logical fleet keeps running (grid test stop ends it).")


@test_app.command("stop")
def stop(run_dir: RunDirOpt = None) -> None:
    """Stop every node agent (they stop their model processes) and the controller."""
    from grid.cli.context import clear_context

    fleet = LogicalFleet(run_dir)
    url = fleet.url()
    report = fleet.stop()
    if url is not None:
        clear_context(url)
    for host, outcome in sorted(report.agents.items()):
        typer.echo(f"  {host}: {outcome}")
    typer.echo(f"  controller: {report.controller}")
    if report.killed_children:
        typer.echo(f"  stopped leftover engine processes: {report.killed_children}")
    if report.leftover:
        raise GridError(
            "processes_left",
            f"processes {report.leftover} are still alive and could not be proved to be ours",
            fix="inspect them by hand; Grid never kills a process it cannot identify",
        )
    typer.echo("Stopped the logical fleet; no process is left.")
