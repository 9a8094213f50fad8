"""The wire between nodes, the CLI and the controller (spec "Local wire contract").

Header names of the two credentials; the message models follow.
"""

from __future__ import annotations

OPERATOR_HEADER = "X-Grid-Allocator-Token"
NODE_HEADER = "X-Grid-Allocator-Node-Token"
