"""The OpenAI proxy's in-memory state: in-flight counters, circuit breakers, measurements.

It turns the controller registry into router candidates (`grid.router.Route`) under the
controller lock, asks the pure router for one engine, and folds each outcome back. Nothing here
is persisted: a restarted server starts with closed circuits and no measurements. The private
engine key is read from the registry only to build the upstream hop and is never returned in
anything a client can see.
"""

from __future__ import annotations

import ssl
import threading
from collections import Counter
from dataclasses import dataclass, field, replace

from grid.api.externals import external_dial, external_routes
from grid.fleet.workloads import PortfolioReport
from grid.router import (
    AffinityKey,
    BreakerOutcome,
    BreakerPolicy,
    CircuitBreakers,
    Measurements,
    Route,
    RouteRefusal,
    choose_route,
    classify_status,
    route_refusal,
)
from grid.runtime.controller.core import Controller

LISTED_REFUSALS = frozenset({None, "at_capacity"})  # still an admitted ready model


@dataclass(frozen=True)
class Preparing:
    """Why an automatic request has no ready model: what the current plan prepares for it."""

    workload: str
    model_id: str | None  # the model the portfolio chose (or its best candidate), if any
    state: str  # the admission state (grid/fleet/workloads.py AdmissionState)
    reason: str  # starts with a stable code
    route_refusal: str | None = None  # the router's code when the mapped model has no route

    def to_dict(self) -> dict[str, object]:
        return {
            "workload": self.workload,
            "model_id": self.model_id,
            "state": self.state,
            "reason": self.reason,
            "route_refusal": self.route_refusal,
        }


def current_portfolio(ctl: Controller) -> PortfolioReport | None:
    """The current plan's portfolio (None before any plan has one), read under the lock."""
    with ctl.lock:
        plan = ctl.last_plan
        return plan.portfolio if plan is not None else None


def portfolio_choice(ctl: Controller, workload: str) -> tuple[str | None, Preparing]:
    """The model the current plan's portfolio maps `workload` to (None when unmapped) and the
    admission row that explains it, read under the controller lock."""
    report = current_portfolio(ctl)
    if report is None:
        reason = (
            "awaiting_plan: the current plan has no portfolio yet (it forms once "
            "automatic requests are observed)"
        )
        return None, Preparing(workload, None, "awaiting-plan", reason)
    mapped = report.mapping.get(workload)
    row = next((r for r in report.admission if r.workload == workload), None)
    if row is None:
        reason = f"awaiting_plan: no admission row for workload {workload!r} yet"
        return mapped, Preparing(workload, mapped, "awaiting-plan", reason)
    return mapped, Preparing(workload, row.model_id or mapped, row.state.value, row.reason)


@dataclass
class Upstream:
    """One chosen engine for one request; `finish` must be called exactly once."""

    route: Route
    engine_key: str = field(repr=False)
    by_affinity: bool = False
    finished: bool = False
    # An external endpoint (grid/api/externals.py): its base URL and TLS verification.
    base: str | None = None
    verify: ssl.SSLContext | bool = True

    @property
    def external(self) -> bool:
        return self.base is not None

    @property
    def base_url(self) -> str:
        return self.base if self.base is not None else self.route.base_url


def _routes(
    ctl: Controller, active: Counter[tuple[str, str]], model_id: str | None = None
) -> tuple[list[Route], dict[str, str]]:
    """The routes of `model_id` (of every model when None), built under the controller lock."""
    routes: list[Route] = []
    keys: dict[str, str] = {}
    with ctl.lock:
        for host_id, entry in ctl.registry.hosts.items():
            if not entry.engine_key:
                continue  # a managed child cannot be reached without the host's engine key
            keys[host_id] = entry.engine_key
            residencies = {r.model_id: r for r in entry.host.residencies}
            for wire in entry.routes:
                if model_id is not None and wire.model_id != model_id:
                    continue  # one request needs only its model's routes: keep the lock short
                residency = residencies.get(wire.model_id)
                if residency is None:
                    continue  # a route the residency rows do not corroborate is not routable
                routes.append(
                    Route(
                        host_id=host_id,
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
                    )
                )
        routes += external_routes(ctl, active, model_id)
    # Proxy-owned counters survive heartbeats (the node's own slot count lags behind them).
    return [replace(r, active=active[r.breaker_key]) for r in routes], keys


