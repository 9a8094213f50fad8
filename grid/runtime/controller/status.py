"""The allocator status document (GET /allocator/status, `grid allocator status --json`).

Presentation only: it reads the controller under its lock and decides nothing. It never holds a
secret: the controller has none (credentials live in the HTTP layer).
"""

from __future__ import annotations

from typing import Any

from grid.fleet.models import LIVE_STATES, FleetSnapshot
from grid.planner.eligibility import host_refusals
from grid.planner.problem import allocatable_mb
from grid.runtime.controller.core import Controller
from grid.runtime.reconcile.codes import withdrawal_text


def percentile(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _hosts(ctl: Controller, snap: FleetSnapshot, now: float) -> list[dict[str, Any]]:
    out = []
    for host in snap.hosts:
        entry = ctl.registry.hosts[host.host_id]
        live = [r for r in host.residencies if r.state in LIVE_STATES]
        out.append(
            {
                "host_id": host.host_id,
                "state": host.state.value,
                "ownership": host.ownership.value,
                "failure_domain": host.domain,
                "capacity_mb": host.capacity_mb,
                "reserved_mb": host.reserved_mb,
                "external_mb": host.external_mb,
                "allocatable_mb": allocatable_mb(host),
                "live_mb": sum(r.memory_mb for r in live),
                "max_models": host.max_models,
                "heartbeat_age_s": round(max(0.0, now - entry.received_at), 1),
                "refusals": host_refusals(host, snap),
                "problems": list(entry.problems),
                "node_records": len(entry.node_ids),
                "residencies": [
                    {
                        "model_id": r.model_id,
                        "state": r.state.value,
                        "memory_mb": r.memory_mb,
                        "ownership": r.owner.value,
                        "active_requests": r.active_requests,
                    }
                    for r in host.residencies
                ],
                "cached_models": list(host.cached_models),
            }
        )
    return out


def _forecasts(ctl: Controller, now: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for model_id, forecast in ctl.tracker.explain(now, ctl.profiles.values()).items():
        doc = forecast.entry.model_dump(mode="json")
        doc["peak_rpm"] = round(forecast.peak_rpm, 3)
        doc["active_buckets"] = forecast.active_buckets
        if forecast.inferred_from is not None:
            rel = forecast.inferred_from
            doc["inferred_from"] = {
                "source": rel.source,
                "kind": rel.kind.value,
                "support": rel.support,
                "share": round(rel.share, 3),
            }
            doc["capped"] = forecast.capped
        out[model_id] = doc
    return out


def _pending(ctl: Controller) -> list[dict[str, Any]]:
    rows = []
    for record, command in ctl.book.pending_commands():
        row = command.wire(created_at=record.created_at, profile=ctl.profiles.get(record.model_id))
        row["status"] = record.status.value
        row["delivered_at"] = record.delivered_at
        row["priority"] = record.priority
        row["urgency"] = record.urgency.value
        rows.append(row)
    rows.sort(key=lambda r: (r["host_id"], r["created_at"], r["action_id"]))
    return rows


def status_document(ctl: Controller, now: float, *, history: int | None = None) -> dict[str, Any]:
    with ctl.lock:
        limit = ctl.config.status_history if history is None else history
        plan = ctl.last_plan
        result = ctl.last_result
        lease = ctl.lease.held if ctl.lease is not None else None
        tick_ms = list(ctl.counters.tick_ms)
        reconciliation: dict[str, Any] | None = None
        if result is not None:
            reconciliation = result.model_dump(mode="json")
            reconciliation["deferred"] = [d.model_dump(mode="json") for d in ctl.last_deferred]
        records = sorted(ctl.book.history(), key=lambda r: (r.created_at, r.action_id))
        snap = ctl.snapshot(now)
        grace_until = (
            ctl.grace_anchor + ctl.config.membership_grace_s
            if ctl.grace_anchor is not None
            else None
        )
        return {
            "schema_version": 1,
            "now": now,
            "controller_id": ctl.controller_id,
            "mode": ctl.mode.value,
            "durable": ctl.store.durable,
            "state_path": ctl.store.location,
            "warnings": [{"code": c, "message": m} for c, m in sorted(ctl.warnings.items())],
            "lease": {
                "held": lease is not None and lease.expires_at > now,
                "term": lease.term if lease is not None else None,
                "expires_at": lease.expires_at if lease is not None else None,
                "ttl_s": round(ctl.lease_ttl(now), 2),
                "max_term": ctl.max_term,
            },
            "revisions": {
                "dirty": ctl.dirty_revision,
                "processed": ctl.processed_revision,
                "success": ctl.success_revision,
                "safety": ctl.safety_revision,
                "success_safety": ctl.success_safety_revision,
            },
            "grace": {"active": ctl.in_grace(now), "until": grace_until, "restored": ctl.restored},
            "last_tick": None if ctl.last_tick is None else vars(ctl.last_tick).copy(),
            "last_success_at": ctl.last_success_at,
            "tick_latency_ms": {
                "p50": percentile(tick_ms, 0.5),
                "p95": percentile(tick_ms, 0.95),
                "samples": len(tick_ms),
            },
            "hosts": _hosts(ctl, snap, now),
            "snapshots": [h.model_dump(mode="json") for h in snap.hosts],
            "profiles": [ctl.profiles[m].model_dump(mode="json") for m in sorted(ctl.profiles)],
            "tombstones": [
                ctl.tombstones[m].model_dump(mode="json") for m in sorted(ctl.tombstones)
            ],
            "forecasts": _forecasts(ctl, now),
            "demand": {"ignored": ctl.tracker.ignored, "series": ctl.tracker.footprint().series},
            "plan": None if plan is None else plan.model_dump(mode="json"),
            "plan_generation": str(ctl.last_generation) if ctl.last_generation else None,
            "unmet": [] if plan is None else [u.model_dump(mode="json") for u in plan.unsatisfied],
            "reconciliation": reconciliation,
            "proposed_actions": [a.model_dump(mode="json") for a in ctl.proposed],
            "pending_commands": _pending(ctl),
            "delivered_pending_action_ids": ctl.book.delivered_open_ids(),
            "withdrawn_destructive": [
                {
                    **r.model_dump(mode="json"),
                    "message": withdrawal_text("unsafe_destructive_batch"),
                }
                for r in ctl.book.withdrawn_destructive()
            ],
            "delivery_safety_error": ctl.delivery_safety_error,
            "history": [r.model_dump(mode="json") for r in records[-limit:]] if limit else [],
            "timings": ctl.timings.summary(now),
            "counters": {
                "ticks": ctl.counters.ticks,
                "tick_failures": ctl.counters.tick_failures,
                "commands_issued": ctl.counters.issued,
                "commands_delivered": ctl.counters.delivered,
                "acknowledgements": dict(sorted(ctl.counters.acks.items())),
                "observations_accepted": ctl.counters.observations_accepted,
                "observations_ignored": ctl.counters.observations_ignored,
            },
        }
