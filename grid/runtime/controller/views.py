"""The views the controller publishes to its readers (the HTTP layer, the proxy).

As Ray Serve's controller publishes `DeploymentTargetInfo` through its long-poll host, the
controller replaces an immutable view after each change it makes, while it holds its lock; a
reader takes the current one with a plain attribute read, never the lock, and a view it holds
keeps the facts it was built from however the fleet moves on.

- `RoutingTable`: the routes of every host and external endpoint as the router takes them
  (`grid.router.Route`), by host, with the private engine keys kept apart (never in a repr).
  A heartbeat, a reachability verdict or a revoked credential republishes that host's routes;
  an external endpoint's change republishes the endpoints; every tick republishes it whole.
  A relay route's `relay_connected` depends on the reader's tunnel at `now`, so the reader
  sets it (`routes(..., connected=)`).
- `PlanView`: what the current plan tells a reader without the lock (its portfolio, its unmet
  replicas), republished when a tick commits.
- `MetricsView`: the counters and gauges of GET /metrics, built on request under the lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from urllib.parse import urlsplit

from grid.fleet import HostState, Plan, PortfolioReport, ResidencyState, Route, base_url
from grid.runtime.controller.externals import ExternalInventory
from grid.runtime.controller.registry import HostEntry, Registry

_EMPTY: Mapping[str, HostRoutes] = MappingProxyType({})


def _never(_host_id: str) -> bool:
    return False


@dataclass(frozen=True)
class HostRoutes:
    """One host's routable engines as of its last report (nothing here changes later)."""

    host_id: str
    routes: tuple[Route, ...]
    engine_key: str | None = field(default=None, repr=False)  # None: a relay host or none


@dataclass(frozen=True)
class RoutingTable:
    version: int = 0
    hosts: Mapping[str, HostRoutes] = field(default_factory=lambda: _EMPTY)
    externals: tuple[Route, ...] = ()

    def routes(
        self, model_id: str | None = None, connected: Callable[[str], bool] = _never
    ) -> list[Route]:
        """The routes of `model_id` (of every model when None); a relay route is connected
        when `connected(host_id)` says its tunnel is up now."""
        out: list[Route] = []
        for host_id in sorted(self.hosts):
            for route in self.hosts[host_id].routes:
                if model_id is not None and route.model_id != model_id:
                    continue
                if route.transport == "relay":
                    route = replace(route, relay_connected=connected(host_id))
                out.append(route)
        out += [r for r in self.externals if model_id is None or r.model_id == model_id]
        return out

    def engine_key(self, host_id: str) -> str | None:
        """The private key of a host's `http` routes (for the upstream hop only)."""
        entry = self.hosts.get(host_id)
        return entry.engine_key if entry is not None else None

    def has_host(self, host_id: str) -> bool:
        return host_id in self.hosts


@dataclass(frozen=True)
class PlanView:
    generation: str = ""
    portfolio: PortfolioReport | None = None
    unmet_replicas: int = 0


@dataclass(frozen=True)
class MetricsView:
    """What GET /metrics exposes, read in one go under the controller lock."""

    mode: str
    ticks: int
    tick_failures: int
    tick_ms: tuple[float, ...]
    issued: int
    delivered: int
    acks: tuple[tuple[str, int], ...]
    observations_accepted: int
    observations_ignored: int
    hosts: int
    profiles: int
    open_commands: int
    unmet_replicas: int
    revisions: tuple[tuple[str, int], ...]  # (kind, value): dirty, processed, success, safety
    lease_ttl_s: float
    warnings: int


def unmet_replicas(plan: Plan | None) -> int:
    return sum(u.missing_replicas for u in plan.unsatisfied) if plan is not None else 0


