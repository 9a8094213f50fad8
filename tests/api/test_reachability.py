"""The reachability rule (docs/addressing.md): only advertised addresses are probed, one probe per
route port, results cached (success 30 s, failure 3 s); and the real TCP probe against a real
listener on 127.0.0.x and a closed port."""

from __future__ import annotations

import socket

import pytest

from grid.api.reachability import Reachability, tcp_probe
from grid.fleet.wire import NodeUpdate

pytestmark = pytest.mark.unit


def update(address: str | None, ports: list[int]) -> NodeUpdate:
    envelope: dict[str, object] = {"routes": [{"model_id": f"m{p}", "port": p} for p in ports]}
    if address is not None:
        envelope["advertise_address"] = address
    return NodeUpdate.model_validate({"host_id": "h", "allocator": envelope})


class FakeProbe:
    """Stands in for the network: answers from `down` and records every call."""

    def __init__(self, down: set[tuple[str, int]]) -> None:
        self.down = down
        self.calls: list[tuple[str, int]] = []

    def __call__(self, address: str, port: int) -> str | None:
        self.calls.append((address, port))
        return "Connection refused" if (address, port) in self.down else None


def test_no_address_no_probe() -> None:
    probe = FakeProbe(set())
    assert Reachability(probe).problems(update(None, [4000, 4001])) == []
    assert probe.calls == []


def test_each_port_probed_once_and_failures_named() -> None:
    now = [100.0]
    probe = FakeProbe({("10.0.0.5", 4001)})
    reach = Reachability(probe, clock=lambda: now[0])
    problems = reach.problems(update("10.0.0.5", [4001, 4000, 4001]))
    assert probe.calls == [("10.0.0.5", 4000), ("10.0.0.5", 4001)]
    [problem] = problems
    assert problem.startswith("address_unreachable:") and "10.0.0.5:4001" in problem
    assert "Connection refused" in problem
    # Within the windows nothing is probed again; after 3 s the failure is, after 30 s both.
    now[0] = 102.9
    reach.problems(update("10.0.0.5", [4000, 4001]))
    assert len(probe.calls) == 2
    probe.down.clear()
    now[0] = 103.1
    assert reach.problems(update("10.0.0.5", [4000, 4001])) == []
    assert probe.calls[2:] == [("10.0.0.5", 4001)]
    now[0] = 130.5
    reach.problems(update("10.0.0.5", [4000, 4001]))
    assert probe.calls[3:] == [("10.0.0.5", 4000)]


def test_tcp_probe_on_loopback() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.7", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        assert tcp_probe("127.0.0.7", port) is None
        assert tcp_probe("127.0.0.8", port) is not None  # nothing on that address
