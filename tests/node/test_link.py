"""The controller link: one exchange, and what the node then knows about the controller."""

from __future__ import annotations

import pytest

from grid.fleet.errors import GridError
from grid.fleet.wire import NodeReply, NodeUpdate, ReplyAllocator, WireAllocator
from grid.node.agent.link import ControllerLink

pytestmark = pytest.mark.unit


class _Controller:
    """The controller's HTTP API (an outside thing): answers, or refuses with a code."""

    def __init__(self) -> None:
        self.refusal: str | None = None
        self.sent: list[tuple[str, NodeUpdate]] = []

    def put_node(self, node_id: str, update: NodeUpdate) -> NodeReply:
        if self.refusal is not None:
            raise GridError(self.refusal, "refused", fix="retry")
        self.sent.append((node_id, update))
        return NodeReply(allocator=ReplyAllocator(mode="automatic"))

    def close(self) -> None:
        pass


def _update(state: str) -> NodeUpdate:
    return NodeUpdate(host_id="h1", allocator=WireAllocator(state=state))


def _link(controller: _Controller) -> ControllerLink:
    ticks = iter([10.0, 10.25, 20.0, 20.5, 30.0, 30.1])
    return ControllerLink(
        controller, "h1.allocator", clock=lambda: 99.0, monotonic=lambda: next(ticks)
    )


def test_an_answered_exchange_registers_and_remembers_what_the_controller_heard() -> None:
    controller = _Controller()
    link = _link(controller)
    exchange = link.exchange("lease", _update("draining"))
    assert exchange is not None and exchange.duration_s == pytest.approx(0.25)
    assert controller.sent[0][0] == "h1.allocator"
    assert (link.registered, link.last_error, link.controller_mode) == (True, "", "automatic")
    assert (link.reported_lifecycle, link.last_heartbeat_at) == ("draining", 99.0)


@pytest.mark.parametrize(
    ("code", "still_registered"),
    [
        ("controller_unreachable", False),
        ("controller_timeout", False),
        ("not_registered", False),
        ("wrong_host", True),  # a refusal from a live controller that knows this host
    ],
)
def test_a_refusal_is_remembered_and_a_forgotten_host_registers_again(
    code: str, still_registered: bool
) -> None:
    controller = _Controller()
    link = _link(controller)
    assert link.exchange("lease", _update("accepting")) is not None
    controller.refusal = code
    assert link.exchange("control", _update("paused")) is None
    assert link.registered is still_registered
    assert link.last_error == f"{code}: refused"
    assert link.reported_lifecycle == "accepting"  # the controller never heard "paused"
