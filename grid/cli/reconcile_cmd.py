"""`grid reconcile`: plan one snapshot, then stage the safe actions that would converge it.

Reads a fleet snapshot (with an optional `history` list of action records and retirement
tombstones), plans it deterministically (or, with `--plan PLAN.json`, takes a stored `grid plan
--json` document as the target, stale or not: a stored plan reconciles as stale, so its staged
preemptions keep every availability floor), and prints the actions, the deferrals (each with its
code, sentence and retry time) and any withdrawals. It never touches a fleet: even in automatic
mode it only marks actions executable. With --json, stdout carries exactly one JSON document:
{"mode", "now", "actions", "deferred", "withdrawn", "in_flight", "blocked_models", "plan"}.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from grid.cli.errors import report_grid_error
from grid.fleet import FleetSnapshot, GridError, Plan, ReconcileResult, load_snapshot, parse_history

MAX_PLAN_BYTES = 64 * 1024 * 1024


def _load(path: Path) -> FleetSnapshot:
    # A hand-written snapshot without `now` is taken as observed at the current time.
    return load_snapshot(path, now=time.time())


PLAN_FIX = "pass the JSON document that `grid plan --json` printed"


def load_plan(path: Path, snapshot: Path) -> Plan:
    """A stored `grid plan --json` document; anything else is a refusal with a fix."""
    from pydantic import ValidationError

    def refusal(code: str, why: str, fix: str = PLAN_FIX, where: str = "") -> GridError:
        redo = f"grid plan {snapshot} --json > {path}"
        return GridError(code, f"the plan file {path} {why}", fix, where, redo)

    try:
        size = path.stat().st_size
        if size > MAX_PLAN_BYTES:
            raise refusal("plan_too_large", f"is {size} bytes, above {MAX_PLAN_BYTES}")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise refusal("plan_not_found", "does not exist", "write a plan first") from None
    except (OSError, UnicodeDecodeError) as err:
        raise refusal("plan_unreadable", f"cannot be read as text ({type(err).__name__})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        why = f"is not JSON (line {err.lineno}, column {err.colno}: {err.msg})"
        raise refusal("plan_not_json", why) from None
    if not isinstance(doc, dict) or "schema_version" not in doc:
        raise refusal("plan_invalid", "is not a plan document (no schema_version)")
    try:
        return Plan.model_validate(doc)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        why = f"does not follow the plan schema: {first['msg']}"
        fix = "pass an unedited `grid plan --json` document"
        raise refusal("plan_invalid", why, fix, where) from None


def reconcile(
    snapshot: Annotated[Path, typer.Argument(help="Fleet snapshot file (JSON, or TOML).")],
    mode: Annotated[
        str, typer.Option("--mode", help="observe, recommend or automatic.")
    ] = "recommend",
    engine: Annotated[str, typer.Option("--engine", help="Placement engine.")] = "cpsat",
    json_out: Annotated[
        bool, typer.Option("--json", help="Print exactly one JSON document on stdout.")
    ] = False,
    time_limit: Annotated[
        float, typer.Option("--time-limit", help="Solver budget in seconds.")
    ] = 5.0,
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            help="Reconcile against this stored `grid plan --json` document instead of planning "
            "the snapshot now. It reconciles as stale: its preemptions keep every availability "
            "floor.",
        ),
    ] = None,
) -> None:
    """Plan a snapshot (or take --plan) and show the staged actions that would converge it."""
    from grid.planner import make_plan
    from grid.runtime.reconcile import parse_mode, result_document
    from grid.runtime.reconcile import reconcile as reconcile_fleet

    try:
        chosen = parse_mode(mode)
        snap = _load(snapshot)
        records, tombstones = parse_history(snap.history)
        if plan_file is not None:
            plan = load_plan(plan_file, snapshot)
        else:
            plan = make_plan(snap, engine=engine, time_limit_s=time_limit, deterministic=True)
        # A stored plan is not proven to be solved for this snapshot: it reconciles as stale.
        result = reconcile_fleet(
            plan, snap, records, mode=chosen, tombstones=tombstones, plan_current=plan_file is None
        )
    except GridError as err:
        raise typer.Exit(report_grid_error(err)) from None
    if json_out:
        typer.echo(json.dumps(result_document(result, plan), indent=2, allow_nan=False))
        return
    stored = str(plan_file) if plan_file is not None else None
    view = render_reconcile(snap, plan, result, source=str(snapshot), stored_plan=stored)
    Console(highlight=False).print(view)


def _table(title: str, columns: tuple[str, ...]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    return table


def _retry(now: float, at: float) -> str:
    delta = at - now
    return "now" if delta <= 0 else f"in {delta:.0f} s"


def render_reconcile(
    snap: FleetSnapshot,
    plan: Plan,
    result: ReconcileResult,
    *,
    source: str = "SNAPSHOT",
    stored_plan: str | None = None,
) -> Group:
    parts: list[Table | Text] = []
    verb = {
        "observe": "observed (no actions)",
        "recommend": "recommended (not executed)",
        "automatic": "executable",
    }[result.mode.value]
    title = f"Actions — {verb}"
    if result.actions:
        table = _table(title, ("id", "kind", "host", "model", "memory MB", "after", "reason"))
        for a in result.actions:
            table.add_row(
                a.action_id,
                a.kind.value,
                a.host_id,
                a.model_id,
                str(a.memory_mb),
                ", ".join(a.dependencies) or "-",
                a.reason,
            )
        parts.append(table)
    else:
        parts.append(Text(f"{title}: none", style="bold"))
    if result.deferred:
        table = _table("Deferred", ("kind", "host", "model", "code", "retry", "why"))
        for d in result.deferred:
            table.add_row(
                d.kind.value,
                d.host_id,
                d.model_id,
                d.code,
                _retry(result.now, d.retry_at),
                d.message,
            )
        parts.append(table)
    if result.withdrawn:
        table = _table("Withdrawn", ("id", "kind", "host", "model", "code", "delivered"))
        for w in result.withdrawn:
            table.add_row(
                w.action_id,
                w.kind.value,
                w.host_id,
                w.model_id,
                w.code,
                "yes" if w.delivered else "no",
            )
        parts.append(table)
    if result.in_flight:
        parts.append(Text(f"In flight (kept): {', '.join(result.in_flight)}"))
    if result.blocked_models:
        parts.append(
            Text(
                f"Destructive work blocked for: {', '.join(result.blocked_models)}",
                style="yellow",
            )
        )
    unmet = sum(u.missing_replicas for u in plan.unsatisfied)
    parts.append(
        Text(
            f"Plan{f' (stored: {stored_plan})' if stored_plan else ''}: "
            f"{len(plan.assignments)} replica(s) on {len(snap.hosts)} host(s), "
            f"{unmet} unmet; solver {plan.solver.engine} {plan.solver.status}. "
            f"Next: grid plan {source} for the placement details.",
            style="dim",
        )
    )
    return Group(*parts)
