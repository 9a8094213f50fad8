"""The dashboard's view document (`GET /ui/view.json`): the status document, shaped for the page.

Presentation only: `fleet_view` reads a status document (grid/runtime/controller/status.py),
the planner's targets for the same snapshot and the operator drains, and decides nothing.
Memory per host is split into four parts that add up to its capacity:
    used      live residencies (loading, warming, ready, draining, failed)
    reserved  the host's reserve, external use and what throttling withholds
    headroom  policy.memory_headroom_fraction x allocatable (new loads keep it free)
    free      allocatable - used - headroom (never negative)
It holds no secret: the status document has none, and nothing else is read.
"""

from __future__ import annotations

import math
from typing import Any

from grid.planner import Target

MAX_HISTORY = 200


def _memory(host: dict[str, Any], headroom_fraction: float) -> dict[str, int]:
    capacity = int(host.get("capacity_mb", 0))
    allocatable = int(host.get("allocatable_mb", 0))
    used = int(host.get("live_mb", 0))
    headroom = math.ceil(headroom_fraction * allocatable)
    free = max(0, allocatable - used - headroom)
    reserved = max(0, capacity - allocatable)
    return {
        "capacity": capacity,
        "allocatable": allocatable,
        "used": used,
        "reserved": reserved,
        "headroom": headroom,
        "free": free,
    }


def _host(host: dict[str, Any], drains: dict[str, str], headroom_fraction: float) -> dict[str, Any]:
    live = [
        r for r in host.get("residencies", []) if r.get("state") != "cached"
    ]  # cached weights hold no memory and no slot
    refusals = list(host.get("refusals", []))
    return {
        "host_id": host["host_id"],
        "state": host.get("state", ""),
        "ownership": host.get("ownership", ""),
        "domain": host.get("failure_domain", ""),
        "stale": "heartbeat_stale" in refusals,
        "refusals": refusals,
        "problems": list(host.get("problems", []))[:5],
        "drained": drains.get(host["host_id"]),
        "heartbeat_age_s": host.get("heartbeat_age_s"),
        "memory": _memory(host, headroom_fraction),
        "slots": {"used": len(live), "max": int(host.get("max_models", 0))},
        "residencies": [
            {"model_id": r["model_id"], "state": r["state"], "memory_mb": r.get("memory_mb", 0)}
            for r in host.get("residencies", [])
        ],
    }


def desired_reason(
    target: Target | None,
    forecast: dict[str, Any] | None,
    profile: dict[str, Any],
    *,
    demand_headroom: float = 0.2,
) -> str:
    """Why the model wants its replica count: the targets' reason with the numbers behind it
    (for demand, the terms of targets.py's count: load over one replica's share)."""
    bounds = f"bounds {profile.get('min_replicas', 0)}–{profile.get('max_replicas', 0)}"
    if target is None:
        return bounds
    fc = forecast or {}
    offered, queue = float(fc.get("offered_concurrency", 0)), float(fc.get("queue_depth", 0))
    load = offered * (1 + demand_headroom) + queue
    share = float(profile.get("replica_concurrency", 1.0)) * float(
        profile.get("target_utilization", 1.0)
    )
    if load > 0 and share > 0:
        count = math.ceil(load / share - 1e-9)
        demand = (
            f"demand: offered {offered:.2f} × (1 + headroom {demand_headroom:.0%}) + queue "
            f"{queue:g} = {load:.2f} over {share:.2f} per replica → {count}"
        )
    else:
        demand = f"demand: {fc.get('rpm', 0):.1f} rpm → 1"
    why = {
        "baseline": f"baseline: min_replicas {profile.get('min_replicas', 0)}, no demand",
        "override": "override: desired_replicas set in the demand",
        "demand": demand,
        "pressure": (
            f"pressure: queue {fc.get('queue_depth', 0)}, p95 {fc.get('p95_ms', 0):.0f} ms, "
            f"errors {fc.get('error_rate', 0):.0%}: one replica beyond the ready ones"
        ),
        "cooldown": "cooldown: replicas used recently stay until the scale-down cooldown",
    }.get(target.reason, target.reason)
    floor = max(int(profile.get("min_replicas", 0)), target.pins)
    if target.reason != "baseline" and target.desired <= floor:
        why = f"floor: min_replicas {profile.get('min_replicas', 0)} (the {why})"
    if target.pins:
        why += f"; {target.pins} pinned"
    return f"{why}; {bounds} → {target.desired}"


