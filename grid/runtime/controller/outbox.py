"""Command delivery to one host (the heartbeat's `request_commands` path).

Order of a delivery, all under the controller lock (the command-selection lock); the
controller checks steps 1 and 2 (`Controller.poll_commands`), the `Outbox` does 3 and 4:
1. automatic mode, durable state and a valid (renewed) mutation lease, or nothing is sent;
2. availability commands need a successful tick at or beyond the poll's causal revision;
   drains and unloads also need that tick's safety revision to equal the current one and no
   membership grace;
3. the chosen commands are stamped with (term, controller id, lease expiry) and marked
   delivered, and the marker is written durably before anything is returned;
4. the destructive batch is revalidated against the fresh registry (`delivery.py`: the gates
   marked for delivery; each child route's lease is the heartbeat whose envelope last listed
   it, `HostEntry.routes_received_at`, which a heartbeat without an envelope does not renew); a held
   batch has its markers durably removed again, or, if that compensating write fails, keeps
   them (conservatively: the command may be running) and says so in status. A queued evict is
   revalidated the same way against the latest heartbeat (`revalidate_evictions`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from grid.fleet import DESTRUCTIVE_KINDS, GridError, ModelProfile, Plan, Policy
from grid.runtime.controller.commands import CommandBook, Marker
from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.delivery import (
    Hold,
    RouteLease,
    revalidate_destructive,
    revalidate_evictions,
)
from grid.runtime.controller.lease import LeaseRecord
from grid.runtime.controller.live_state import Warnings
from grid.runtime.controller.registry import Registry
from grid.runtime.controller.reports import Counters


@dataclass(frozen=True)
class Authority:
    """What steps 1 and 2 established for this poll: the lease, and whether drains may go."""

    lease: LeaseRecord
    destructive_ok: bool


@dataclass(frozen=True)
class PlanFacts:
    """The facts of the last successful tick that the destructive revalidation reads."""

    plan: Plan | None
    profiles: Mapping[str, ModelProfile]
    retired: set[str]
    policy: Policy


class Outbox:
    """Steps 3 and 4: choose, stamp, durably mark, revalidate and wire one host's commands."""

    def __init__(
        self,
        book: CommandBook,
        registry: Registry,
        counters: Counters,
        warnings: Warnings,
        save: Callable[[float], None],
    ) -> None:
        self.book = book
        self.registry = registry
        self.counters = counters
        self.warnings = warnings
        self.save = save
        self.safety_error: dict[str, Any] | None = None

    def deliver(
        self,
        host_id: str,
        authority: Authority,
        facts: PlanFacts,
        config: ControllerConfig,
        now: float,
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """(wire commands sent, action ids held at revalidation)."""
        book, lease = self.book, authority.lease
        candidates = [
            c
            for c in book.deliverable(host_id, now)
            if authority.destructive_ok or c.action.kind not in DESTRUCTIVE_KINDS
        ]
        if not candidates:
            return [], []
        markers = book.mark_delivered(
            candidates,
            term=lease.term,
            controller_id=lease.controller_id,
            expires_at=lease.expires_at,
            now=now,
        )
        try:
            self.save(now)
        except GridError as err:
            book.unmark(markers)
            self.warnings.warn("delivery_not_durable", f"commands were held: {err.message}")
            return [], []
        hosts = self.registry.hosts
        ttl = config.node_ttl_s
        holds = revalidate_destructive(
            candidates,
            plan=facts.plan,
            hosts={h: e.host for h, e in hosts.items()},
            leases={h: RouteLease(e.received_at, ttl) for h, e in hosts.items()},
            route_leases={
                (h, r.model_id): RouteLease(e.routes_received_at, ttl)
                for h, e in hosts.items()
                for r in e.routes
            },
            profiles=facts.profiles,
            retired=facts.retired,
            now=now,
            stale_s=facts.policy.heartbeat_stale_s,
            margin_s=config.destructive_margin_s,
        )
        holds += revalidate_evictions(
            candidates,
            plan=facts.plan,
            hosts={h: e.host for h, e in hosts.items()},
            leases={h: RouteLease(e.received_at, ttl) for h, e in hosts.items()},
            profiles=facts.profiles,
            now=now,
            stale_s=facts.policy.heartbeat_stale_s,
        )
        held_ids = {i for h in holds for i in h.action_ids}
        if held_ids:
            self.compensate([m for m in markers if m.action_id in held_ids], holds, now)
        sent = [c for c in candidates if c.action.action_id not in held_ids]
        self.counters.delivered += len(sent)
        wired = [
            book.commands[c.action.action_id]
            .wire(
                created_at=book.records[c.action.action_id].created_at,
                profile=facts.profiles.get(c.action.model_id),
            )
            .model_dump(mode="json")
            for c in sent
        ]
        return wired, sorted(held_ids)

    def compensate(self, markers: list[Marker], holds: list[Hold], now: float) -> None:
        """Durably remove the markers of a held destructive batch (or keep them, and say so)."""
        book = self.book
        kept = [(m, book.records[m.action_id], book.commands[m.action_id]) for m in markers]
        book.unmark(markers)
        reasons = "; ".join(f"{h.model_id}: {h.reason}" for h in holds)
        ids = [m.action_id for m in markers]
        try:
            self.save(now)
        except GridError as err:
            for marker, record, command in kept:  # conservative: the marker stays
                book.records[marker.action_id] = record
                book.commands[marker.action_id] = command
            self.safety_error = {
                "at": now,
                "action_ids": ids,
                "message": f"destructive commands were held ({reasons}) but their delivery "
                f"markers could not be removed: {err.message}",
            }
            return
        self.safety_error = {
            "at": now,
            "action_ids": ids,
            "message": f"destructive commands held at delivery: {reasons}",
        }
