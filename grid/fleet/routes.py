"""One candidate route: a READY engine serving one model on one host, as the router takes it.

The one route type from a node's report to the router: the controller publishes its routing
table in it (grid/runtime/controller/views.py) and the router admits and scores it
(grid/router/routes.py has the admission rules and the transports).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from grid.fleet.models import HostState, ResidencyState


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
    def measure_key(self) -> tuple[str, str, str]:
        """The latency/throughput series: per engine, model and artifact revision ("" when the
        node reports none), so a replaced artifact starts from the prior instead of the old
        weights' measurements (grid/demand/throughput.py)."""
        return (self.engine_id, self.model_id, (self.artifact_sha256 or "").lower())

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
