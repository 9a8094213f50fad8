"""Rich views of a plan and of a snapshot check (presentation only, no decisions).

Host memory in the plan view is the desired end state: every planned replica plus every
unmanaged live residency (Grid cannot stop those), against the host's allocatable memory
(capacity less reserve and external use, derated when throttled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from grid.cli.render_portfolio import render_portfolio
from grid.cli.render_prefetch import prefetch_parts
from grid.cli.text import plural
from grid.fleet import LIVE_STATES, Assignment, FleetSnapshot, Host, HostState, Plan
from grid.planner import allocatable_mb, host_refusals

# Marker, style and meaning of each line in a host's model list.
MARK_KEPT = ("=", "green", "kept (already live)")
MARK_NEW = ("+", "bold cyan", "new (load and warm)")
MARK_UNMANAGED = ("~", "magenta", "unmanaged (external or manual)")
MARK_LEAVING = ("-", "red", "leaving (drain and unload)")
LEGEND = (MARK_KEPT, MARK_NEW, MARK_UNMANAGED, MARK_LEAVING)


@dataclass(frozen=True)
class HostView:
    host_id: str
    state: str
    lines: list[tuple[tuple[str, str, str], str]]  # (marker, label)
    used_mb: int
    allocatable_mb: int
    slots_used: int
    slot_limit: int  # 0: unlimited
    refusals: list[str]

    @property
    def free_mb(self) -> int:
        return self.allocatable_mb - self.used_mb


def host_view(
    snap: FleetSnapshot, plan: Plan, host: Host, placed: list[Assignment] | None = None
) -> HostView:
    """`placed`: the plan's assignments on this host when the caller grouped them already
    (a scan of every assignment per host is quadratic: 13 s at 10,000 hosts)."""
    unmanaged = {
        r.model_id: r for r in host.residencies if r.state in LIVE_STATES and not r.is_managed
    }
    managed_live = {
        r.model_id: r for r in host.residencies if r.state in LIVE_STATES and r.is_managed
    }
    if placed is None:
        placed = [a for a in plan.assignments if a.host_id == host.host_id]
    placed_ids = {a.model_id for a in placed}
    lines: list[tuple[tuple[str, str, str], str]] = []
    used = sum(r.memory_mb for r in unmanaged.values())
    for a in sorted(placed, key=lambda a: a.model_id):
        if a.model_id in unmanaged:
            lines.append((MARK_UNMANAGED, f"{a.model_id} {a.memory_mb} MB"))
            continue
        used += a.memory_mb
        mark = MARK_KEPT if a.existing else MARK_NEW
        lines.append((mark, f"{a.model_id} {a.memory_mb} MB {a.runtime}"))
    for model_id, res in sorted(unmanaged.items()):
        if model_id not in placed_ids:
            lines.append((MARK_UNMANAGED, f"{model_id} {res.memory_mb} MB ({res.owner.value})"))
    for model_id, res in sorted(managed_live.items()):
        if model_id not in placed_ids:
            lines.append((MARK_LEAVING, f"{model_id} {res.memory_mb} MB ({res.state.value})"))
    state = host.state.value
    if host.state is HostState.THROTTLED:
        state += f" x{host.throttle_fraction:g}"
    return HostView(
        host_id=host.host_id,
        state=state,
        lines=lines,
        used_mb=used,
        allocatable_mb=allocatable_mb(host),
        slots_used=len(placed_ids | set(unmanaged)),
        slot_limit=host.max_models,
        refusals=host_refusals(host, snap),
    )


# Above this many hosts, hosts whose models all stay as they are fold into one line.
FOLD_HOSTS_ABOVE = 32
# ... and at most this many of the others are listed (10,000 new hosts: 22,000 lines and 3 s
# of Rich's table layout, inside `grid plan --time-limit`); --all-hosts lists every host.
LIST_HOSTS_MAX = 200


def _changes(view: HostView) -> bool:
    return any(mark in (MARK_NEW, MARK_LEAVING) for mark, _label in view.lines)


def _hosts_table(snap: FleetSnapshot, plan: Plan, *, all_hosts: bool) -> RenderableType:
    # A light box and a minimum width for the model list keep 80-column terminals readable.
    on_host: dict[str, list[Assignment]] = {}
    for assignment in plan.assignments:
        on_host.setdefault(assignment.host_id, []).append(assignment)
    views = [
        host_view(snap, plan, h, on_host.get(h.host_id, []))
        for h in sorted(snap.hosts, key=lambda h: h.host_id)
    ]
    folded: list[HostView] = []
    cut = 0
    if not all_hosts and len(views) > FOLD_HOSTS_ABOVE:
        folded = [v for v in views if not _changes(v) and not v.refusals]
        views = [v for v in views if _changes(v) or v.refusals]
        cut = max(0, len(views) - LIST_HOSTS_MAX)
        views = views[:LIST_HOSTS_MAX]
    if not snap.hosts:
        return Text("Hosts: none in the snapshot (add `hosts` to plan placements)", style="yellow")
    if not views:
        return Text(
            f"Hosts: {plural(len(folded), 'host')}, none changes (--all-hosts lists them)",
            style="dim",
        )
    table = Table(title="Hosts", title_justify="left", box=box.SIMPLE_HEAD, expand=False)
    table.add_column("Host", no_wrap=True, style="bold")
    table.add_column("State", max_width=18, overflow="fold")
    table.add_column("Models", overflow="fold", ratio=1)
    table.add_column("Memory MB\nused / alloc", justify="right", no_wrap=True)
    table.add_column("Slots", justify="right", no_wrap=True)
    for view in views:
        models = Text()
        for index, ((mark, style, _meaning), label) in enumerate(view.lines):
            if index:
                models.append("\n")
            models.append(f"{mark} ", style=style)
            models.append(label)
        if not view.lines:
            models.append("(empty)", style="dim")
        state = Text(view.state, style="green" if not view.refusals else "yellow")
        if view.refusals:
            state.append("\n" + ", ".join(view.refusals), style="dim")
        memory = Text(f"{view.used_mb} / {view.allocatable_mb}\n")
        memory.append(f"{view.free_mb} free", style="red" if view.free_mb < 0 else "dim")
        limit = str(view.slot_limit) if view.slot_limit else "∞"
        table.add_row(view.host_id, state, models, memory, f"{view.slots_used}/{limit}")
    captions = []
    if cut:
        captions.append(
            f"{plural(cut, 'more host')} with changes or refusals (--all-hosts lists them, "
            "--json prints the whole plan)"
        )
    if folded:
        captions.append(
            f"{plural(len(folded), 'more host')} unchanged, admitting work (--all-hosts lists them)"
        )
    if captions:
        table.caption = "\n".join(captions)
        table.caption_justify = "left"
    return table


def _legend() -> Text:
    text = Text("Legend: ", style="dim")
    for index, (mark, style, meaning) in enumerate(LEGEND):
        if index:
            text.append("  ")
        text.append(mark, style=style)
        text.append(f" {meaning}", style="dim")
    return text


MEMORY_BINDINGS = ("memory", "live_memory")


def memory_ledger(snap: FleetSnapshot, host_id: str) -> str:
    """The free-memory terms of one host, so a binding's "N MB free" adds up: allocatable less
    live residencies less the headroom new loads keep free."""
    host = next((h for h in snap.hosts if h.host_id == host_id), None)
    if host is None:
        return ""
    alloc = allocatable_mb(host)
    live = sum(r.memory_mb for r in host.residencies if r.state in LIVE_STATES)
    fraction = snap.policy.memory_headroom_fraction
    headroom = math.ceil(fraction * alloc)
    free = max(0, alloc - live - headroom)
    return (
        f"{host_id}: allocatable {alloc} MB − live {live} MB − headroom {headroom} MB "
        f"({fraction:.0%} of allocatable) = {free} MB free for a new load"
    )


def _unmet(plan: Plan, snap: FleetSnapshot | None = None) -> RenderableType:
    if not plan.unsatisfied:
        return Text("Unmet replicas: none", style="green")
    parts: list[RenderableType] = [Text("Unmet replicas", style="bold")]
    for u in plan.unsatisfied:
        head = Text("  x ", style="red")
        head.append(u.model_id, style="bold")
        head.append(f"  missing {plural(u.missing_replicas, 'replica')}  ")
        head.append(f"[{u.code}]", style="yellow")
        if u.host_id:
            head.append(f" on {u.host_id}")
        head.append(f"  {u.message}")
        parts.append(head)
        for b in u.binding:
            line = Text(f"      binding: {b.constraint}", style="dim")
            if b.host_id:
                line.append(f" on {b.host_id}", style="dim")
            if b.detail:
                line.append(f": {b.detail}", style="dim")
            parts.append(line)
            if snap is not None and b.host_id and b.constraint in MEMORY_BINDINGS:
                ledger = memory_ledger(snap, b.host_id)
                if ledger:
                    parts.append(Text(f"        ledger {ledger}", style="dim"))
        if u.would_fit_if:
            parts.append(Text(f"      would fit if: {u.would_fit_if}", style="cyan"))
    return Group(*parts)


def _preemptions(plan: Plan) -> RenderableType:
    if not plan.preemptions:
        return Text("Preemptions: none", style="dim")
    parts: list[RenderableType] = [Text("Preemptions (staged: drain, unload, then place)")]
    for p in plan.preemptions:
        line = Text("  ")
        line.append(p.victim_model_id, style="red")
        line.append(f" leaves {p.host_id} for ")
        line.append(p.beneficiary_model_id, style="bold")
        if p.reason:
            line.append(f" ({p.reason})", style="dim")
        parts.append(line)
    return Group(*parts)


def is_replica_level(name: str) -> bool:
    """Levels 1–2 (pinned, per-class baseline/direct/inferred) count replicas."""
    return name == "pinned" or (name.startswith("p") and ":" in name)


def _solver_line(plan: Plan) -> Text:
    s = plan.solver
    line = Text("Solver: ", style="bold")
    line.append(f"{s.engine} · ")
    ok = s.status in {"OPTIMAL", "HEURISTIC"}
    line.append(s.status, style="green" if ok else "yellow")
    line.append(f" · {s.wall_ms:.1f} ms")
    return line


def _solver(plan: Plan) -> RenderableType:
    s = plan.solver
    parts: list[RenderableType] = [_solver_line(plan)]
    if s.message:
        parts.append(Text(f"  {s.message}", style="dim"))
    if s.objective:
        table = Table(
            title="Objective levels (highest first)", title_justify="left", box=box.SIMPLE_HEAD
        )
        table.add_column("Level", no_wrap=True)
        table.add_column("Value", justify="right")
        table.add_column("Bound", justify="right")
        table.add_column("Gap", justify="right")
        for lv in s.objective:
            gap = abs(lv.bound - lv.value)
            name = Text(lv.level, style="bold" if is_replica_level(lv.level) else "")
            table.add_row(
                name,
                f"{lv.value:g}",
                f"{lv.bound:g}",
                Text(f"{gap:g}", style="green" if gap == 0 else "yellow"),
            )
        parts.append(table)
        parts.append(Text("Bold levels count replicas; gap 0 means proven at that level.", "dim"))
    return Group(*parts)


def plan_summary(plan: Plan) -> Text:
    new = sum(1 for a in plan.assignments if not a.existing)
    kept = len(plan.assignments) - new
    missing = sum(u.missing_replicas for u in plan.unsatisfied)
    text = Text("Plan: ", style="bold")
    text.append(f"{plural(len(plan.assignments), 'replica')} ({kept} existing, {new} new), ")
    text.append(f"{missing} unmet", style="red" if missing else "green")
    text.append(f", {plural(len(plan.preemptions), 'preemption')}")
    return text


def _desired(snap: FleetSnapshot, plan: Plan) -> RenderableType:
    """Why each model wants its replica count (the planner's targets with the numbers behind
    them); models held at a plain min_replicas baseline fold into one line."""
    from grid.api.ui import desired_reason
    from grid.planner import compute_targets

    targets = compute_targets(snap)
    table = Table(title="Desired replicas (why)", title_justify="left", box=box.SIMPLE_HEAD)
    for column in ("Model", "Desired", "Why"):
        table.add_column(column, justify="right" if column == "Desired" else "left")
    folded = 0
    for model in snap.models:
        target = targets.get(model.model_id)
        if target is not None and target.reason == "baseline" and not target.pins:
            folded += 1
            continue
        demand = snap.demand.get(model.model_id)
        why = desired_reason(
            target,
            demand.model_dump() if demand else None,
            model.model_dump(mode="json"),
            demand_headroom=snap.policy.demand_headroom_fraction,
        )
        table.add_row(model.model_id, str(plan.desired_replicas.get(model.model_id, 0)), why)
    parts: list[RenderableType] = [table] if table.row_count else []
    if folded:
        parts.append(Text(f"{plural(folded, 'model')} at min_replicas with no demand", "dim"))
    return Group(*parts)


def _next_capacity(plan: Plan, source: str) -> RenderableType:
    if not plan.unsatisfied:
        return Text("")
    return Text(
        f"Next: grid capacity {source} --add models/templates/gpu-server.json "
        "(how many hosts would place every replica; --survive 1 sizes for a failure too)",
        style="cyan",
    )


def render_plan(
    snap: FleetSnapshot,
    plan: Plan,
    *,
    unmet_only: bool = False,
    all_hosts: bool = False,
    source: str = "SNAPSHOT.json",
) -> RenderableType:
    if unmet_only:
        return Group(
            plan_summary(plan),
            Text(""),
            _unmet(plan, snap),
            _next_capacity(plan, source),
            Text(""),
            _solver_line(plan),
        )
    return Group(
        plan_summary(plan),
        _hosts_table(snap, plan, all_hosts=all_hosts),
        _legend(),
        Text(""),
        _desired(snap, plan),
        Text(""),
        _unmet(plan, snap),
        _next_capacity(plan, source),
        Text(""),
        _preemptions(plan),
        Text(""),
        _solver(plan),
        render_portfolio(plan),
        *prefetch_parts(plan.prefetch),
    )


def render_validation(path: str, counts: dict[str, int]) -> RenderableType:
    text = Text("OK ", style="bold green")
    text.append(f"{path}: ")
    text.append(
        f"{counts['hosts']} hosts ({counts['admitting_hosts']} admitting), "
        f"{counts['models']} models, {counts['demand_entries']} demand entries, "
        f"{counts['residencies']} residencies ({counts['unmanaged_residencies']} unmanaged), "
        f"{counts['pins']} pins"
    )
    return text