def _models(
    status: dict[str, Any],
    targets: dict[str, Target],
    hosts: list[dict[str, Any]],
    demand_headroom: float,
) -> list[dict[str, Any]]:
    plan = status.get("plan") or {}
    desired = plan.get("desired_replicas", {})
    planned: dict[str, int] = {}
    for a in plan.get("assignments", []):
        planned[a["model_id"]] = planned.get(a["model_id"], 0) + 1
    ready: dict[str, int] = {}
    for host in hosts:
        for r in host["residencies"]:
            if r["state"] == "ready":
                ready[r["model_id"]] = ready.get(r["model_id"], 0) + 1
    unmet: dict[str, list[dict[str, Any]]] = {}
    for u in status.get("unmet", []):
        unmet.setdefault(u["model_id"], []).append(
            {
                "code": u.get("code", ""),
                "missing": u.get("missing_replicas", 0),
                "message": u.get("message", ""),
                "binding": [
                    {
                        "constraint": b.get("constraint", ""),
                        "host_id": b.get("host_id"),
                        "detail": b.get("detail", ""),
                    }
                    for b in u.get("binding", [])[:8]
                ],
                "would_fit_if": u.get("would_fit_if", ""),
            }
        )
    forecasts = status.get("forecasts", {})
    out = []
    for profile in status.get("profiles", []):
        model_id = profile["model_id"]
        target = targets.get(model_id)
        out.append(
            {
                "model_id": model_id,
                "priority": profile.get("priority", 0),
                "memory_mb": profile.get("memory_mb", 0),
                "min_replicas": profile.get("min_replicas", 0),
                "max_replicas": profile.get("max_replicas", 0),
                "chat_template": profile.get("chat_template"),
                "desired": desired.get(model_id, target.desired if target else 0),
                "planned": planned.get(model_id, 0),
                "ready": ready.get(model_id, 0),
                "reason": desired_reason(
                    target, forecasts.get(model_id), profile, demand_headroom=demand_headroom
                ),
                "unmet": unmet.get(model_id, []),
            }
        )
    return out


def _plan(status: dict[str, Any]) -> dict[str, Any] | None:
    plan = status.get("plan")
    if plan is None:
        return None
    solver = plan.get("solver", {})
    levels = []
    for lv in solver.get("objective", []):
        value, bound = float(lv.get("value", 0)), float(lv.get("bound", 0))
        gap = abs(bound - value) / abs(bound) if bound else (0.0 if value == bound else 1.0)
        levels.append({"level": lv.get("level", ""), "value": value, "bound": bound, "gap": gap})
    return {
        "engine": solver.get("engine", ""),
        "status": solver.get("status", ""),
        "wall_ms": solver.get("wall_ms", 0.0),
        "message": solver.get("message", ""),
        "generation": status.get("plan_generation"),
        "levels": levels,
        "preemptions": plan.get("preemptions", []),
    }


def _history(status: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [
        {
            "at": r.get("finished_at") or r.get("withdrawn_at") or r.get("created_at"),
            "kind": r.get("kind", ""),
            "host_id": r.get("host_id", ""),
            "model_id": r.get("model_id", ""),
            "status": r.get("status", ""),
            "reason": r.get("reason", ""),
            "outcome": r.get("outcome", ""),
        }
        for r in status.get("history", [])
    ]
    rows.sort(key=lambda r: r["at"] or 0.0, reverse=True)
    return rows[:MAX_HISTORY]


def fleet_view(
    status: dict[str, Any],
    targets: dict[str, Target],
    drains: dict[str, str],
    *,
    headroom_fraction: float,
    demand_headroom: float = 0.2,
) -> dict[str, Any]:
    """The view document the page renders (module docstring)."""
    hosts = [_host(h, drains, headroom_fraction) for h in status.get("hosts", [])]
    portfolio = (status.get("workloads") or {}).get("portfolio") or {}
    return {
        "schema_version": 1,
        "now": status.get("now"),
        "mode": status.get("mode"),
        "controller_id": status.get("controller_id"),
        "warnings": status.get("warnings", []),
        "hosts": hosts,
        "models": _models(status, targets, hosts, demand_headroom),
        "plan": _plan(status),
        "workloads": list(portfolio.get("admission", [])),
        "pending": len(status.get("pending_commands", [])),
        "history": _history(status),
    }
