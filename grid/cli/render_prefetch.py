"""Rich rendering of the predictive cache: the cache-only advisories with their learned workflow
edge and confidence, the exact evictions, predictions that were not staged (with the reason),
and the predictive entries the hosts report. `grid allocator status` renders the status
document's `prefetch` section; `grid plan` renders a plan's `prefetch` report."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from grid.cli.render_portfolio import _table
from grid.fleet import PrefetchReport
from grid.fleet.operator import PrefetchSection


def _lead(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0f} s"


def prefetch_parts(section: PrefetchSection | PrefetchReport | None) -> list[RenderableType]:
    """Tables for a `prefetch` section or report (nothing when there is nothing to say)."""
    if section is None:
        return []
    parts: list[RenderableType] = []
    if section.advisories:
        table = _table(
            "Predictive cache advisories (download and verify only: no warm, no memory)",
            ["model", "host", "workflow edge", "confidence", "MB", "lead", "value s/MB", "why"],
        )
        for a in section.advisories:
            table.add_row(
                a.model_id,
                a.host_id,
                a.edge,
                f"{a.confidence:.2f}",
                str(a.size_mb),
                _lead(a.lead_s),
                f"{a.value_per_mb:.3g}",
                a.reason,
            )
        parts.append(table)
    if section.evictions:
        table = _table(
            "Predictive cache evictions (exact SHA)", ["model", "host", "sha256", "MB", "why"]
        )
        for e in section.evictions:
            table.add_row(e.model_id, e.host_id, e.sha256[:12], str(e.size_mb), e.reason)
        parts.append(table)
    if section.skipped:
        table = _table("Predictions not staged", ["model", "host", "edge", "code", "why"])
        for s in section.skipped:
            table.add_row(s.model_id, s.host_id or "-", s.edge or "-", s.code, s.message)
        parts.append(table)
    cache = section.cache if isinstance(section, PrefetchSection) else []
    if cache:
        table = _table(
            "Predictive downloads on hosts", ["host", "model", "sha256", "MB", "age", "warmed"]
        )
        for c in cache:
            table.add_row(
                c.host_id,
                c.model_id,
                c.sha256[:12],
                str(c.size_mb),
                f"{c.age_s / 60:.0f} min",
                "yes" if c.warmed else "no",
            )
        parts.append(table)
    if parts:
        parts.append(Text(f"predictive disk reserve: {section.reserve_mb} MB", style="dim"))
    return parts
