"""`grid plan` and `grid validate`: read a fleet snapshot, print a plan or a verdict.

Both only read a file; neither touches a fleet. Errors are raised as `GridError` and printed by
the guarded group in `main.py`. With --json, stdout carries exactly one JSON document.

`grid plan --time-limit S` promises the whole process (docs/plan-time-limit.md): in a process
that runs one command (`main.COMMAND_PROCESS`) its Deadline starts at the process start, so the
interpreter start and every import count; `app` invoked in-process (tests) starts it at the
command.
"""

from __future__ import annotations

import json
import os
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from grid.cli.errors import report_grid_error
from grid.cli.progress import plan_spinner
from grid.cli.render import FOLD_HOSTS_ABOVE, render_plan, render_validation
from grid.fleet import FleetSnapshot, GridError, Plan, SnapshotError, load_snapshot, start_ticks
from grid.planner import Deadline, host_refusals, output_reserve_s, rich_output_s


class EngineChoice(StrEnum):
    CPSAT = "cpsat"
    HEURISTIC = "heuristic"


def load_cli_snapshot(path: Path) -> FleetSnapshot:
    """Load with `now` = the current time (hand-written fleets omit it); point at validate."""
    try:
        return load_snapshot(path, now=time.time())
    except SnapshotError as err:
        if not err.next_command and err.code not in {"file_not_found", "file_unreadable"}:
            err.next_command = f"grid validate {path}"
        raise


def process_age_s() -> float:
    """Seconds since this process started; 0.0 where that cannot be read.

    Linux: the start time in /proc/self/stat (clock ticks since boot) against the boot clock
    (CLOCK_BOOTTIME, the same clock, so a calendar change does not move it); elsewhere
    psutil's create time against the calendar."""
    try:
        ticks = start_ticks("self")
        if ticks is not None:
            started = ticks / os.sysconf("SC_CLK_TCK")
            return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, AttributeError):
        pass
    try:
        import psutil

        return max(0.0, time.time() - float(psutil.Process().create_time()))
    except Exception:  # no psutil support here: count from now
        return 0.0


def _command_process() -> bool:
    """Does this process run one `grid` command (main.py's entry point, not `app` in-process)?"""
    from grid.cli import main as cli

    return cli.COMMAND_PROCESS


def command_deadline(limit_s: float) -> Deadline:
    """The command's Deadline: from the process start when this process is the command (then
    its CPU clock counts from the process start too: the machine's pace covers the imports)."""
    if not _command_process():
        return Deadline(limit_s)
    return Deadline(limit_s, started=time.perf_counter() - process_age_s(), cpu_started=0.0)


def output_s(hosts: int, as_json: bool, unmet_only: bool, all_hosts: bool) -> float:
    """The command's work after the plan (validation, output, exit), kept out of the solve:
    the JSON document's (deadline.output_reserve_s), plus the Rich view's layout
    (deadline.rich_output_s)."""
    after = output_reserve_s(hosts)
    if as_json or unmet_only:
        return after
    return after + rich_output_s(hosts, all_hosts)


def _emit_json(document: object) -> None:
    typer.echo(json.dumps(document, indent=2, allow_nan=False))


def plan(
    snapshot: Annotated[Path, typer.Argument(help="Fleet snapshot file (JSON, or TOML).")],
    engine: Annotated[
        EngineChoice, typer.Option("--engine", help="Placement engine.")
    ] = EngineChoice.CPSAT,
    time_limit: Annotated[
        float,
        typer.Option(
            "--time-limit",
            help="Seconds for the whole process, from its start (imports, load, build, solve, "
            "explanations, output); CP-SAT gets what the other phases leave, the heuristic's "
            "plan after it.",
        ),
    ] = 5.0,
    deterministic: Annotated[
        bool,
        typer.Option("--deterministic", help="One solver worker, fixed seed: repeatable plans."),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON plan document on stdout.")
    ] = False,
    unmet_only: Annotated[
        bool,
        typer.Option("--unmet-only", help="Print only the summary, unmet replicas and solver."),
    ] = False,
    all_hosts: Annotated[
        bool,
        typer.Option(
            "--all-hosts",
            help=f"List every host (above {FOLD_HOSTS_ABOVE} hosts, unchanged ones fold "
            "into one line).",
        ),
    ] = False,
) -> None:
    """Plan which models should run on which hosts. Reads a snapshot; changes nothing."""
    deadline = command_deadline(time_limit)  # the whole process: imports and load included
    with plan_spinner(deadline, f"Planning {snapshot.name}"):
        snap = load_cli_snapshot(snapshot)
        deadline.mark("load", deadline.start)
        deadline.output_s = output_s(len(snap.hosts), as_json, unmet_only, all_hosts)
        # Imported here so `grid --version` and `grid validate` do not pay for OR-Tools.
        from grid.planner import make_plan

        result: Plan = make_plan(
            snap,
            engine=engine.value,
            time_limit_s=time_limit,
            deterministic=deterministic,
            deadline=deadline,
        )
    # make_plan's last phase validated the plan (validate.py): a violation was raised there,
    # before anything is printed.
    if as_json:
        _emit_json(result.model_dump(mode="json"))
    else:
        view = render_plan(
            snap, result, unmet_only=unmet_only, all_hosts=all_hosts, source=str(snapshot)
        )
        Console(highlight=False).print(view)
    deadline.keep.clear()  # the problem, freed now that the plan is out
    if _command_process():  # the process exits next: spare it the final full collection
        from grid.planner import freeze_for_exit

        freeze_for_exit()


def snapshot_counts(snap: FleetSnapshot) -> dict[str, int]:
    residencies = [r for h in snap.hosts for r in h.residencies]
    return {
        "hosts": len(snap.hosts),
        "admitting_hosts": sum(1 for h in snap.hosts if not host_refusals(h, snap)),
        "models": len(snap.models),
        "demand_entries": len(snap.demand),
        "residencies": len(residencies),
        "unmanaged_residencies": sum(1 for r in residencies if not r.is_managed),
        "pins": sum(len(m.pinned_hosts) for m in snap.models),
    }


def validate(
    snapshot: Annotated[Path, typer.Argument(help="Fleet snapshot file (JSON, or TOML).")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON verdict on stdout.")
    ] = False,
) -> None:
    """Check a snapshot against schema v1 and its cross-references; print OK and counts."""
    try:
        snap = load_cli_snapshot(snapshot)
    except GridError as err:
        if not as_json:
            raise
        # A machine reader gets the verdict on stdout, a person the usual lines on stderr.
        _emit_json({"ok": False, "file": str(snapshot), "error": err.to_dict()})
        raise typer.Exit(report_grid_error(err)) from None
    counts = snapshot_counts(snap)
    if as_json:
        _emit_json({"ok": True, "file": str(snapshot), "counts": counts})
    else:
        Console(highlight=False).print(render_validation(str(snapshot), counts))
