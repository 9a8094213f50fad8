"""The launch facts a node reply carries for the models resident on its host (docs/engines.md):
the profile's runtime list, kind, pooling, chat template, engine settings and GPU count, so a
node restarts a child whose settings changed (grid/node/agent/engine_launch.py). Which models
get them now is staged (grid/runtime/controller/engine_restarts.py): a replicated model
restarts one host at a time, never its last serving replica."""

from __future__ import annotations

from grid.fleet.wire import WireLaunch
from grid.runtime.controller.core import Controller
from grid.runtime.controller.engine_restarts import serving_view, stage_restarts


def launch_for(ctl: Controller, host_id: str, now: float) -> dict[str, WireLaunch]:
    with ctl.lock:
        if host_id not in ctl.registry.hosts:
            return {}
        profiles = [ctl.profiles[m] for m in sorted(ctl.profiles)]
        hosts = ctl.state.drained(ctl.registry.snapshot_hosts())
        view = serving_view(hosts, profiles, ctl.policy, now)
        allowed, ctl.state.restart_grants = stage_restarts(
            view, host_id, ctl.state.restart_grants, ctl.config.restart_hold_s
        )
        return {m: WireLaunch.of(ctl.profiles[m]) for m in sorted(allowed)}
