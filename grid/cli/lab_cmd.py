"""`grid lab ...`: scenario-lab helpers: generated fleets, the hindsight oracle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from grid.fleet import GridError
from grid.lab import DEFAULT_NOW, generate_fleet, what_if_document

if TYPE_CHECKING:
    from grid.lab.oracle import OracleResult

lab_app = typer.Typer(
    name="lab",
    help="Scenario lab: generated fleets, the hindsight oracle.",
    no_args_is_help=True,
)


@lab_app.command("generate-fleet")
def generate_fleet_cmd(
    hosts: Annotated[int, typer.Option("--hosts", min=1, help="Number of hosts.")] = 64,
    models: Annotated[int, typer.Option("--models", min=1, help="Number of model profiles.")] = 32,
    seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same fleet).")] = 64,
    residencies: Annotated[
        bool, typer.Option("--residencies/--empty", help="Include live residencies.")
    ] = True,
    what_if: Annotated[
        bool,
        typer.Option(
            "--what-if",
            help="Drop `now`, heartbeats and residency times: plan it as of the current time.",
        ),
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write here instead of stdout.")
    ] = None,
    shape: Annotated[
        str,
        typer.Option(
            "--shape",
            help="mixed: every host distinct (default); production: few machine shapes with "
            "realistic counts, GPU-type tags, skewed demand, no residencies; trace: a "
            "production trace's GPU cluster (ten GPU types, racks of 32 nodes as failure "
            "domains, a third of the models on one GPU type, a third needing two domains).",
        ),
    ] = "mixed",
) -> None:
    """Generate a deterministic, realistic fleet snapshot (JSON)."""
    if shape not in ("mixed", "production", "trace"):
        raise GridError(
            "unknown_fleet_shape",
            f"fleet shape {shape!r} is not one of mixed, production, trace",
            fix="pass --shape mixed, --shape production or --shape trace",
            next_command=f"grid lab generate-fleet --shape production --hosts {hosts}",
        )
    if shape == "production":
        from grid.lab import generate_production_fleet

        snap = generate_production_fleet(hosts, models, seed, now=DEFAULT_NOW)
    elif shape == "trace":
        from grid.lab import generate_trace_fleet

        snap = generate_trace_fleet(hosts, models, seed, now=DEFAULT_NOW)
    else:
        snap = generate_fleet(hosts, models, seed, residencies=residencies, now=DEFAULT_NOW)
    doc = what_if_document(snap) if what_if else snap.model_dump(mode="json")
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    if out is None:
        typer.echo(text, nl=False)
        return
    folder = out.expanduser().absolute().parent
    if not folder.is_dir():
        raise GridError(
            "folder_not_found",
            f"cannot write {out}: the folder {folder} does not exist (Grid does not create it)",
            fix="create the folder first, or choose a path in an existing folder with --out",
            next_command=f"mkdir -p {folder}",
        )
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise GridError(
            "file_unwritable",
            f"cannot write {out}: {exc.strerror}",
            fix="choose a writable path with --out",
        ) from None
    typer.echo(f"wrote {out}: {hosts} hosts, {models} models, seed {seed}", err=True)


@lab_app.command("oracle")
def oracle_cmd(
    trace: Annotated[Path, typer.Argument(help="Demand trace (JSON, format in docs/oracle.md).")],
    time_limit: Annotated[
        float,
        typer.Option(
            "--time-limit", min=0.01, help="Solver budget in seconds for both stages together."
        ),
    ] = 60.0,
    deterministic: Annotated[
        bool,
        typer.Option(
            "--deterministic",
            help="Budget in CP-SAT deterministic time: the same trace gives the same answer.",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON document (the contract's).")
    ] = False,
) -> None:
    """Hindsight oracle: the most demand any schedule could serve on TRACE, and the schedule."""
    from grid.lab.oracle import load_trace, solve_oracle  # CP-SAT and SciPy load only here

    result = solve_oracle(load_trace(trace), time_limit, deterministic)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, allow_nan=False))
        return
    _render_oracle(result)


SCHEDULE_ROWS = 40  # the human view lists this many actions; --json has them all


def _render_oracle(result: OracleResult) -> None:
    console = Console(highlight=False)
    summary = Table(
        title="Hindsight oracle",
        caption=f"demand {result.demand:.1f} concurrency-minutes",
        box=box.SIMPLE_HEAD,
    )
    for col in ("schedule", "status", "served", "ceiling", "bound", "gap", "mutations"):
        summary.add_column(col, justify="left" if col == "schedule" else "right", no_wrap=True)
    summary.add_row(
        result.engine,
        result.status,
        f"{result.served:.1f}",
        f"{result.service_ceiling:.2%}",
        f"{result.bound:.1f}",
        f"{result.gap:.2%}",
        str(result.mutations),
    )
    greedy_ceiling = result.greedy_served / result.demand if result.demand else 1.0
    summary.add_row(
        "greedy",
        "",
        f"{result.greedy_served:.1f}",
        f"{greedy_ceiling:.2%}",
        "",
        "",
        str(result.greedy_mutations),
        style="dim",
    )
    console.print(summary)
    actions = Table(box=box.SIMPLE_HEAD)
    for col in ("minute", "action", "model", "host"):
        actions.add_column(col, justify="right" if col == "minute" else "left")
    for act in result.schedule[:SCHEDULE_ROWS]:
        style = "cyan" if act.action == "load" else "red"
        actions.add_row(str(act.minute), act.action, act.model_id, act.host_id, style=style)
    console.print(actions)
    more = len(result.schedule) - SCHEDULE_ROWS
    tail = f"; {more} more actions (--json lists all)" if more > 0 else ""
    console.print(f"solved in {result.wall_s:.2f} s{tail}")
