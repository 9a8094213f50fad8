"""The status document's `prefetch` section: the predictive cache as the controller sees it.

`predictions` are this snapshot's (each with its learned edge and confidence), the advisories,
evictions and skipped predictions come from the last authoritative plan (each advisory names
its workflow edge and confidence), and `cache` lists every predictive entry the hosts report
(age, size, whether it was ever warmed). Presentation only.
"""

from __future__ import annotations

from typing import Any

from grid.fleet.models import FleetSnapshot, Plan


def prefetch_section(plan: Plan | None, snap: FleetSnapshot, now: float) -> dict[str, Any]:
    report = plan.prefetch if plan is not None else None
    return {
        "enabled": snap.policy.prefetch.enabled,
        "reserve_mb": snap.policy.predictive_disk_reserve_mb,
        "predictions": [
            {**p.model_dump(mode="json"), "edge": p.edge}
            for p in sorted(snap.predictions, key=lambda p: (p.model_id, p.edge))
        ],
        "advisories": []
        if report is None
        else [a.model_dump(mode="json") for a in report.advisories],
        "evictions": []
        if report is None
        else [e.model_dump(mode="json") for e in report.evictions],
        "skipped": [] if report is None else [s.model_dump(mode="json") for s in report.skipped],
        "cache": [
            {
                "host_id": h.host_id,
                "model_id": e.model_id,
                "sha256": e.sha256,
                "size_mb": e.size_mb,
                "age_s": round(max(0.0, now - e.cached_at), 1),
                "warmed": e.warmed,
            }
            for h in sorted(snap.hosts, key=lambda h: h.host_id)
            for e in h.predictive_cache
        ],
    }
