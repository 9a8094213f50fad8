"""Rich rendering of a plan's `portfolio` (mapping, admission rows, candidates, solver) and
of the status document's `workloads` section."""

from __future__ import annotations

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from grid.fleet import AdmissionState, Plan, PortfolioReport
from grid.fleet.operator import WorkloadsSection

_STATE_STYLE = {
    AdmissionState.READY: "green",
    AdmissionState.STARTING: "cyan",
    AdmissionState.PLANNED: "cyan",
    AdmissionState.UNDERSUPPLIED: "yellow",
    AdmissionState.DEFERRED: "dim",
    AdmissionState.CAPACITY_CONTENDED: "yellow",
    AdmissionState.BLOCKED_BY_RESIDENCY: "yellow",
    AdmissionState.INFEASIBLE: "red",
    AdmissionState.AWAITING_PLAN: "dim",
}


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def admission_table(report: PortfolioReport) -> Table:
    table = Table(title="Workload admission", box=box.SIMPLE_HEAD, title_justify="left")
    for name in ("workload", "state", "model", "offered", "desired", "planned", "ready"):
        table.add_column(name, justify="right" if name in ("offered", "desired") else "left")
    table.add_column("missing", justify="right")
    table.add_column("hosts", justify="right")
    table.add_column("startup s", justify="right")
    table.add_column("reason")
    for row in report.admission:
        table.add_row(
            row.workload,
            Text(row.state.value, style=_STATE_STYLE[row.state]),
            row.model_id or "-",
            _num(row.offered_concurrency),
            str(row.desired),
            str(row.planned),
            str(row.ready),
            str(row.missing),
            str(row.eligible_hosts),
            _num(row.startup_s),
            row.reason,
        )
    return table


def candidates_table(report: PortfolioReport) -> Table:
    table = Table(title="Portfolio candidates", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("workload")
    table.add_column("model")
    table.add_column("feasible")
    table.add_column("hosts", justify="right")
    table.add_column("best host")
    table.add_column("startup s", justify="right")
    table.add_column("penalty", justify="right")
    table.add_column("utility", justify="right")
    table.add_column("confidence", justify="right")
    table.add_column("bonus", justify="right")
    table.add_column("rejection")
    chosen = set(report.mapping.items())
    for c in report.candidates:
        mark = "*" if (c.workload, c.model_id) in chosen else ""
        table.add_row(
            c.workload,
            f"{c.model_id}{mark}",
            Text("yes", style="green") if c.feasible else Text("no", style="red"),
            str(c.eligible_hosts),
            c.best_host or "-",
            _num(c.startup_s),
            _num(c.transition_penalty),
            _num(c.utility),
            _num(c.confidence),
            _num(c.exploration_bonus),
            c.rejection or "",
        )
    return table


def render_portfolio(plan: Plan) -> RenderableType:
    """The portfolio section of `grid plan` (nothing without workloads)."""
    return Text("") if plan.portfolio is None else render_report(plan.portfolio)


def render_report(report: PortfolioReport) -> RenderableType:
    """A portfolio report (`grid plan`, `grid allocator status`)."""
    mapping = ", ".join(f"{w} → {m}" for w, m in report.mapping.items()) or "none"
    head = Text("Portfolio: ", style="bold")
    head.append(mapping)
    head.append(f"   exploration model: {report.exploration_model or 'none'}")
    solver = report.solver
    tail = Text(f"portfolio solver: {solver.engine} {solver.status} in {solver.wall_ms:g} ms")
    if solver.message:
        tail.append(f" ({solver.message})")
    levels = ", ".join(f"{lv.level}={lv.value}" for lv in solver.objective)
    if levels:
        tail.append(f"\nportfolio levels: {levels}")
    note = Text("* the candidate the portfolio chose", style="dim")
    return Group(Text(""), head, admission_table(report), candidates_table(report), note, tail)


def _table(title: str, columns: list[str]) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def workload_parts(section: WorkloadsSection) -> list[RenderableType]:
    """`grid allocator status`: workload demand, the portfolio's admission rows and candidates
    (the status document's `workloads` section), learned workflows with their confidence."""
    parts: list[RenderableType] = []
    if section.forecasts:
        table = _table(
            "Workload demand", ["workload", "offered", "observations", "rpm", "modality"]
        )
        for word, f in section.forecasts.items():
            table.add_row(
                word,
                f"{f.offered_concurrency:.3g}",
                str(f.observations),
                f"{f.rpm:.3g}",
                f.modality.value,
            )
        parts.append(table)
    if section.portfolio is not None:
        parts.append(render_report(section.portfolio))
    if section.edges:
        table = _table("Learned workflows", ["from", "to", "count", "departures", "confidence"])
        for e in section.edges:
            table.add_row(
                e.source, e.target, str(e.count), str(e.departures), f"{e.confidence:.2f}"
            )
        parts.append(table)
    return parts
