"""Route choice for one request (pure): candidates, circuit breakers, affinity, measurements.

Nothing here performs I/O or reads a clock: the HTTP layer (grid/api/routes_openai.py) builds
the candidate routes from the controller's registry, passes `now`, and reports each outcome
back. The router never tells the allocator what to provision.
"""

from grid.fleet.routes import Route  # the one route type (grid/fleet/routes.py)
from grid.router.affinity import AffinityKey, hash_affinity_key, rendezvous_order
from grid.router.breaker import BreakerOutcome, BreakerPolicy, CircuitBreakers, classify_status
from grid.router.choose import RouteChoice, RouteRefusal, choose_route
from grid.router.measure import Measurements
from grid.router.routes import route_refusal, transport_refusal
from grid.router.usage import SseUsageReader, Usage, usage_of

__all__ = [
    "AffinityKey",
    "BreakerOutcome",
    "BreakerPolicy",
    "CircuitBreakers",
    "Measurements",
    "Route",
    "RouteChoice",
    "RouteRefusal",
    "SseUsageReader",
    "Usage",
    "choose_route",
    "classify_status",
    "hash_affinity_key",
    "rendezvous_order",
    "route_refusal",
    "transport_refusal",
    "usage_of",
]
