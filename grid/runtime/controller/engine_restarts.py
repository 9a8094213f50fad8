"""Staged engine restarts after a profile change (chat template, engine settings).

Every node reply carries the launch facts of the host's resident models
(`Controller.launch_for`, operations.py), and a node restarts a READY child whose command line
they change (docs/engines.md): the replica leaves the routes while it restarts. So the controller
decides, per reply, which of the host's models get their launch facts now, with the reconciler's own
rule of a serving replica (`FleetView.serving`: READY on an admitting host with a live route):

- a model with no replica on another host gets them (a sole replica restarts in place: there is
  nothing else that could serve meanwhile, and keeping the old template forever is worse);
- a model with replicas elsewhere gets them only while another replica serves, and only on one
  host at a time: that host holds a grant until it was seen restarting (loading, warming) and
  serving again, or until `hold_s` passes without it being seen restarting (it needed none).
  While it is seen restarting the grant stays fresh; it ends when the replica fails there. A
  host that restarted holds nobody and is not granted again within `hold_s` (it runs the facts
  it would be sent). Another host is held meanwhile, so a change never takes the last serving
  replica of a replicated model away.

Pure: the grants go in and come out; `now` is given.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from grid.fleet import (
    FleetSnapshot,
    Host,
    ModelProfile,
    Plan,
    Policy,
    ResidencyState,
    SolverReport,
)
from grid.runtime.reconcile import FleetView


@dataclass(frozen=True)
class RestartGrant:
    host_id: str
    at: float
    seen_down: bool = False
    done: bool = False  # restarted: it holds nobody, and its own host is not granted again


Grants = dict[str, RestartGrant]
RESTARTING = frozenset({ResidencyState.WARMING, ResidencyState.LOADING})
_NO_PLAN = Plan(solver=SolverReport(engine="none", status="none", wall_ms=0.0))


def serving_view(
    hosts: list[Host], profiles: list[ModelProfile], policy: Policy, now: float
) -> FleetView:
    """The reconciler's view of `hosts` for its serving predicate (no plan is consulted)."""
    return FleetView(FleetSnapshot(now=now, policy=policy, hosts=hosts, models=profiles), _NO_PLAN)


def stage_restarts(
    view: FleetView, host_id: str, grants: Grants, hold_s: float
) -> tuple[set[str], Grants]:
    """(the models resident on `host_id` whose launch facts go out now, the new grants)."""
    now = view.now
    kept: Grants = {m: g for m, g in grants.items() if now - g.at <= hold_s}
    allowed: set[str] = set()
    host = view.hosts.get(host_id)
    for res in host.residencies if host is not None else []:
        model = res.model_id
        if model not in view.profiles:
            continue
        grant = kept.get(model)
        here_serving = view.serving(model, host_id)
        if grant is not None and grant.host_id == host_id:
            if grant.done:
                continue  # it restarted with these facts a moment ago
            if res.state in RESTARTING:  # the restart is under way: the grant stays fresh
                kept[model] = replace(grant, at=now, seen_down=True)
                allowed.add(model)
                continue
            if not here_serving:  # failed or drained here: it restarts nothing any more
                del kept[model]
                grant = None
            elif not grant.seen_down:
                allowed.add(model)
                continue
            else:  # restarted and serving again: the next host may go
                kept[model] = replace(grant, at=now, done=True)
                continue
        if not here_serving:
            allowed.add(model)  # nothing serves here to take away (a node restarts READY only)
            continue
        elsewhere = [h for h, _r in view.by_model.get(model, []) if h != host_id]
        if not elsewhere:
            allowed.add(model)  # the sole replica restarts in place
            continue
        turn_taken = grant is not None and not grant.done
        if turn_taken or not any(view.serving(model, h) for h in elsewhere):
            continue  # another host is restarting, or this is the last serving replica
        kept[model] = RestartGrant(host_id, now)
        allowed.add(model)
    return allowed, kept
