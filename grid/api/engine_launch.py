"""The launch facts a node reply carries for the models resident on its host (docs/engines.md):
the profile's runtime list, kind, pooling, engine settings and GPU count, so a node restarts a
child whose settings changed (grid/node/agent/engine_launch.py)."""

from __future__ import annotations

from grid.fleet.wire import WireLaunch
from grid.runtime.controller.core import Controller


def launch_for(ctl: Controller, host_id: str) -> dict[str, WireLaunch]:
    with ctl.lock:
        entry = ctl.registry.hosts.get(host_id)
        if entry is None:
            return {}
        resident = {r.model_id for r in entry.host.residencies}
        return {m: WireLaunch.of(ctl.profiles[m]) for m in sorted(resident) if m in ctl.profiles}
