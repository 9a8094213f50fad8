"""Churn: the allocator's own changes of mind (pure; docs/scenario.md "Churn").

A run's lifecycle is a time-ordered list of changes: a replica started (a successful WARM),
unloaded (a successful UNLOAD) or lost (its host went down or rebooted empty). Churn counts
the mutations made after a placement was established:

- an unload of a replica the allocator had started and the host still ran (healthy): +1;
- a start that takes the place of such an unloaded replica (a swap, a move, a reload of what
  was just dropped): +1.

Not churn: the first fill of the empty fleet and any start into capacity the run has not yet
freed (growth), and a start that replaces a replica lost to a host outage (forced by the
scenario, the same in kind for every strategy). The ledger, in time order:

    unload of a live (host, model):  churn += 1, freed += 1
    host lost with k live replicas:  lost += k
    start:  lost > 0  -> lost -= 1          (outage replacement)
            freed > 0 -> freed -= 1, churn += 1  (replaces an unloaded replica)
            otherwise                        (fill or growth)

An unload of a replica that is not live (its host went down since it started) is not churn.
At equal times a start or unload precedes a loss: the simulator completes an action within the
minute before the node event at the next minute's start.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

START = "start"
UNLOAD = "unload"
LOST = "lost"
_ORDER = {START: 0, UNLOAD: 0, LOST: 1}


@dataclass(frozen=True)
class Change:
    at: float
    kind: str  # start | unload | lost (the host's every live replica)
    host_id: str
    model_id: str = ""


@dataclass(frozen=True)
class Churn:
    churn: int
    healthy_unloads: int
    replacing_starts: int
    fill_starts: int
    outage_restarts: int


def count_churn(changes: Iterable[Change]) -> Churn:
    live: dict[str, set[str]] = {}
    freed = lost = unloads = replacing = fill = restarts = 0
    for c in sorted(changes, key=lambda c: (c.at, _ORDER[c.kind], c.host_id, c.model_id)):
        here = live.setdefault(c.host_id, set())
        if c.kind == LOST:
            lost += len(here)
            here.clear()
        elif c.kind == UNLOAD:
            if c.model_id in here:
                here.discard(c.model_id)
                unloads += 1
                freed += 1
        elif c.kind == START:
            here.add(c.model_id)
            if lost > 0:
                lost -= 1
                restarts += 1
            elif freed > 0:
                freed -= 1
                replacing += 1
            else:
                fill += 1
        else:
            raise ValueError(f"unknown lifecycle change {c.kind!r}")
    return Churn(unloads + replacing, unloads, replacing, fill, restarts)
