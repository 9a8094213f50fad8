"""The HTTP client of the allocator API that the CLI and the node agent share.

It speaks the fleet vocabulary (`grid.fleet.wire`) and never imports the server package.
"""

from __future__ import annotations

from grid.wire.client import DEFAULT_TIMEOUT_S, AllocatorClient, is_loopback, transport_refusal

__all__ = ["DEFAULT_TIMEOUT_S", "AllocatorClient", "is_loopback", "transport_refusal"]
