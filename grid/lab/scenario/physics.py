"""Routing physics of one minute (pure): requests -> READY replicas -> outcomes.

Route choice: a named request goes to its model; an `auto` request of workload w goes to the
strategy's current mapping for w when that model has a READY replica, else to the most suitable
READY model that can serve w (workload score > 0; ties: id). Among the chosen model's replicas,
the least-utilised one (then host id).

Capacity: a replica on a machine of performance p (× the throttle fraction when THROTTLED) has
60 × replica_concurrency device-seconds per minute; a request of base service s costs
s / (p × throttle) of them. Requests are admitted in arrival order while the replica's budget
lasts: admitted requests succeed with latency = device time × (1 + utilisation²) (queueing
inflation); the rest fail deterministically (TIMEOUT) and their device time becomes the
replica's queue depth (concurrency units) reported to the next controller tick. A request with
no READY candidate is NO_ROUTE (an arrival with no engine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from grid.demand import Outcome
from grid.fleet.models import ModelProfile
from grid.lab.scenario.arrivals import Request


@dataclass
class Replica:
    host_id: str
    model_id: str
    speed: float  # perf × throttle
    budget_s: float  # device seconds per minute
    used_s: float = 0.0
    requests: list[int] = field(default_factory=list)

    @property
    def utilisation(self) -> float:
        return self.used_s / self.budget_s if self.budget_s > 0 else 1.0


@dataclass(frozen=True)
class Routed:
    request: Request
    model_id: str | None
    host_id: str | None
    outcome: Outcome
    device_s: float
    latency_s: float
    queue_depth: int


@dataclass
class MinuteResult:
    routed: list[Routed]
    replicas: list[Replica]

    def overloaded(self) -> list[str]:
        return sorted({r.model_id for r in self.replicas if r.used_s > r.budget_s})


def _choose(
    req: Request,
    by_model: Mapping[str, list[Replica]],
    mapping: Mapping[str, str],
    profiles: Mapping[str, ModelProfile],
) -> str | None:
    if req.requested != "auto":
        return req.requested if by_model.get(req.requested) else None
    mapped = mapping.get(req.workload)
    if mapped is not None and by_model.get(mapped):
        return mapped
    able = [
        m for m in by_model if by_model[m] and profiles[m].workload_scores.get(req.workload, 0) > 0
    ]
    if not able:
        return None
    return max(able, key=lambda m: (profiles[m].workload_scores[req.workload], m))


def route_minute(
    requests: Sequence[Request],
    replicas: list[Replica],
    mapping: Mapping[str, str],
    profiles: Mapping[str, ModelProfile],
) -> MinuteResult:
    by_model: dict[str, list[Replica]] = {}
    for one in sorted(replicas, key=lambda r: (r.model_id, r.host_id)):
        by_model.setdefault(one.model_id, []).append(one)
    choice: list[tuple[Request, Replica | None, float]] = []
    for req in requests:
        model_id = _choose(req, by_model, mapping, profiles)
        if model_id is None:
            choice.append((req, None, 0.0))
            continue
        chosen = min(by_model[model_id], key=lambda r: (r.utilisation, r.host_id))
        device = req.service_s / chosen.speed
        chosen.used_s += device
        choice.append((req, chosen, device))
    spent: dict[int, float] = {}
    routed: list[Routed] = []
    for req, rep, device in choice:
        if rep is None:
            routed.append(Routed(req, None, None, Outcome.NO_ROUTE, 0.0, 0.0, 0))
            continue
        key = id(rep)
        done = spent.get(key, 0.0) + device
        spent[key] = done
        queue = max(0, round((rep.used_s - rep.budget_s) / 60.0))
        if done <= rep.budget_s + 1e-9:
            util = min(1.0, rep.utilisation)
            latency = device * (1.0 + util * util)
            routed.append(
                Routed(req, rep.model_id, rep.host_id, Outcome.OK, device, latency, queue)
            )
        else:
            routed.append(
                Routed(req, rep.model_id, rep.host_id, Outcome.TIMEOUT, device, device * 2, queue)
            )
    return MinuteResult(routed, replicas)
