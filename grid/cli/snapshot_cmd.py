"""`grid allocator snapshot -o FILE`: the controller's fleet as a snapshot file, so the what-if
commands (`grid plan`, `grid capacity`) answer questions about the live fleet.

Built from the status document: the hosts as the controller plans them (`snapshots`), the
profiles and the demand forecast per model; then checked like any snapshot file. Nothing in it
is secret (the status document holds none).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from grid.cli.allocator_cmd import allocator_app
from grid.cli.connection import GridOpt, StateOpt, client
from grid.fleet import DemandEntry, atomic_write_text, parse_snapshot
from grid.fleet.operator import StatusDocument

DEMAND_FIELDS = tuple(DemandEntry.model_fields)


def snapshot_document(status: StatusDocument) -> dict[str, object]:
    """A schema-v1 snapshot file (JSON) of the fleet a status document describes."""
    demand = {
        model_id: entry.model_dump(mode="json", include=set(DEMAND_FIELDS))
        for model_id, entry in sorted(status.forecasts.items())
    }
    return {
        "schema_version": 1,
        "now": status.now,
        "hosts": [h.model_dump(mode="json") for h in status.snapshots],
        "models": [p.model_dump(mode="json") for p in status.profiles],
        "demand": demand,
    }


@allocator_app.command("snapshot")
def snapshot(
    output: Annotated[Path, typer.Option("--output", "-o", help="Snapshot file to write (JSON).")],
    grid: GridOpt = None,
    state_dir: StateOpt = None,
) -> None:
    """Write the controller's fleet (hosts, profiles, demand) as a snapshot file for
    `grid plan` and `grid capacity`."""
    with client(grid, state_dir, admin=False) as api:
        status = api.status(history=0)
    doc = snapshot_document(status)
    snap = parse_snapshot(doc)  # the same checks as any snapshot file
    atomic_write_text(output, json.dumps(doc, indent=2) + "\n", 0o644)
    typer.echo(f"Wrote {output}: {len(snap.hosts)} hosts, {len(snap.models)} models")
    typer.echo(f"Next: grid capacity {output} --add models/templates/gpu-server.json --survive 1")
