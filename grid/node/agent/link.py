"""The node's link to the controller: one heartbeat exchange, and what the node knows of it.

`exchange` sends one `NodeUpdate` and returns the reply with the request's monotonic duration
(the node subtracts it from the controller's authority TTL), or None when the controller could
not be reached or refused the update; it records whether the node is registered, the last error,
the controller's mode and the lifecycle the controller last heard.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from grid.fleet.errors import GridError
from grid.fleet.wire import NodeReply, NodeUpdate

log = logging.getLogger("grid.node")

# Refusals after which the controller may not know this host: the next update re-registers.
FORGOTTEN = frozenset({"controller_unreachable", "controller_timeout", "not_registered"})


class NodeClient(Protocol):
    """The part of `grid.wire.AllocatorClient` the node uses."""

    def put_node(self, node_id: str, update: NodeUpdate) -> NodeReply: ...

    def close(self) -> None: ...


@dataclass
class Exchange:
    reply: NodeReply
    duration_s: float  # the whole request, on the node's monotonic clock


class ControllerLink:
    def __init__(
        self,
        client: NodeClient,
        record_id: str,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.record_id = record_id
        self.clock = clock
        self.monotonic = monotonic
        self.registered = False
        self.last_error = ""
        self.last_heartbeat_at: float | None = None
        self.controller_mode = ""
        self.reported_lifecycle: str | None = None  # what the controller last heard

    def exchange(self, kind: str, update: NodeUpdate) -> Exchange | None:
        started = self.monotonic()
        try:
            reply = self.client.put_node(self.record_id, update)
        except GridError as err:
            self.last_error = f"{err.code}: {err.message}"
            if err.code in FORGOTTEN:
                self.registered = False
            log.warning("%s heartbeat failed: %s", kind, self.last_error)
            return None
        duration = self.monotonic() - started
        self.registered = True
        self.last_error = ""
        self.last_heartbeat_at = self.clock()
        if update.allocator is not None:
            self.reported_lifecycle = update.allocator.state
        self.controller_mode = reply.allocator.mode
        return Exchange(reply, duration)
