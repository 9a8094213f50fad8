"""`grid allocator status`: the typed status document (grid.fleet.operator) as Rich
renderables, one function per section."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from grid.cli.render_portfolio import workload_parts
from grid.cli.render_prefetch import prefetch_parts
from grid.cli.text import local_time, plural, relative
from grid.fleet import Plan, RecordStatus
from grid.fleet.operator import DesiredReason, StatusDocument


def _table(title: str, columns: list[str]) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def weights_hint(model_id: str, host_id: str) -> str:
    """How weights reach a node (the load fails with artifact_unknown, and retries after its
    backoff, until one of these is done)."""
    return (
        f"To fix: {host_id} has no file for {model_id}. Either give the node the GGUF "
        f"(on {host_id}: grid node stop && grid node start --model "
        f"{model_id}=/path/to/file.gguf@SHA256), or let "
        f"nodes fetch it: grid allocator model set {model_id} --memory-mb MB "
        "--artifact-source file:///shared/path.gguf (or hf://owner/repo/file.gguf with the "
        "node's hf_base_url) --artifact-sha256 SHA256 --artifact-size-mb MB "
        "(docs/getting-started.md, 'How weights reach nodes')."
    )


def _head(doc: StatusDocument) -> Text:
    rev, lease = doc.revisions, doc.lease
    head = Text()
    head.append(f"mode {doc.mode.value}", style="bold")
    head.append(f"  durable {'yes' if doc.durable else 'NO'}")
    head.append(
        f"  lease term {lease.term} ttl {lease.ttl_s} s" if lease.held else "  lease not held"
    )
    head.append(
        f"\nrevisions dirty {rev.dirty} processed {rev.processed} "
        f"success {rev.success} safety {rev.safety}"
    )
    if doc.grace.active:
        head.append("\nmembership grace active: destructive work waits", style="yellow")
    tick = doc.last_tick
    if tick is not None:
        outcome = "ok" if tick.ok else "FAILED"
        head.append(f"\nlast tick {outcome} {tick.duration_ms} ms {tick.error}".rstrip())
    if doc.last_success_at:
        head.append(f"; last success {local_time(doc.last_success_at, doc.now)}")
    return head


def _hosts(doc: StatusDocument) -> list[RenderableType]:
    if not doc.hosts:
        return [Text("Hosts: none registered yet. Next: grid allocator node start")]
    table = _table("Hosts", ["host", "address", "state", "domain", "memory MB", "residencies"])
    for h in doc.hosts:
        res = ", ".join(f"{r.model_id}:{r.state}" for r in h.residencies) or "-"
        state = h.state + ("" if not h.refusals else f" ({', '.join(h.refusals)})")
        memory = f"{h.live_mb}/{h.allocatable_mb}"
        table.add_row(h.host_id, h.address or "-", state, h.failure_domain, memory, res)
    parts: list[RenderableType] = [table]
    for h in doc.hosts:  # why a host is unhealthy (e.g. address_unreachable), one line each
        for problem in h.problems[:4]:
            parts.append(Text(f"host {h.host_id}: {problem}", style="yellow"))
    return parts


def _plan(plan: Plan | None, generation: str | None) -> list[RenderableType]:
    if plan is None:
        return []
    solver = plan.solver
    title = Text(
        f"Plan {generation}: {solver.engine} {solver.status} in {solver.wall_ms} ms, "
        f"{plural(len(plan.assignments), 'assignment')}",
        style="bold",
    )
    levels = _table("Objective levels", ["level", "value", "bound"])
    for level in solver.objective:
        levels.add_row(level.level, str(level.value), str(level.bound))
    return [title, levels]


def _reasons(reasons: Mapping[str, DesiredReason]) -> list[RenderableType]:
    if not reasons:
        return []
    table = _table("Desired replicas", ["model", "desired", "why"])
    for model_id, r in sorted(reasons.items()):
        table.add_row(model_id, str(r.desired), r.why)
    return [table]


def _unmet(doc: StatusDocument) -> list[RenderableType]:
    if not doc.unmet:
        return []
    table = _table("Unmet replicas", ["model", "code", "missing", "binding", "would fit if"])
    for u in doc.unmet:
        binding = (
            "; ".join(
                b.constraint
                + (f"@{b.host_id}" if b.host_id else "")
                + (f": {b.detail}" if b.detail else "")
                for b in u.binding
            )
            or u.message
        )
        table.add_row(u.model_id, u.code, str(u.missing_replicas), binding, u.would_fit_if or "-")
    return [
        table,
        Text(
            "Next: grid allocator snapshot -o fleet.json && grid capacity fleet.json "
            "--add models/templates/gpu-server.json  (how many hosts would place them)",
            style="cyan",
        ),
    ]


def _commands(doc: StatusDocument) -> list[RenderableType]:
    rows = [
        (c.action_id, c.kind, c.host_id or "-", c.model_id, c.status) for c in doc.pending_commands
    ]
    rows += [(a.action_id, a.kind, a.host_id, a.model_id, "proposed") for a in doc.proposed_actions]
    parts: list[RenderableType] = []
    if rows:
        table = _table(
            "Pending and proposed commands", ["action", "kind", "host", "model", "status"]
        )
        for row in rows:
            table.add_row(*row)
        parts.append(table)
    deferred = doc.reconciliation.deferred if doc.reconciliation is not None else []
    if deferred:
        table = _table("Deferred", ["kind", "host", "model", "code", "retry", "why"])
        for d in deferred:
            retry = relative(d.retry_at, doc.now) if d.retry_at else "-"
            table.add_row(d.kind, d.host_id, d.model_id, d.code, retry, d.message)
        parts.append(table)
    return parts


def _failures(doc: StatusDocument) -> list[RenderableType]:
    failures = [r for r in doc.history if r.status is RecordStatus.FAILED][-5:]
    if not failures:
        return []
    table = _table("Recent failures", ["action", "kind", "host", "model", "when", "why"])
    for r in failures:
        when = local_time(r.finished_at, doc.now) if r.finished_at else "-"
        table.add_row(r.action_id, r.kind, r.host_id, r.model_id, when, r.outcome or "-")
    parts: list[RenderableType] = [table]
    for r in failures:
        if "has no file for" in r.outcome:  # the node's artifact_unknown
            parts.append(Text(weights_hint(r.model_id, r.host_id), style="cyan"))
            break
    return parts


def _safety(doc: StatusDocument) -> list[RenderableType]:
    parts: list[RenderableType] = []
    if doc.withdrawn_destructive:
        table = _table(
            "Withdrawn destructive (awaiting receipt)", ["action", "kind", "host", "model"]
        )
        for w in doc.withdrawn_destructive:
            table.add_row(w.action_id, w.kind, w.host_id, w.model_id)
        parts.append(table)
    if doc.delivery_safety_error is not None:
        message = doc.delivery_safety_error.message
        parts.append(Text(f"delivery safety: {message}", style="yellow"))
    if doc.tombstones:
        parts.append(Text("retired: " + ", ".join(t.model_id for t in doc.tombstones)))
    return parts


def _mode(doc: StatusDocument) -> list[RenderableType]:
    if doc.mode.value == "automatic":
        return []
    return [
        Text(
            f"{doc.mode.value} mode: Grid plans but loads and unloads nothing. "
            "To let it act: grid allocator mode automatic",
            style="yellow",
        )
    ]


def render_status(
    doc: StatusDocument, reasons: Mapping[str, DesiredReason] | None = None
) -> RenderableType:
    """The whole status: head, warnings, hosts, plan, workloads, prefetch, desired replicas,
    mode, unmet replicas, commands, failures and safety holds (`reasons`: desired replicas
    per model and why, from the dashboard's view)."""
    parts: list[RenderableType] = [_head(doc)]
    parts += [Text(f"warning [{w.code}]: {w.message}", style="yellow") for w in doc.warnings]
    parts += _hosts(doc)
    parts += _plan(doc.plan, doc.plan_generation)
    parts += workload_parts(doc.workloads)
    parts += prefetch_parts(doc.prefetch)
    parts += _reasons(reasons or {})
    parts += _mode(doc)
    parts += _unmet(doc)
    parts += _commands(doc)
    parts += _failures(doc)
    parts += _safety(doc)
    return Group(*parts)
