"""The status document's `prefetch` section: the predictive cache as the controller sees it.

`predictions` are this snapshot's (each with its learned edge and confidence), the advisories,
evictions and skipped predictions come from the last authoritative plan (each advisory names
its workflow edge and confidence), and `cache` lists every predictive entry the hosts report
(age, size, whether it was ever warmed). Presentation only.
"""

from __future__ import annotations

from grid.fleet import FleetSnapshot, Plan
from grid.fleet.operator import CacheRow, PredictionRow, PrefetchSection


def prefetch_section(plan: Plan | None, snap: FleetSnapshot, now: float) -> PrefetchSection:
    report = plan.prefetch if plan is not None else None
    return PrefetchSection(
        enabled=snap.policy.prefetch.enabled,
        reserve_mb=snap.policy.predictive_disk_reserve_mb,
        predictions=[
            PredictionRow(**dict(p), edge=p.edge)
            for p in sorted(snap.predictions, key=lambda p: (p.model_id, p.edge))
        ],
        advisories=[] if report is None else list(report.advisories),
        evictions=[] if report is None else list(report.evictions),
        skipped=[] if report is None else list(report.skipped),
        cache=[
            CacheRow(
                host_id=h.host_id,
                model_id=e.model_id,
                sha256=e.sha256,
                size_mb=e.size_mb,
                age_s=round(max(0.0, now - e.cached_at), 1),
                warmed=e.warmed,
            )
            for h in sorted(snap.hosts, key=lambda h: h.host_id)
            for e in h.predictive_cache
        ],
    )
