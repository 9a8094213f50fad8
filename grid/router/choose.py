"""Choose one engine for one request among the routes of the requested model (pure).

Order of authority:
1. hard gates: READY residency, admitting host, fresh lease, open capacity, closed circuit;
2. protection class: accepting hosts before throttled ones (only the best class is used);
3. expected completion: (1 + (active + queued) / effective concurrency) service waves times the
   route's latency estimate, plus max_tokens / throughput when both are known;
   ties by load ratio, then the freshest lease, then the engine id (deterministic);
4. affinity: with an X-Grid-Affinity-Key digest, rendezvous hashing among the routes of the
   best class whose estimate is within 20% of the best.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from grid.fleet import Route
from grid.router import measure
from grid.router.affinity import AffinityKey, rendezvous_order
from grid.router.breaker import CircuitBreakers
from grid.router.measure import MeasureKey, Measurements
from grid.router.routes import DEFAULT_FUTURE_SKEW_S, route_refusal

AFFINITY_SLACK = 1.2


@dataclass(frozen=True)
class RouteChoice:
    route: Route
    estimate_s: float
    by_affinity: bool
    candidates: int  # admitted routes in the chosen protection class


@dataclass(frozen=True)
class RouteRefusal:
    # no_route | not_admitted | at_capacity | circuit_open | relay_disconnected |
    # insecure_engine_transport
    code: str
    message: str
    reasons: dict[str, int]  # refusal code -> number of routes refused for it


def _estimate(
    route: Route,
    peers: list[MeasureKey],
    now: float,
    measurements: Measurements | None,
    max_tokens: int | None,
) -> float:
    limit = route.admission_limit()
    waves = 1.0 + (route.active + route.queued) / max(1, limit if limit is not None else 1)
    if measurements is None:
        return waves
    estimate = waves * measure.latency_s(measurements, route.measure_key, peers, now)
    if max_tokens is not None and max_tokens > 0:
        throughput = measure.throughput(measurements, route.measure_key, peers, now)
        if throughput is not None:
            estimate += max_tokens / throughput
    return estimate


# A refusal every route of the model shares that needs its own code and sentence.
_SOLE_REASONS = {
    "relay_disconnected": "is on a host whose relay tunnel is down (the node reconnects it)",
    "insecure_engine_transport": "would be reached over plain HTTP at a non-loopback address, "
    "which Grid refuses (engines stay on their host's loopback behind the relay)",
}


def _refusal(model_id: str, reasons: Counter[str]) -> RouteRefusal:
    sole = next(iter(reasons)) if len(reasons) == 1 else None
    if sole is not None and sole in _SOLE_REASONS:
        message = f"every engine of model {model_id!r} {_SOLE_REASONS[sole]}"
        return RouteRefusal(sole, message, dict(reasons))
    if not reasons:
        return RouteRefusal(
            "no_route", f"no engine serves model {model_id!r} right now", dict(reasons)
        )
    if set(reasons) <= {"at_capacity", "circuit_open"}:
        code = "circuit_open" if "circuit_open" in reasons else "at_capacity"
        what = (
            "recently failed and are cooling down"
            if code == "circuit_open"
            else "are at their concurrency limit"
        )
        return RouteRefusal(code, f"every engine of model {model_id!r} {what}", dict(reasons))
    return RouteRefusal(
        "not_admitted",
        f"no engine of model {model_id!r} is ready on a host that admits work",
        dict(reasons),
    )


def choose_route(
    routes: Sequence[Route],
    model_id: str,
    now: float,
    *,
    lease_ttl_s: float,
    future_skew_s: float = DEFAULT_FUTURE_SKEW_S,
    affinity: AffinityKey | None = None,
    breakers: CircuitBreakers | None = None,
    measurements: Measurements | None = None,
    max_tokens: int | None = None,
) -> RouteChoice | RouteRefusal:
    """The engine for one request of `model_id`, or why none can take it."""
    reasons: Counter[str] = Counter()
    admitted: list[Route] = []
    for route in routes:
        if route.model_id != model_id:
            continue
        why = route_refusal(route, now, lease_ttl_s=lease_ttl_s, future_skew_s=future_skew_s)
        if why is None and breakers is not None and not breakers.available(route.breaker_key, now):
            why = "circuit_open"
        if why is None:
            admitted.append(route)
        else:
            reasons[why] += 1
    if not admitted:
        return _refusal(model_id, reasons)
    best_class = min(r.protection_class for r in admitted)
    pool = [r for r in admitted if r.protection_class == best_class]
    peers = [r.measure_key for r in pool]
    scored = sorted(
        (
            (_estimate(r, peers, now, measurements, max_tokens), r.load_ratio(), r.lease_age(now),
             r.engine_id, r)
            for r in pool
        ),
        key=lambda item: item[:4],
    )  # fmt: skip
    best_estimate, *_rest, best = scored[0]
    if affinity is None or len(scored) == 1:
        return RouteChoice(best, best_estimate, False, len(pool))
    near = {item[3]: item for item in scored if item[0] <= best_estimate * AFFINITY_SLACK + 1e-12}
    chosen_id = rendezvous_order(affinity, near)[0]
    chosen = near[chosen_id]
    return RouteChoice(chosen[4], chosen[0], True, len(pool))
