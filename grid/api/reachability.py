"""Whether a host's advertised engine address answers the controller (docs/addressing.md).

A node that states `advertise_address` has each of its engine routes probed with a TCP connect
to (address, port) when it reports it. A route that does not accept the connection makes the
host `unhealthy` with the reason (`address_unreachable: ...`), so the planner gives it no new
work and the router never dials it, until a later report probes clean. Nodes that state no
address (older nodes, one machine) are not probed: their routes are on the controller's loopback.
Nor are nodes that reach their engines over their relay tunnel (`relay` in the envelope): the
controller never connects to such a node.

Results are cached per (address, port): a success for `ok_ttl_s`, a failure for `fail_ttl_s`,
so a heartbeat every few seconds costs at most one probe per route per window.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

from grid.fleet.wire import NodeUpdate

PROBE_TIMEOUT_S = 1.0
OK_TTL_S = 30.0
FAIL_TTL_S = 3.0


def tcp_probe(address: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when address:port accepts a TCP connection, else why not (one short sentence)."""
    try:
        with socket.create_connection((address, port), timeout=timeout_s):
            return None
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


class Reachability:
    def __init__(
        self,
        probe: Callable[[str, int], str | None] = tcp_probe,
        clock: Callable[[], float] = time.monotonic,
        *,
        ok_ttl_s: float = OK_TTL_S,
        fail_ttl_s: float = FAIL_TTL_S,
    ) -> None:
        self._probe = probe
        self._clock = clock
        self._ok_ttl_s = ok_ttl_s
        self._fail_ttl_s = fail_ttl_s
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, int], tuple[float, str | None]] = {}

    def problems(self, update: NodeUpdate) -> list[str]:
        """The unreachable routes of an update that advertises an address ([] when all answer,
        or when no address is advertised)."""
        envelope = update.allocator
        if envelope is None or envelope.advertise_address is None or envelope.relay:
            return []  # a relay node is never dialled: its engines are reached over its tunnel
        address = envelope.advertise_address
        out: list[str] = []
        for port in sorted({route.port for route in envelope.routes}):
            reason = self._check(address, port)
            if reason is not None:
                out.append(
                    f"address_unreachable: the controller cannot connect to the advertised "
                    f"engine address {address}:{port} ({reason}); fix --advertise-address on "
                    "the node or the network between them"
                )
        return out

    def _check(self, address: str, port: int) -> str | None:
        now = self._clock()
        key = (address, port)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and now < cached[0]:
            return cached[1]
        reason = self._probe(address, port)  # outside the lock: a probe may take a second
        ttl = self._ok_ttl_s if reason is None else self._fail_ttl_s
        with self._lock:
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = (now + ttl, reason)
        return reason


REACHABILITY = Reachability()
