"""`grid allocator model list` and `grid allocator apply CATALOG`: readable and declarative
model profiles, registered on the allocator sub-app (`grid.cli.main` loads this module).

`apply` reads a catalog (TOML or JSON with `models = [...]`, the snapshot's `models` entries:
models/catalog.toml is one), validates every entry locally exactly as a snapshot is validated
(field paths, closest-field suggestions), compares each with the controller's current profile,
prints what changes, and then sets every new or changed profile (like a llama-swap config).
Profiles the file does not name are kept unless `--prune` retires them. `--dry-run` only prints.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Literal

import typer
from pydantic import BaseModel, Field, JsonValue
from rich.console import Console
from rich.table import Table

from grid.cli import snapshot_cmd  # noqa: F401  (registers `grid allocator snapshot`)
from grid.cli.allocator_cmd import allocator_app, model_app
from grid.cli.connection import CaFileOpt, GridOpt, JsonOpt, StateOpt, TokenFileOpt, _again, client
from grid.fleet import GridError, ModelProfile
from grid.fleet.operator import ProfileUpdate, StatusDocument

__all__ = ["allocator_app", "apply_catalog", "model_list"]


def _console() -> Console:
    return Console(highlight=False, width=max(110, Console().width))


def _replicas_by_model(doc: StatusDocument) -> tuple[dict[str, int], dict[str, int]]:
    planned: dict[str, int] = {}
    for a in doc.plan.assignments if doc.plan is not None else []:
        planned[a.model_id] = planned.get(a.model_id, 0) + 1
    ready: dict[str, int] = {}
    for host in doc.hosts:
        for r in host.residencies:
            if r.state == "ready":
                ready[r.model_id] = ready.get(r.model_id, 0) + 1
    return planned, ready


def _placement(p: ModelProfile) -> str:
    bits = [f"pin {', '.join(p.pinned_hosts)}"] if p.pinned_hosts else []
    bits += [f"+{t}" for t in p.required_tags]
    bits += [f"-{t}" for t in p.forbidden_tags]
    if p.min_failure_domains > 1:
        bits.append(f"{p.min_failure_domains} domains")
    return " ".join(bits) or "any host"


@model_app.command("list")
def model_list(
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    ca_file: CaFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the controller's model profiles: size, replicas, placement, planned and ready."""
    with client(grid, state_dir, admin=False, ca_file=ca_file) as api:
        doc = api.status(history=0)
    profiles = doc.profiles
    if as_json:
        document = {
            "profiles": [p.model_dump(mode="json") for p in profiles],
            "tombstones": [t.model_dump(mode="json") for t in doc.tombstones],
        }
        typer.echo(json.dumps(document, indent=2, allow_nan=False))
        return
    if not profiles:
        typer.echo("No model profiles yet.")
        typer.echo("Next: " + _again("grid allocator apply models/catalog.toml", grid, state_dir))
        return
    planned, ready = _replicas_by_model(doc)
    table = Table(title=f"Model profiles ({len(profiles)})", title_justify="left")
    for column in ("model", "memory MB", "replicas", "priority", "runtimes", "tier"):
        table.add_column(column, justify="right" if column in ("memory MB", "priority") else "left")
    table.add_column("placement")
    table.add_column("planned", justify="right")
    table.add_column("ready", justify="right")
    for p in profiles:
        table.add_row(
            p.model_id,
            str(p.memory_mb),
            f"{p.min_replicas}..{p.max_replicas}",
            str(p.priority),
            ", ".join(p.runtimes),
            p.data_tier,
            _placement(p),
            str(planned.get(p.model_id, 0)),
            str(ready.get(p.model_id, 0)),
        )
    _console().print(table)
    retired = [t.model_id for t in doc.tombstones]
    if retired:
        typer.echo(f"Retired (converging to zero): {', '.join(retired)}")


# ----------------------------------------------------------------------------- apply


class FieldChange(BaseModel):
    """One field of a changed profile: the controller's value and the file's (JSON forms)."""

    before: JsonValue = Field(serialization_alias="from")
    to: JsonValue


class ProfileChange(BaseModel):
    """What `apply` does to one model: `new`, `changed` (with the fields), `unchanged`, and for
    a profile the file does not name, `retire` (with --prune) or `kept`."""

    model_id: str
    change: Literal["new", "changed", "unchanged", "retire", "kept"]
    fields: dict[str, FieldChange] = Field(default_factory=dict)
    profile: ModelProfile | None = Field(default=None, exclude=True)  # the file's, to send

    def update(self) -> ProfileUpdate:
        """The body that sets this profile: every field of the file's profile."""
        assert self.profile is not None
        return ProfileUpdate.model_validate(
            self.profile.model_dump(mode="json", exclude={"model_id"})
        )