def host_routes(entry: HostEntry) -> HostRoutes | None:
    """The router's routes of one registered host (None when none can be reached: a managed
    child is reachable only over the host's tunnel or with its engine key)."""
    relay = entry.allocator is not None and entry.allocator.relay
    if not relay and not entry.engine_key:
        return None
    residencies = {r.model_id: r for r in entry.host.residencies}
    routes: list[Route] = []
    for wire in entry.routes:
        residency = residencies.get(wire.model_id)
        if residency is None:
            continue  # a route the residency rows do not corroborate is not routable
        routes.append(
            Route(
                host_id=entry.host_id,
                model_id=wire.model_id,
                port=wire.port,
                host_state=entry.host.state,
                residency_state=residency.state,
                lease_at=entry.received_at,
                throttle_fraction=entry.host.throttle_fraction,
                concurrency=wire.concurrency,
                queued=wire.queued,
                artifact_sha256=residency.artifact_sha256,
                address=entry.address,
                transport="relay" if relay else "http",
            )
        )
    key = entry.engine_key if not relay else None
    return HostRoutes(entry.host_id, tuple(routes), key)


def external_routes(inventory: ExternalInventory, taken: Mapping[str, object]) -> list[Route]:
    """Routes of the healthy external endpoints (a name a registered node uses is skipped)."""
    out: list[Route] = []
    for name in sorted(inventory.records):
        if name in taken:
            continue
        record = inventory.records[name]
        parts = urlsplit(base_url(record.url))
        port = parts.port or (443 if parts.scheme == "https" else 80)
        health = inventory.health_of(name)
        for served in inventory.serving(name):
            out.append(
                Route(
                    host_id=name,
                    model_id=served,
                    port=port,
                    host_state=HostState.ACCEPTING,
                    residency_state=ResidencyState.READY,
                    lease_at=health.checked_at or 0.0,
                    address=parts.hostname or "",
                    transport="https" if parts.scheme == "https" else "http",
                    ca_file=record.ca_file,
                    external=True,
                    prefix=parts.path.rstrip("/"),
                )
            )
    return out


class ViewPublisher:
    """Holds the current views; the controller replaces them under its lock, readers read."""

    def __init__(self) -> None:
        self.routing = RoutingTable()
        self.plan = PlanView()
        self._version = 0
        self._guard = threading.Lock()  # a publisher of its own: views never go backwards

    def _next(self) -> int:
        self._version += 1
        return self._version

    def publish_host(self, registry: Registry, inventory: ExternalInventory, host_id: str) -> None:
        """Republish one host's routes (and the endpoints when membership changed)."""
        with self._guard:
            table = self.routing
            hosts = dict(table.hosts)
            entry = registry.hosts.get(host_id)
            built = host_routes(entry) if entry is not None else None
            if built is None:
                hosts.pop(host_id, None)
            else:
                hosts[host_id] = built
            externals = table.externals
            if host_id in inventory.records:  # a node took (or left) an endpoint's name
                externals = tuple(external_routes(inventory, registry.hosts))
            self.routing = RoutingTable(self._next(), MappingProxyType(hosts), externals)

    def publish_all(self, registry: Registry, inventory: ExternalInventory) -> None:
        with self._guard:
            hosts = {}
            for host_id in sorted(registry.hosts):
                built = host_routes(registry.hosts[host_id])
                if built is not None:
                    hosts[host_id] = built
            externals = tuple(external_routes(inventory, registry.hosts))
            self.routing = RoutingTable(self._next(), MappingProxyType(hosts), externals)

    def publish_externals(self, registry: Registry, inventory: ExternalInventory) -> None:
        with self._guard:
            table = self.routing
            externals = tuple(external_routes(inventory, registry.hosts))
            self.routing = RoutingTable(self._next(), table.hosts, externals)

    def publish_plan(self, plan: Plan | None, generation: object) -> None:
        unmet = unmet_replicas(plan)
        portfolio = plan.portfolio if plan is not None else None
        gen = str(generation) if generation is not None else ""
        self.plan = PlanView(gen, portfolio, unmet)
