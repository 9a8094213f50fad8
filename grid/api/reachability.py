"""Whether a host's advertised engine address answers the controller (docs/addressing.md).

A node that states `advertise_address` has the routes the controller *accepted* for it (only
residencies it commanded or an operator pinned: grid.runtime.controller.trust) probed with a TCP
connect to (address, port). A route that does not accept the connection makes the host
`unhealthy` (`address_unreachable`), so the planner gives it no new work and the router never
dials it, until a later probe succeeds. Nodes that state no address (older nodes, one machine)
are not probed: their routes are on the controller's loopback. Nor are nodes that reach their
engines over their relay tunnel (`relay` in the envelope): the controller never connects to such
a node, so the caller submits no address for it.

Probes never run on the request path. `problems(host)` answers from what earlier probes found,
at once; `submit(host, address, ports)` after the update records the host's current routes and
queues the probes that are due on a few daemon threads, and a verdict that changed is handed to
`on_result` (the controller applies it at once, between heartbeats). Bounded three ways: at
most `per_host` ports of one host are probed (a host with more routes than any real node has is
not given more), at most `max_pending` probes wait in total (more are dropped and asked again by
a later heartbeat), and each result is cached (a success for `ok_ttl_s`, a failure for
`fail_ttl_s`). Results name ports, so they are shown to operators only (the public problem line
says how many routes do not answer).
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable

PROBE_TIMEOUT_S = 1.0
OK_TTL_S = 30.0
FAIL_TTL_S = 3.0
PER_HOST = 8
MAX_PENDING = 64
WORKERS = 2
MAX_CACHE = 4096


def tcp_probe(address: str, port: int, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None when address:port accepts a TCP connection, else why not (one short sentence)."""
    try:
        with socket.create_connection((address, port), timeout=timeout_s):
            return None
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def unreachable_text(address: str, port: int, reason: str) -> str:
    return (
        f"address_unreachable: the controller cannot connect to the advertised engine address "
        f"{address}:{port} ({reason}); fix --advertise-address on the node or the network "
        "between them"
    )


class Reachability:
    def __init__(
        self,
        probe: Callable[[str, int], str | None] = tcp_probe,
        clock: Callable[[], float] = time.monotonic,
        *,
        ok_ttl_s: float = OK_TTL_S,
        fail_ttl_s: float = FAIL_TTL_S,
        per_host: int = PER_HOST,
        max_pending: int = MAX_PENDING,
        workers: int = WORKERS,
        on_result: Callable[[str, list[str]], None] | None = None,
    ) -> None:
        self._probe = probe
        self._clock = clock
        self._ok_ttl_s = ok_ttl_s
        self._fail_ttl_s = fail_ttl_s
        self.per_host = per_host
        self.max_pending = max_pending
        self._workers = workers
        # Told (host, its problems now) when a probe's verdict changed: applied at once.
        self._on_result = on_result
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, int], tuple[float, str | None]] = {}
        self._pending: set[tuple[str, int]] = set()
        self._targets: dict[str, tuple[str, tuple[int, ...]]] = {}  # host -> (address, ports)
        # Daemon workers: a probe in flight never holds up the controller's exit.
        self._queue: queue.Queue[tuple[str, int] | None] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self.probes_run = 0  # for tests and benchmarks
        self.dropped = 0

    def problems(self, host_id: str) -> list[str]:
        """The host's unreachable routes as earlier probes found them ([] when none failed or
        none was probed yet). Never probes."""
        now = self._clock()
        with self._lock:
            target = self._targets.get(host_id)
            if target is None:
                return []
            address, ports = target
            out = []
            for port in ports:
                cached = self._cache.get((address, port))
                if cached is not None and cached[1] is not None and now < cached[0]:
                    out.append(unreachable_text(address, port, cached[1]))
            return out

    def submit(self, host_id: str, address: str | None, ports: Iterable[int]) -> int:
        """Record the host's routes and queue the probes that are due; returns how many were
        queued. No address: nothing to probe (routes on the controller's loopback)."""
        if address is None:
            with self._lock:
                self._targets.pop(host_id, None)
            return 0
        chosen = tuple(sorted(set(ports)))[: self.per_host]
        now = self._clock()
        due: list[tuple[str, int]] = []
        with self._lock:
            self._targets[host_id] = (address, chosen)
            for port in chosen:
                key = (address, port)
                cached = self._cache.get(key)
                if key in self._pending or (cached is not None and now < cached[0]):
                    continue
                if len(self._pending) >= self.max_pending:
                    self.dropped += 1
                    continue
                self._pending.add(key)
                due.append(key)
            if due and not self._threads:
                for index in range(self._workers):
                    worker = threading.Thread(
                        target=self._work, name=f"grid-probe-{index}", daemon=True
                    )
                    worker.start()
                    self._threads.append(worker)
        for key in due:
            self._queue.put(key)
        return len(due)

    def _work(self) -> None:
        while (key := self._queue.get()) is not None:
            self._run(key)

    def _run(self, key: tuple[str, int]) -> None:
        try:
            reason = self._probe(*key)
        except Exception as exc:  # a probe must never kill the pool
            reason = type(exc).__name__
        ttl = self._ok_ttl_s if reason is None else self._fail_ttl_s
        with self._lock:
            self.probes_run += 1
            self._pending.discard(key)
            if len(self._cache) >= MAX_CACHE:
                self._cache.clear()
            previous = self._cache.get(key)
            self._cache[key] = (self._clock() + ttl, reason)
            changed = previous is None or previous[1] != reason
            hosts = [
                h
                for h, (a, ports) in self._targets.items()
                if (a, key[1]) == key and key[1] in ports
            ]
        if changed and self._on_result is not None:
            for host_id in hosts:
                self._on_result(host_id, self.problems(host_id))

    def settle(self, timeout_s: float = 5.0) -> bool:
        """Wait until no probe is pending (tests); False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._pending:
                    return True
            time.sleep(0.01)
        return False

    def close(self) -> None:
        """Stop the workers once the probes in flight end; queued ones are dropped."""
        with self._lock:
            threads, self._threads = self._threads, []
            self._pending.clear()
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()
        for _ in threads:
            self._queue.put(None)
