"""Rich rendering of the predictive cache: the cache-only advisories with their learned workflow
edge and confidence, the exact evictions, predictions that were not staged (with the reason),
and the predictive entries the hosts report. `grid allocator status` renders the status
document's `prefetch` section; `grid plan` renders a plan's `prefetch` report."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.text import Text

from grid.cli.render_portfolio import _table


def _lead(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0f} s"


def prefetch_parts(section: dict[str, Any] | None) -> list[RenderableType]:
    """Tables for a `prefetch` section or report (nothing when there is nothing to say)."""
    if not section:
        return []
    parts: list[RenderableType] = []
    advisories = section.get("advisories") or []
    if advisories:
        table = _table(
            "Predictive cache advisories (download and verify only: no warm, no memory)",
            ["model", "host", "workflow edge", "confidence", "MB", "lead", "value s/MB", "why"],
        )
        for a in advisories:
            table.add_row(
                a["model_id"],
                a["host_id"],
                a["edge"],
                f"{a['confidence']:.2f}",
                str(a["size_mb"]),
                _lead(a.get("lead_s")),
                f"{a['value_per_mb']:.3g}",
                a.get("reason", ""),
            )
        parts.append(table)
    evictions = section.get("evictions") or []
    if evictions:
        table = _table(
            "Predictive cache evictions (exact SHA)", ["model", "host", "sha256", "MB", "why"]
        )
        for e in evictions:
            table.add_row(
                e["model_id"], e["host_id"], e["sha256"][:12], str(e["size_mb"]), e["reason"]
            )
        parts.append(table)
    skipped = section.get("skipped") or []
    if skipped:
        table = _table("Predictions not staged", ["model", "host", "edge", "code", "why"])
        for s in skipped:
            table.add_row(
                s["model_id"],
                s.get("host_id") or "-",
                s.get("edge") or "-",
                s["code"],
                s["message"],
            )
        parts.append(table)
    cache = section.get("cache") or []
    if cache:
        table = _table(
            "Predictive downloads on hosts", ["host", "model", "sha256", "MB", "age", "warmed"]
        )
        for c in cache:
            table.add_row(
                c["host_id"],
                c["model_id"],
                c["sha256"][:12],
                str(c["size_mb"]),
                f"{c['age_s'] / 60:.0f} min",
                "yes" if c["warmed"] else "no",
            )
        parts.append(table)
    if parts and "reserve_mb" in section:
        parts.append(Text(f"predictive disk reserve: {section['reserve_mb']} MB", style="dim"))
    return parts
