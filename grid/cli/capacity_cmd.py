"""`grid capacity SNAPSHOT --add TEMPLATE.json … [--max N] [--drill] [--json]`.

Reads a snapshot and host templates, and answers how many hosts of each template must be added
so that every desired replica is placed (grid/lab/capacity.py); `--drill` adds the N−1 drill
(grid/lab/whatif_drill.py). Every answer, INFEASIBLE included, exits 0; bad input is a
`GridError` (exit 2, printed by the guarded group in main.py). Nothing touches a fleet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from grid.cli.plan_cmd import load_cli_snapshot
from grid.fleet import GridError, Host
from grid.lab import DEFAULT_MAX, check_demand, check_max, load_templates
from grid.planner import allocatable_mb

if TYPE_CHECKING:
    from grid.lab import CapacityAnswer, Drill, SurviveAnswer

capacity_app = typer.Typer(
    name="capacity",
    help="What-if capacity: how many hosts of a template to add, and the N−1 drill.",
    no_args_is_help=True,
    subcommand_metavar="",  # a group with no sub-commands: `grid capacity SNAPSHOT [OPTIONS]`
    # A group stops parsing options at its first argument; this one has no sub-commands, so
    # `grid capacity SNAPSHOT --add T.json` must read the options after SNAPSHOT too.
    context_settings={"allow_interspersed_args": True},
)


def _answer_view(answer: CapacityAnswer, templates: list[Host]) -> list[object]:
    style = {"OPTIMAL": "bold green", "FEASIBLE": "yellow"}.get(answer.status, "bold red")
    head = Text.assemble(
        ("Capacity: ", "bold"),
        (answer.status, style),
        f" · placed {answer.placed_before} → {answer.placed_after} of {answer.desired} "
        "desired replicas",
    )
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("Template")
    table.add_column("Add", justify="right")
    table.add_column("Allocatable MB each", justify="right")
    table.add_column("Added memory MB", justify="right")
    for t in templates:
        n = answer.added.get(t.host_id, 0)
        table.add_row(t.host_id, str(n), str(allocatable_mb(t)), str(n * allocatable_mb(t)))
    rounds = "" if answer.rounds <= 1 else f" after {answer.rounds} count-model solves"
    verified = Text(
        f"Verified by planning the fleet with the added hosts{rounds}: "
        f"{answer.placed_after} of {answer.desired} desired replicas placed.",
        style="dim",
    )
    parts: list[object] = [head, table, verified] if answer.rounds else [head, table]
    if answer.binding:
        title = "Why not" if answer.status == "INFEASIBLE" else "What held replicas back"
        parts.append(Text(title, style="bold"))
        for b in answer.binding:
            who = f"{b.get('model_id')}: " if b.get("model_id") else ""
            parts.append(Text(f"  {b['constraint']}  {who}{b.get('detail', '')}"))
    return parts


def _survive_view(answer: SurviveAnswer, templates: list[Host]) -> list[object]:
    style = "bold green" if answer.status == "SURVIVES" else "bold red"
    counts = ", ".join(f"{answer.added.get(t.host_id, 0)} × {t.host_id}" for t in templates)
    tried = "every" if answer.exhaustive else f"the {answer.failure_sets} largest-host"
    head = Text.assemble(
        (f"Surviving {answer.survive} failure(s): ", "bold"),
        (answer.status, style),
        f" · add {counts} · {tried} failure set(s) of {answer.survive} host(s) planned",
    )
    parts: list[object] = [head]
    if answer.worst:
        parts.append(Text(f"  hardest failure: {', '.join(answer.worst)}"))
    for b in answer.binding:
        parts.append(Text(f"  {b['constraint']}  {b.get('detail', '')}"))
    for p in answer.pinned:
        hosts = ", ".join(str(h) for h in p["pinned_hosts"])  # type: ignore[attr-defined]
        parts.append(Text(f"  {p['model_id']} is pinned to {hosts}: it goes down with it"))
    return parts


def _drill_view(result: Drill) -> list[object]:
    table = Table(box=box.SIMPLE_HEAD, title="N−1 drill: if this host failed")
    for column in ("Host", "Replicas", "Unmet", "Unmet models", "Last replica", "Lost"):
        table.add_column(column, justify="right" if column in {"Replicas", "Unmet"} else "left")
    for row in result.table():
        table.add_row(*(str(v) for v in row.values()))
    return [table]


_CapacityAdd = Annotated[
    list[Path] | None,
    typer.Option(
        "--add",
        help="Host template file (one host object, JSON or TOML); repeat for several.",
    ),
]
_CapacityMaxHosts = Annotated[
    int,
    typer.Option("--max", help="The most hosts of each template to consider adding."),
]
_CapacityWithDrill = Annotated[
    bool,
    typer.Option("--drill", help="Also run the N−1 drill on the snapshot's fleet."),
]
_CapacityTimeLimit = Annotated[
    float,
    typer.Option("--time-limit", help="Solver budget in seconds per plan and count solve."),
]
_CapacitySurvive = Annotated[
    int,
    typer.Option(
        "--survive",
        min=0,
        max=3,
        help="Also size for failures: every desired replica still placed after any N hosts "
        "fail (1 = N−1 sizing), each failure planned on the proposed fleet.",
    ),
]
_CapacityAsJson = Annotated[
    bool, typer.Option("--json", help="Print exactly one JSON document on stdout.")
]


@capacity_app.callback(invoke_without_command=True)
def capacity_cmd(
    snapshot: Annotated[Path, typer.Argument(help="Fleet snapshot file (JSON, or TOML).")],
    add: _CapacityAdd = None,
    max_hosts: _CapacityMaxHosts = DEFAULT_MAX,
    with_drill: _CapacityWithDrill = False,
    time_limit: _CapacityTimeLimit = 5.0,
    survive: _CapacitySurvive = 0,
    as_json: _CapacityAsJson = False,
) -> None:
    """Fewest hosts per template that place every desired replica (verified by planning)."""
    templates_paths = list(add or [])
    check_max(max_hosts)
    if not time_limit > 0:
        raise GridError(
            "invalid_time_limit",
            f"--time-limit {time_limit} must be a positive number of seconds",
            fix="pass --time-limit with a value such as 5",
            next_command=f"grid capacity {snapshot} --add TEMPLATE.json --time-limit 5",
        )
    if not templates_paths and not with_drill:
        raise GridError(
            "no_template",
            "grid capacity needs a host template to add (--add) or --drill",
            fix="pass --add TEMPLATE.json; a GPU server ships in models/templates/",
            next_command=f"grid capacity {snapshot} --add models/templates/gpu-server.json",
        )
    snap = load_cli_snapshot(snapshot)
    templates = load_templates(templates_paths)
    # Imported here so `grid --help` does not pay for the planner and OR-Tools.
    from grid.lab import drill, whatif
    from grid.lab.capacity import capacity

    before = whatif.plan(snap, time_limit_s=time_limit)
    check_demand(snap, before, str(snapshot))
    document: dict[str, object] = {}
    parts: list[object] = []
    if templates:
        answer = capacity(
            snap, templates, max_per_template=max_hosts, time_limit_s=time_limit, before=before
        )
        document = answer.to_dict()
        parts += _answer_view(answer, templates)
    proposed = snap
    if templates and survive:
        from grid.lab import size_to_survive

        surviving = size_to_survive(
            snap, templates, survive=survive, max_per_template=max_hosts, time_limit_s=time_limit
        )
        document["survive"] = surviving.to_dict()
        parts += _survive_view(surviving, templates)
        proposed = whatif.augment(snap, surviving.added, templates)[0]
    elif templates:
        proposed = whatif.augment(snap, answer.added, templates)[0]
    if with_drill:
        # The drill runs on the proposed fleet (the snapshot when nothing is added).
        base = before if proposed is snap else whatif.plan(proposed, time_limit_s=time_limit)
        result = drill(proposed, base, time_limit_s=time_limit)
        if templates:
            document["drill"] = result.to_dict()
        else:
            document = result.to_dict()
        parts += _drill_view(result)
    if as_json:
        typer.echo(json.dumps(document, indent=2, allow_nan=False))
        return
    console = Console(highlight=False)
    for part in parts:
        console.print(part)
