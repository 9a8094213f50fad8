"""The reachability rule (docs/addressing.md): only advertised addresses are probed, one probe per
route port, results cached (success 30 s, failure 3 s), and (issue 22) never on the request path:
`problems` answers from earlier probes at once while `submit` queues the due probes on background
threads, bounded per host and in total. The real TCP probe runs against a real listener on
127.0.0.x and a closed port."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from grid.api.reachability import Reachability, tcp_probe

pytestmark = pytest.mark.unit


class FakeProbe:
    """Stands in for the network: answers from `down` and records every call; `gate` holds
    every probe until it is set (a black-holed port)."""

    def __init__(self, down: set[tuple[str, int]], gate: threading.Event | None = None) -> None:
        self.down = down
        self.gate = gate
        self.calls: list[tuple[str, int]] = []

    def __call__(self, address: str, port: int) -> str | None:
        self.calls.append((address, port))
        if self.gate is not None:
            self.gate.wait(10)
        return "Connection refused" if (address, port) in self.down else None


def test_no_address_no_probe() -> None:
    probe = FakeProbe(set())
    reach = Reachability(probe)
    assert reach.submit("h", None, [4000, 4001]) == 0
    assert reach.problems("h") == [] and probe.calls == []


def test_each_port_probed_once_and_failures_named() -> None:
    now = [100.0]
    probe = FakeProbe({("10.0.0.5", 4001)})
    reach = Reachability(probe, clock=lambda: now[0])
    assert reach.problems("h") == []  # nothing probed yet: nothing is known, nothing waits
    reach.submit("h", "10.0.0.5", [4001, 4000, 4001])
    assert reach.settle()
    assert sorted(probe.calls) == [("10.0.0.5", 4000), ("10.0.0.5", 4001)]
    [problem] = reach.problems("h")
    assert problem.startswith("address_unreachable:") and "10.0.0.5:4001" in problem
    assert "Connection refused" in problem
    # Within the windows nothing is probed again; after 3 s the failure is, after 30 s both.
    now[0] = 102.9
    assert reach.submit("h", "10.0.0.5", [4000, 4001]) == 0
    probe.down.clear()
    now[0] = 103.1
    assert reach.submit("h", "10.0.0.5", [4000, 4001]) == 1
    assert reach.settle() and probe.calls[2:] == [("10.0.0.5", 4001)]
    assert reach.problems("h") == []
    now[0] = 130.5
    reach.submit("h", "10.0.0.5", [4000, 4001])
    assert reach.settle() and probe.calls[3:] == [("10.0.0.5", 4000)]


def test_black_holed_ports_never_hold_up_the_caller_and_are_bounded() -> None:
    """Issue 22 finding 3: 45 heartbeats advertising 64 black-holed ports each held the request
    for a second per port. Now the caller returns at once, one host gets at most `per_host`
    probes, and all hosts together at most `max_pending` waiting ones."""
    gate = threading.Event()
    probe = FakeProbe(set(), gate)
    reach = Reachability(probe, per_host=8, max_pending=12)
    started = time.monotonic()
    queued = [
        reach.submit(f"h{i}", "10.9.9.9", range(5000 + 100 * i, 5064 + 100 * i)) for i in (0, 1, 2)
    ]
    for _ in range(45):
        reach.problems("h0")
        reach.submit("h0", "10.9.9.9", range(5000, 5064))
    assert time.monotonic() - started < 0.5  # nothing waited for a probe
    assert queued == [8, 4, 0]  # per host, then the total bound
    assert reach.dropped > 0
    gate.set()
    assert reach.settle()
    assert len(probe.calls) == 12
    reach.close()


def test_tcp_probe_on_loopback() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.7", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        assert tcp_probe("127.0.0.7", port) is None
        assert tcp_probe("127.0.0.8", port) is not None  # nothing on that address
