"""Command delivery to one host (the heartbeat's `request_commands` path).

Order of a delivery, all under the controller lock (the command-selection lock):
1. automatic mode, durable state and a valid (renewed) mutation lease, or nothing is sent;
2. availability commands need a successful tick at or beyond the poll's causal revision;
   drains and unloads also need that tick's safety revision to equal the current one and no
   membership grace;
3. the chosen commands are stamped with (term, controller id, lease expiry) and marked
   delivered, and the marker is written durably before anything is returned;
4. the destructive batch is revalidated against the fresh registry (`delivery.py`); a held
   batch has its markers durably removed again, or, if that compensating write fails, keeps
   them (conservatively: the command may be running) and says so in status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grid.fleet.actions import DESTRUCTIVE_KINDS, Mode
from grid.fleet.errors import GridError
from grid.runtime.controller.commands import Marker
from grid.runtime.controller.delivery import Hold, RouteLease, revalidate_destructive
from grid.runtime.controller.reports import Delivery

if TYPE_CHECKING:
    from grid.runtime.controller.core import Controller


def poll_commands(ctl: Controller, host_id: str, poll_revision: int, now: float) -> Delivery:
    with ctl.lock:
        out = Delivery(commands=[], mode=ctl.mode, lease_ttl_s=ctl.lease_ttl(now))
        if ctl.mode is not Mode.AUTOMATIC or not ctl.store.durable:
            return out
        if ctl.success_revision < poll_revision or not ctl.ensure_lease(now):
            return out
        lease = ctl.lease.held if ctl.lease is not None else None
        if lease is None:
            return out
        out.lease_ttl_s = ctl.lease_ttl(now)
        destructive_ok = ctl.success_safety_revision == ctl.safety_revision and not ctl.in_grace(
            now
        )
        candidates = [
            c
            for c in ctl.book.deliverable(host_id, now)
            if destructive_ok or c.action.kind not in DESTRUCTIVE_KINDS
        ]
        if not candidates:
            return out
        markers = ctl.book.mark_delivered(
            candidates,
            term=lease.term,
            controller_id=lease.controller_id,
            expires_at=lease.expires_at,
            now=now,
        )
        try:
            ctl.save(now)
        except GridError as err:
            ctl.book.unmark(markers)
            ctl.warn("delivery_not_durable", f"commands were held: {err.message}")
            return out
        holds = revalidate_destructive(
            candidates,
            plan=ctl.last_plan,
            hosts={h: e.host for h, e in ctl.registry.hosts.items()},
            leases={
                h: RouteLease(e.received_at, ctl.config.node_ttl_s)
                for h, e in ctl.registry.hosts.items()
            },
            retired=set(ctl.tombstones),
            now=now,
            stale_s=ctl.policy.heartbeat_stale_s,
            margin_s=ctl.config.destructive_margin_s,
        )
        held_ids = {i for h in holds for i in h.action_ids}
        if held_ids:
            compensate(ctl, [m for m in markers if m.action_id in held_ids], holds, now)
            out.held = sorted(held_ids)
        sent = [c for c in candidates if c.action.action_id not in held_ids]
        ctl.counters.delivered += len(sent)
        out.commands = [
            ctl.book.commands[c.action.action_id].wire(
                created_at=ctl.book.records[c.action.action_id].created_at,
                profile=ctl.profiles.get(c.action.model_id),
            )
            for c in sent
        ]
        return out


def compensate(ctl: Controller, markers: list[Marker], holds: list[Hold], now: float) -> None:
    """Durably remove the markers of a held destructive batch (or keep them, and say so)."""
    kept = [(m, ctl.book.records[m.action_id], ctl.book.commands[m.action_id]) for m in markers]
    ctl.book.unmark(markers)
    reasons = "; ".join(f"{h.model_id}: {h.reason}" for h in holds)
    ids = [m.action_id for m in markers]
    try:
        ctl.save(now)
    except GridError as err:
        for marker, record, command in kept:  # conservative: the marker stays
            ctl.book.records[marker.action_id] = record
            ctl.book.commands[marker.action_id] = command
        ctl.delivery_safety_error = {
            "at": now,
            "action_ids": ids,
            "message": f"destructive commands were held ({reasons}) but their delivery "
            f"markers could not be removed: {err.message}",
        }
        return
    ctl.delivery_safety_error = {
        "at": now,
        "action_ids": ids,
        "message": f"destructive commands held at delivery: {reasons}",
    }
