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

import math
from dataclasses import dataclass

from grid.fleet.models import ADMITTING_STATES, HostState, ResidencyState
from grid.wire.client import is_loopback

DEFAULT_FUTURE_SKEW_S = 5.0
TRANSPORTS = ("relay", "http", "https")


@dataclass(frozen=True)
class Route:
    host_id: str
    model_id: str
    port: int
    host_state: HostState
    residency_state: ResidencyState
    lease_at: float  # the host's last heartbeat, server clock
    throttle_fraction: float = 1.0
    concurrency: int | None = None  # advertised simultaneous requests; None: unknown
    active: int = 0  # requests the proxy has in flight on this route
    queued: int = 0  # advertised queued work
    # The serving residency's artifact revision: outcome evidence is kept per revision, so a
    # late response of a replaced artifact can never update the new one's evidence.
    artifact_sha256: str | None = None
    # Where the engine listens: the host's advertised address (DESIGN "Addressing").
    address: str = "127.0.0.1"
    transport: str = "http"  # relay | http | https (see the module docstring)
    relay_connected: bool = False  # a relay route: the host's tunnel is up now
    ca_file: str | None = None  # an https route: the CA that verifies it (None: system store)
    external: bool = False  # an endpoint Grid does not run (an operator's inventory entry)
    prefix: str = ""  # an external endpoint's base path before /v1 (e.g. "/openai")

    @property
    def base_url(self) -> str:
        host = f"[{self.address}]" if ":" in self.address else self.address
        scheme = "https" if self.transport == "https" else "http"
        return f"{scheme}://{host}:{self.port}{self.prefix}"

    @property
    def engine_id(self) -> str:
        return f"{self.host_id}:{self.port}"

    @property
    def breaker_key(self) -> tuple[str, str]:
        return (self.engine_id, self.model_id)

    @property
    def measure_key(self) -> tuple[str, str]:
        """The latency/throughput series: per engine, model and artifact revision, so a
        replaced artifact starts from the prior instead of the old weights' measurements."""
        if not self.artifact_sha256:
            return self.breaker_key
        return (self.engine_id, f"{self.model_id}@{self.artifact_sha256.lower()}")

    @property
    def protection_class(self) -> int:
        """0 for a fully accepting host, 1 for a throttled one (preferred in that order)."""
        return 0 if self.host_state is HostState.ACCEPTING else 1

    def effective_concurrency(self) -> float | None:
        if self.concurrency is None:
            return None
        fraction = self.throttle_fraction if self.host_state is HostState.THROTTLED else 1.0
        return max(0.0, self.concurrency * fraction)

    def admission_limit(self) -> int | None:
        """Most requests in flight that still admit one more; None: no known limit."""
        effective = self.effective_concurrency()
        if effective is None:
            return None
        if effective <= 0:
            return 0
        return max(1, math.floor(effective))

    def load_ratio(self) -> float:
        """Active work as a fraction of effective concurrency (raw count when unknown)."""
        limit = self.admission_limit()
        return float(self.active) if limit is None else self.active / max(1, limit)

    def lease_age(self, now: float) -> float:
        """Age of the lease; a timestamp ahead of `now` counts as age zero, never younger."""
        return max(0.0, now - self.lease_at)


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
