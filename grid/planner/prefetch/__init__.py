"""The predictive artifact cache's planning (pure): cache-only advisories for workflow-only
predictions, exact evictions of unused predictive entries (expired or replaced), and the one
rule of what an eviction may touch. docs/predictive-cache.md gives the reading.

    advise.py    plan_prefetch(snapshot, plan) -> PrefetchReport | None
    context.py   the post-assignment disk ledger, future-compatible hosts, transfer value
    replace.py   the bounded replacement search and its proof
    protect.py   eviction_refusal: what an evict may never touch (planner, reconciler, delivery)
"""

from __future__ import annotations

from grid.fleet.models import FleetSnapshot, Plan
from grid.planner.prefetch.advise import SKIP_TEXT, plan_prefetch
from grid.planner.prefetch.context import counted_s, transfer_s, value_s
from grid.planner.prefetch.protect import (
    EVICT_CAPABILITY,
    REFUSAL_TEXT,
    eviction_refusal,
    predictive_entry,
)
from grid.planner.prefetch.replace import Victim, best_group, proven, search_pool


def attach_prefetch(snap: FleetSnapshot, plan: Plan) -> Plan:
    """The authoritative plan with its prefetch report (counterfactual plans never get one)."""
    plan.prefetch = plan_prefetch(snap, plan)
    return plan


__all__ = [
    "EVICT_CAPABILITY",
    "REFUSAL_TEXT",
    "SKIP_TEXT",
    "Victim",
    "attach_prefetch",
    "best_group",
    "counted_s",
    "eviction_refusal",
    "plan_prefetch",
    "predictive_entry",
    "proven",
    "search_pool",
    "transfer_s",
    "value_s",
]
