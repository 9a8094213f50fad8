"""The node's link to the controller: one heartbeat exchange, and what the node knows of it.

`exchange` sends one `NodeUpdate` and returns the reply with the request's monotonic duration
(the node subtracts it from the controller's authority TTL), or None when the controller could
not be reached or refused the update; it records whether the node is registered, the last error,
the controller's mode and the lifecycle the controller last heard.

With several controllers (`grid allocator node start --controller URL --controller URL`, or
the list enrollment handed out), `FailoverClient` sends each heartbeat to the one that
answered last; when it is unreachable, times out or says it is a standby (`not_leader`, a
307 naming the leader, `no_leader`), the same heartbeat goes on to the leader it named (if it
is one of the listed URLs: a credential travels to no other) and then to the others, so a
change of leader is followed within one heartbeat. The term fence refuses whatever the old
leader might still send.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from grid.fleet import GridError, NodeReply, NodeUpdate

log = logging.getLogger("grid.node")

# Refusals after which the controller may not know this host: the next update re-registers.
FORGOTTEN = frozenset({"controller_unreachable", "controller_timeout", "not_registered"})
# Answers after which another listed controller may lead: the heartbeat tries the next one.
NOT_HERE = frozenset(
    {"controller_unreachable", "controller_timeout", "not_leader", "no_leader", "state_fenced"}
)


class NodeClient(Protocol):
    """The part of `grid.wire.AllocatorClient` the node uses."""

    def put_node(self, node_id: str, update: NodeUpdate) -> NodeReply: ...

    def close(self) -> None: ...


class ListedClient(NodeClient, Protocol):
    base_url: str


class FailoverClient:
    """A `NodeClient` over several controllers that follows their leader (module docstring)."""

    def __init__(self, clients: list[ListedClient]) -> None:
        self.clients = list(clients)
        self.current = 0

    @property
    def base_url(self) -> str:
        return self.clients[self.current].base_url

    def _index(self, location: object) -> int | None:
        if not isinstance(location, str):
            return None
        for i, client in enumerate(self.clients):
            if location.startswith(client.base_url.rstrip("/") + "/"):
                return i
        return None

    def put_node(self, node_id: str, update: NodeUpdate) -> NodeReply:
        n = len(self.clients)
        order = [(self.current + k) % n for k in range(n)]
        last: GridError | None = None
        while order:
            index = order.pop(0)
            try:
                reply = self.clients[index].put_node(node_id, update)
            except GridError as err:
                if err.code not in NOT_HERE:
                    raise
                last = err
                named = self._index(err.details.get("location"))
                if named is not None and named in order:  # the leader this standby named
                    order.remove(named)
                    order.insert(0, named)
                continue
            self.current = index
            return reply
        assert last is not None
        raise last

    def close(self) -> None:
        for client in self.clients:
            client.close()


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
