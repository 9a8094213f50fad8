"""Operator drains of hosts: `PUT|DELETE /allocator/hosts/{host_id}/drain` and the dashboard.

A drained host keeps its registration and its engines, but the controller plans it as
`draining`: it takes no new work and its replicas are replaced elsewhere before they are drained
(make-before-break, the same path as a node's own local drain). The set is durable (the state
document's `host_drains`), so a controller restart keeps a host out of service until an operator
undrains it. A node's own local override (`grid allocator node drain`) is separate and local.
"""

from __future__ import annotations

from typing import Any

from grid.fleet import GridError
from grid.runtime.controller.core import Controller

MAX_REASON_CHARS = 200


def set_host_drain(ctl: Controller, host_id: str, reason: str | None, now: float) -> dict[str, Any]:
    """Drain `host_id` (reason given) or undrain it (None). Idempotent; the change is saved
    before it takes effect and bumps the safety revision (lifecycle changed)."""
    with ctl.lock:
        drains = ctl.state.host_drains
        if reason is not None and host_id not in ctl.registry.hosts and host_id not in drains:
            raise GridError(
                "unknown_host",
                f"no registered host named {host_id!r}",
                fix="drain a host that `grid allocator status` lists",
                next_command="grid allocator status",
                details={"http_status": 404},
            )
        previous = drains.get(host_id)
        if reason is None:
            drains.pop(host_id, None)
        else:
            drains[host_id] = reason.strip()[:MAX_REASON_CHARS] or "operator drain"
        try:
            ctl.save(now)
        except GridError:
            if previous is None:
                drains.pop(host_id, None)
            else:
                drains[host_id] = previous
            raise
        if previous != drains.get(host_id):
            ctl.state.revisions.bump(safety=True)
        return {"host_id": host_id, "drained": host_id in drains, "reason": drains.get(host_id)}
