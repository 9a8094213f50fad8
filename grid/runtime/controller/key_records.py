"""The client keys of /v1 in the controller's durable state (grid/api/client_keys.py decides).

The records (name, SHA-256, prefix, times; never a key) are part of the state document, so they
follow its store: the state file, or etcd, where every controller of a cluster reads them and
a standby that becomes leader accepts the keys the old leader issued. A change is saved before
it takes effect and is undone in memory when the save fails (a deposed leader's fenced write
included); it needs no plan, so no revision moves.
"""

from __future__ import annotations

from collections.abc import Callable

from grid.runtime.controller.core import Controller
from grid.runtime.controller.state import ClientKeyRecord

KeyRecords = list[ClientKeyRecord]


def update_client_keys(
    ctl: Controller, change: Callable[[KeyRecords], KeyRecords], now: float
) -> KeyRecords:
    """Replace the records by `change(current)` (which may refuse with a GridError) and save."""
    with ctl.lock:
        previous = ctl.state.client_keys
        chosen = change(list(previous))
        ctl.state.client_keys = chosen
        try:
            ctl.save(now)
        except Exception:
            ctl.state.client_keys = previous
            raise
        return chosen