class ProxyState:
    def __init__(self, breaker: BreakerPolicy | None = None) -> None:
        self._lock = threading.Lock()
        self._active: Counter[tuple[str, str]] = Counter()
        self.breakers = CircuitBreakers(breaker)
        self.measurements = Measurements()

    def ready_models(self, ctl: Controller, now: float) -> list[str]:
        """Model ids with at least one admitted READY route (GET /v1/models)."""
        with self._lock:
            routes, _keys = _routes(ctl, self._active)
        ttl = ctl.config.node_ttl_s
        return sorted(
            {
                r.model_id
                for r in routes
                if route_refusal(r, now, lease_ttl_s=ttl) in LISTED_REFUSALS
            }
        )

    def auto_servable(self, ctl: Controller, ready: list[str]) -> list[str]:
        """The workloads an automatic request would be routed for now: those the current plan's
        portfolio maps to a model in `ready` (the READY models of GET /v1/models)."""
        report = current_portfolio(ctl)
        if report is None:
            return []
        listed = set(ready)
        return sorted(w for w, m in report.mapping.items() if m in listed)

    def choose(
        self,
        ctl: Controller,
        model_id: str,
        now: float,
        *,
        affinity: AffinityKey | None,
        max_tokens: int | None,
    ) -> Upstream | RouteRefusal:
        with self._lock:
            routes, keys = _routes(ctl, self._active, model_id)
            decision = choose_route(
                routes,
                model_id,
                now,
                lease_ttl_s=ctl.config.node_ttl_s,
                affinity=affinity,
                breakers=self.breakers,
                measurements=self.measurements,
                max_tokens=max_tokens,
            )
            if isinstance(decision, RouteRefusal):
                return decision
            route = decision.route
            self._active[route.breaker_key] += 1
            self.breakers.begin(route.breaker_key, now)
            dial = external_dial(ctl, route.host_id)
            if dial is not None:
                return Upstream(route, "", decision.by_affinity, base=dial[0], verify=dial[1])
            return Upstream(route, keys[route.host_id], decision.by_affinity)

    def choose_auto(
        self,
        ctl: Controller,
        workload: str,
        now: float,
        *,
        affinity: AffinityKey | None,
        max_tokens: int | None,
    ) -> Upstream | Preparing:
        """A ready engine of the model the portfolio maps `workload` to, or what is being
        prepared for it (never another model: an unmapped workload waits for the plan)."""
        mapped, preparing = portfolio_choice(ctl, workload)
        if mapped is None:
            return preparing
        chosen = self.choose(ctl, mapped, now, affinity=affinity, max_tokens=max_tokens)
        if isinstance(chosen, RouteRefusal):
            return replace(preparing, route_refusal=chosen.code)
        return chosen

    def finish(
        self,
        upstream: Upstream,
        status: int | None,
        now: float,
        *,
        latency_s: float,
        completion_tokens: int | None,
        cancelled: bool = False,
    ) -> None:
        """Fold one outcome: status None is a transport failure; a cancelled stream is neutral."""
        with self._lock:
            if upstream.finished:
                return
            upstream.finished = True
            key = upstream.route.breaker_key
            self._active[key] -= 1
            if self._active[key] <= 0:
                del self._active[key]
            if cancelled:  # no verdict on the engine: counted like a caller's error
                self.breakers.record(key, BreakerOutcome.CALLER_ERROR, now)  # frees a probe only
                return
            outcome = classify_status(status)
            self.breakers.record(key, outcome, now)
            if status is not None and 200 <= status < 300:
                self.measurements.record(
                    upstream.route.measure_key, latency_s, completion_tokens, now
                )

    def abandon(self, upstream: Upstream, now: float) -> None:
        """The request ended without an engine verdict (the client left): free its route only."""
        self.finish(upstream, None, now, latency_s=0.0, completion_tokens=None, cancelled=True)
