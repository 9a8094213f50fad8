"""The OpenAI proxy's in-memory state: in-flight counters, circuit breakers, measurements.

It reads the routing table the controller publishes (`Controller.routing`, an immutable view:
grid/runtime/controller/views.py), asks the pure router for one engine, and folds each outcome
back; it never takes the controller's lock. Each successful response is measured once, into the
store it shares with the controller (`Controller.measured`, read for placement). Nothing here
is persisted: a restarted server starts with closed circuits and no measurements. A managed
node that reaches its engines over its relay tunnel (`relay` in its envelope) sends no engine
key: its routes are `relay` routes, admitted while its tunnel is up (`connected`). A host that
reports an engine key (a node on the controller's own machine, older nodes) has `http` routes,
which the router dials only at a loopback address. That private key is read from the table
only to build the upstream hop and is never returned in anything a client can see.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from grid.fleet import PortfolioReport
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
    measure,
    route_refusal,
)
from grid.runtime.controller import Controller, RoutingTable

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
    """The current plan's portfolio (None before any plan has one), as last published."""
    return ctl.plan_view.portfolio


def portfolio_choice(ctl: Controller, workload: str) -> tuple[str | None, Preparing]:
    """The model the current plan's portfolio maps `workload` to (None when unmapped) and the
    admission row that explains it, from the published plan view."""
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
    engine_key: str | None = field(repr=False)  # None: a relay route (the node adds it)
    by_affinity: bool = False
    finished: bool = False
    external: bool = False  # an endpoint Grid does not run (grid/api/externals.py)

    @property
    def base_url(self) -> str:
        return self.route.base_url


def _never(_host_id: str) -> bool:
    return False


def _routes(
    ctl: Controller,
    active: Counter[tuple[str, str]],
    model_id: str | None = None,
    connected: Callable[[str], bool] = _never,
) -> tuple[list[Route], RoutingTable]:
    """The routes of `model_id` (of every model when None) from the published routing table,
    with the proxy's own in-flight counts, and the table they came from (its engine keys)."""
    table = ctl.routing
    routes = table.routes(model_id, connected)
    # Proxy-owned counters survive heartbeats (the node's own slot count lags behind them).
    return [replace(r, active=active[r.breaker_key]) for r in routes], table


MAX_FAILURES_KEPT = 256


class ProxyState:
    def __init__(
        self,
        breaker: BreakerPolicy | None = None,
        connected: Callable[[str, float], bool] | None = None,
        measurements: Measurements | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._active: Counter[tuple[str, str]] = Counter()
        self.breakers = CircuitBreakers(breaker)
        # The one store of measurements; the app passes the controller's (placement reads it).
        self.measurements = measurements if measurements is not None else Measurements()
        # Whether a host's relay tunnel is up at `now` (grid.api.relay.RelayHub.connected).
        self._connected = connected or (lambda _h, _n: False)
        # The last transport failure of each route (engine id, model): code, sentence, when.
        self.failures: dict[tuple[str, str], tuple[str, str, float]] = {}

    def _live(self, now: float) -> Callable[[str], bool]:
        return lambda host_id: self._connected(host_id, now)

    def ready_models(self, ctl: Controller, now: float) -> list[str]:
        """Model ids with at least one admitted READY route (GET /v1/models)."""
        with self._lock:
            routes, _table = _routes(ctl, self._active, None, self._live(now))
        ttl = ctl.config.node_ttl_s
        return sorted(
            {
                r.model_id
                for r in routes
                if route_refusal(r, now, lease_ttl_s=ttl) in LISTED_REFUSALS
            }
        )

    def model_listing(self, ctl: Controller, now: float) -> tuple[list[str], list[str]]:
        """GET /v1/models: (the READY model ids, the workloads `auto` would serve now), from
        the published routing table and plan view: it never waits for the controller lock."""
        models = self.ready_models(ctl, now)
        return models, self.auto_servable(ctl, models)

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
            return self._choose_locked(ctl, model_id, now, affinity, max_tokens)

    def try_choose(
        self,
        ctl: Controller,
        model_id: str,
        now: float,
        *,
        affinity: AffinityKey | None,
        max_tokens: int | None,
    ) -> Upstream | RouteRefusal | None:
        """`choose` when the proxy's lock is free (so the event loop may call it without
        waiting; the routing table is a published view and needs no lock); None when it is
        held, and the caller takes the worker-thread path instead."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            return self._choose_locked(ctl, model_id, now, affinity, max_tokens)
        finally:
            self._lock.release()

    def _choose_locked(
        self,
        ctl: Controller,
        model_id: str,
        now: float,
        affinity: AffinityKey | None,
        max_tokens: int | None,
    ) -> Upstream | RouteRefusal:
        routes, table = _routes(ctl, self._active, model_id, self._live(now))
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
        return Upstream(
            route, table.engine_key(route.host_id), decision.by_affinity, external=route.external
        )

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
        failure: tuple[str, str] | None = None,
    ) -> None:
        """Fold one outcome: status None is a transport failure (`failure`: its code and
        sentence, kept as the route's last failure); a cancelled stream is neutral."""
        with self._lock:
            if upstream.finished:
                return
            upstream.finished = True
            key = upstream.route.breaker_key
            if failure is not None:
                if len(self.failures) >= MAX_FAILURES_KEPT and key not in self.failures:
                    self.failures.pop(next(iter(self.failures)))
                self.failures[key] = (failure[0], failure[1], now)
            self._active[key] -= 1
            if self._active[key] <= 0:
                del self._active[key]
            if cancelled:  # no verdict on the engine: counted like a caller's error
                self.breakers.record(key, BreakerOutcome.CALLER_ERROR, now)  # frees a probe only
                return
            outcome = classify_status(status)
            self.breakers.record(key, outcome, now)
            if status is not None and 200 <= status < 300:
                measure.record(self.measurements, upstream.route, latency_s, completion_tokens, now)

    def abandon(self, upstream: Upstream, now: float) -> None:
        """The request ended without an engine verdict (the client left): free its route only."""
        self.finish(upstream, None, now, latency_s=0.0, completion_tokens=None, cancelled=True)

    def failure_rows(self) -> list[dict[str, object]]:
        """The last transport failure of each route, for status (no secret in them)."""
        with self._lock:
            items = sorted(self.failures.items())
        return [
            {"engine_id": engine, "model_id": model, "code": code, "message": text, "at": at}
            for (engine, model), (code, text, at) in items
        ]
