"""`grid lab ...`: scenario-lab helpers. For now, writing generated fleets to files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from grid.fleet.errors import GridError
from grid.lab.fleetgen import DEFAULT_NOW, generate_fleet, what_if_document

lab_app = typer.Typer(
    name="lab",
    help="Scenario lab: generated fleets (more to come: workdays, simulator).",
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
) -> None:
    """Generate a deterministic, realistic fleet snapshot (JSON)."""
    snap = generate_fleet(hosts, models, seed, residencies=residencies, now=DEFAULT_NOW)
    doc = what_if_document(snap) if what_if else snap.model_dump(mode="json")
    text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise GridError(
            "file_unwritable",
            f"cannot write {out}: {exc.strerror}",
            fix="choose a writable path with --out",
        ) from None
    typer.echo(f"wrote {out}: {hosts} hosts, {models} models, seed {seed}", err=True)
