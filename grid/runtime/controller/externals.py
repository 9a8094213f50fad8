"""External endpoints in the controller: durable records, live health, their hosts and routes.

The records are operator configuration (saved with the controller state); the health is live
(a restarted controller probes again before it routes). Each endpoint is one host of the
snapshot named after it: `ownership: external`, no actuator (nothing is ever placed on it),
and one unmanaged READY residency per model its last good probe listed, so the planner counts
them as serving replicas and the reconciler never drains or unloads them. An unhealthy endpoint
is an `unhealthy` host: its replicas do not count and nothing routes to it.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from grid.fleet import (
    ExternalEndpoint,
    ExternalHealth,
    Host,
    HostState,
    Ownership,
    Residency,
    ResidencyState,
    WireResources,
)

if TYPE_CHECKING:
    from grid.runtime.controller.registry import HostEntry


@dataclass
class ExternalInventory:
    records: dict[str, ExternalEndpoint] = field(default_factory=dict)
    health: dict[str, ExternalHealth] = field(default_factory=dict)

    @classmethod
    def from_state(cls, saved: list[ExternalEndpoint]) -> ExternalInventory:
        return cls({e.name: e for e in saved})

    def to_state(self) -> list[ExternalEndpoint]:
        return [self.records[n] for n in sorted(self.records)]

    def health_of(self, name: str) -> ExternalHealth:
        return self.health.get(name) or ExternalHealth()

    def record_health(self, name: str, health: ExternalHealth) -> bool:
        """Keep a probe's (or a request's) verdict; True when healthiness or the served
        models changed (what the planner sees)."""
        if name not in self.records:
            return False
        before = self.health_of(name)
        if health.healthy and health.checked_at is None:
            health = health.model_copy(update={"checked_at": health.probed_at})
        if not health.healthy and before.checked_at is not None:
            health = health.model_copy(update={"checked_at": before.checked_at})
        self.health[name] = health
        return (before.healthy, before.served) != (health.healthy, health.served)

    def serving(self, name: str) -> list[str]:
        """The models of `name` that its last good probe listed (what is routed and counted)."""
        record, health = self.records[name], self.health_of(name)
        if not health.healthy:
            return []
        listed = set(health.served)
        return [m for m in record.models if m in listed]

    def host(self, name: str) -> Host:
        record, health = self.records[name], self.health_of(name)
        serving = self.serving(name)
        share = record.capacity_mb // max(1, len(serving)) if serving else 0
        return Host(
            host_id=name,
            state=HostState.ACCEPTING if health.healthy else HostState.UNHEALTHY,
            capacity_mb=record.capacity_mb,
            runtimes=[record.runtime],
            ownership=Ownership.EXTERNAL,
            actuator_capabilities=[],
            last_heartbeat=health.checked_at,
            routes=list(serving),
            residencies=[
                Residency(
                    model_id=m,
                    memory_mb=share,
                    state=ResidencyState.READY,
                    managed=False,
                    ownership=Ownership.EXTERNAL,
                    runtime=record.runtime,
                    active_requests=None,
                )
                for m in serving
            ],
        )

    def view(self) -> list[dict[str, object]]:
        """What status shows of each endpoint: its URL, health and the models routed."""
        return [
            {"name": n, "url": r.url, "runtime": r.runtime, "serving": self.serving(n),
             **self.health_of(n).model_dump(mode="json", include={"healthy", "code", "reason"})}
            for n, r in sorted(self.records.items())
        ]  # fmt: skip

    def hosts(self, taken: Container[str]) -> list[Host]:
        """The endpoints' hosts, skipping a name a registered node already uses."""
        return [self.host(n) for n in sorted(self.records) if n not in taken]


def external_entry(host: Host) -> HostEntry:
    """A registry-shaped entry for an external endpoint's host (the status table reads one)."""
    from grid.runtime.controller.registry import HostEntry

    seen = host.last_heartbeat or 0.0
    entry = HostEntry(host.host_id, host, WireResources(capacity_mb=0), None, seen, seen)
    entry.address = "external"
    return entry