def read_catalog(path: Path) -> list[ModelProfile]:
    """The catalog's profiles, validated like a snapshot's `models` (defaults filled). Bad
    entries are refused with their field path."""
    from grid.fleet import load_snapshot

    snap = load_snapshot(path, now=time.time())
    if snap.hosts or snap.demand:
        raise GridError(
            "not_a_catalog",
            f"{path} describes a fleet (hosts or demand), not a profile catalog",
            fix="apply a file that lists only `models` (like models/catalog.toml)",
            next_command=f"grid plan {path}",
        )
    if not snap.models:
        raise GridError(
            "empty_catalog",
            f"{path} lists no models",
            fix="add [[models]] entries (see models/catalog.toml and docs/snapshot.md)",
        )
    return list(snap.models)


def _short(value: JsonValue) -> str:
    text = json.dumps(value, separators=(",", ":")) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "..."


def diff_profiles(
    wanted: list[ModelProfile], current: list[ModelProfile], *, prune: bool
) -> list[ProfileChange]:
    """One change per model named by the file, then one per profile it does not name;
    fields are compared in their JSON forms."""
    have = {p.model_id: p.model_dump(mode="json") for p in current}
    rows: list[ProfileChange] = []
    for profile in wanted:
        model_id = profile.model_id
        old = have.get(model_id)
        if old is None:
            rows.append(ProfileChange(model_id=model_id, change="new", profile=profile))
            continue
        fields = {
            key: FieldChange(before=old.get(key), to=value)
            for key, value in profile.model_dump(mode="json").items()
            if old.get(key) != value
        }
        change: Literal["changed", "unchanged"] = "changed" if fields else "unchanged"
        rows.append(ProfileChange(model_id=model_id, change=change, fields=fields, profile=profile))
    named = {p.model_id for p in wanted}
    for model_id in sorted(set(have) - named):
        rows.append(ProfileChange(model_id=model_id, change="retire" if prune else "kept"))
    return rows


def _detail(row: ProfileChange) -> str:
    if row.change == "new" and row.profile is not None:
        p = row.profile
        return f"{p.memory_mb} MB, replicas {p.min_replicas}..{p.max_replicas}"
    if row.change == "changed":
        return "; ".join(
            f"{key}: {_short(v.before)} -> {_short(v.to)}" for key, v in row.fields.items()
        )
    if row.change == "kept":
        return "not in the file: kept (--prune retires it)"
    if row.change == "retire":
        return "not in the file: retired (drained and unloaded safely)"
    return "-"


STYLES = {"new": "green", "changed": "yellow", "retire": "red", "unchanged": "dim", "kept": "dim"}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@allocator_app.command("apply")
def apply_catalog(
    catalog: Annotated[Path, typer.Argument(help="Profile catalog (TOML or JSON `models` list).")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would change; send nothing.")
    ] = False,
    prune: Annotated[
        bool, typer.Option("--prune", help="Retire profiles that the file does not name.")
    ] = False,
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    ca_file: CaFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Set every profile in CATALOG (declarative, like a llama-swap config), showing what
    changes."""
    wanted = read_catalog(catalog)
    with client(grid, state_dir, token_file, admin=not dry_run, ca_file=ca_file) as api:
        rows = diff_profiles(wanted, api.status(history=0).profiles, prune=prune)
        todo = [r for r in rows if r.change in ("new", "changed", "retire")]
        if not dry_run:
            for row in todo:
                if row.change == "retire":
                    api.delete_model(row.model_id)
                else:
                    api.put_model(row.model_id, row.update())
    if as_json:
        document = {
            "file": str(catalog),
            "dry_run": dry_run,
            "applied": 0 if dry_run else len(todo),
            "changes": [r.model_dump(mode="json", by_alias=True) for r in rows],
        }
        typer.echo(json.dumps(document, indent=2, allow_nan=False))
        return
    table = Table(title=f"{catalog}", title_justify="left")
    for column in ("model", "change", "what"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(row.model_id, row.change, _detail(row), style=STYLES[row.change])
    _console().print(table)
    if dry_run:
        typer.echo(f"Dry run: {_plural(len(todo), 'change')} would be applied; nothing was sent.")
        typer.echo("Next: " + _again(f"grid allocator apply {catalog}", grid, state_dir))
        return
    typer.echo(f"Applied {_plural(len(todo), 'change')}.")
    typer.echo("Next: " + _again("grid allocator model list", grid, state_dir))
