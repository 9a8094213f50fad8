"""One candidate route (a READY engine serving one model on one host) and its hard admission.

A route is admitted only when its residency is READY, its host admits work (accepting or
throttled), its lease (the host's last heartbeat, in the server's clock) is fresh, and its
effective concurrency is not exhausted. Effective concurrency is the engine's advertised
concurrency times the host's throttle fraction: missing capacity is conservative raw load (no
ratio), zero capacity is closed.

How the proxy reaches the engine (`transport`, docs/addressing.md): `relay` over the host's own
tunnel (a managed node: the engine stays on the node's loopback), `http` straight to an engine
on a loopback address (the controller's own machine), `https` to an endpoint Grid does not run.
A relay route whose tunnel is down is refused (`relay_disconnected`), and so is plain HTTP to a
non-loopback address (`insecure_engine_transport`): nothing is ever sent in clear over a
network, and no route falls back from one transport to another.
"""

from __future__ import annotations

from grid.fleet import ADMITTING_STATES, ResidencyState, Route
from grid.wire import is_loopback

DEFAULT_FUTURE_SKEW_S = 5.0
TRANSPORTS = ("relay", "http", "https")


def route_refusal(
    route: Route, now: float, *, lease_ttl_s: float, future_skew_s: float = DEFAULT_FUTURE_SKEW_S
) -> str | None:
    """Why this route cannot take a new request now (a stable code), or None."""
    if route.residency_state is not ResidencyState.READY:
        return "model_not_ready"
    if route.host_state not in ADMITTING_STATES:
        return "host_not_admitting"
    if route.lease_at > now + future_skew_s:
        return "lease_in_future"
    if route.lease_age(now) > lease_ttl_s:
        return "lease_expired"
    why = transport_refusal(route)
    if why is not None:
        return why
    limit = route.admission_limit()
    if limit == 0:
        return "capacity_closed"
    if limit is not None and route.active >= limit:
        return "at_capacity"
    return None


def transport_refusal(route: Route) -> str | None:
    """Why the proxy may not dial this route the way it is reached, or None."""
    if route.transport == "relay":
        return None if route.relay_connected else "relay_disconnected"
    if route.transport == "https":
        return None
    if route.transport == "http" and is_loopback(route.address):
        return None
    return "insecure_engine_transport"
