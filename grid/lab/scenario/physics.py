"""Routing and service physics of one minute (pure): requests -> READY capacity -> outcomes.

The service model is the oracle's (grid/lab/oracle, docs/oracle.md "Extended traces"): a READY
replica of model m on a machine of performance p (× the throttle fraction while THROTTLED)
serves replica_concurrency × p concurrency-minutes of base work in a minute (a request of base
service s seconds is s / 60 units); a model's READY replicas form one pool (its capacity is the
sum); work is not carried into the next minute. What the pool serves is min(capacity, routed
work), exactly:

- routing: a named request goes to its model; an `auto` request of workload w goes to the
  strategy's current mapping for w when that model has a READY replica, else to the most
  suitable READY model that can serve w (workload score > 0; ties: id). A `Routing` may instead
  split each class's work over models by quotas (the oracle strategy replays the oracle's flow);
- service: each pool takes its routed work in arrival order (a quota's overflow last) while its
  capacity lasts. A request whose work is done in full succeeds, with latency = device time ×
  (1 + utilisation²) (queueing inflation); the request at which the capacity runs out is served
  in part (the part counts as served work, the request fails: TIMEOUT), and the rest fail
  (TIMEOUT) with nothing served. The pool's overflow (routed − capacity, concurrency units) is
  the queue depth reported to the next controller tick. No READY candidate: NO_ROUTE.
Each request is attributed to the least-utilised replica of its pool (then host id) for device
time and activity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from grid.demand import Outcome
from grid.fleet import ModelProfile
from grid.lab.scenario.arrivals import Request

EPS = 1e-9


@dataclass
class Replica:
    host_id: str
    model_id: str
    speed: float  # perf × throttle
    budget_s: float  # device seconds per minute (60 × replica_concurrency)
    used_s: float = 0.0  # routed device seconds
    requests: list[int] = field(default_factory=list)

    @property
    def units(self) -> float:
        """Base work this replica serves in a minute (concurrency-minutes)."""
        return self.budget_s * self.speed / 60.0

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
    served: float = 0.0  # concurrency-minutes of this request's work done this minute


@dataclass
class MinuteResult:
    routed: list[Routed]
    replicas: list[Replica]
    overloaded_models: list[str] = field(default_factory=list)

    def overloaded(self) -> list[str]:
        return list(self.overloaded_models)

    @property
    def served(self) -> float:
        return sum(r.served for r in self.routed)


# class -> [(model, concurrency-minutes)] in order: the oracle's flow of one minute. A class is
# a named model or an `auto` workload word.
Quotas = Mapping[str, Sequence[tuple[str, float]]]


def request_class(req: Request) -> str:
    return req.requested if req.requested != "auto" else req.workload


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


# (request index, model, units, late): one share of a request's work on one model
Part = tuple[int, str, float, bool]


def _parts_by_mapping(
    requests: Sequence[Request],
    by_model: Mapping[str, list[Replica]],
    mapping: Mapping[str, str],
    profiles: Mapping[str, ModelProfile],
) -> list[Part]:
    out: list[Part] = []
    for i, req in enumerate(requests):
        model_id = _choose(req, by_model, mapping, profiles)
        if model_id is not None:
            out.append((i, model_id, req.units, False))
    return out


def _parts_by_quota(
    requests: Sequence[Request], by_model: Mapping[str, list[Replica]], quotas: Quotas
) -> list[Part]:
    """Fill each class's quotas in arrival order (a request may be split at a quota boundary);
    work beyond every quota goes to the class's last quota model as late overflow."""
    left = {c: [[m, q] for m, q in rows if by_model.get(m)] for c, rows in quotas.items()}
    out: list[Part] = []
    for i, req in enumerate(requests):
        rows = left.get(request_class(req), [])
        work = req.units
        for row in rows:
            if work <= EPS:
                break
            take = min(work, float(row[1]))
            if take > EPS:
                out.append((i, str(row[0]), take, False))
                row[1] = float(row[1]) - take
                work -= take
        if work > EPS and rows:
            out.append((i, str(rows[-1][0]), work, True))
    return out


def route_minute(
    requests: Sequence[Request],
    replicas: list[Replica],
    mapping: Mapping[str, str],
    profiles: Mapping[str, ModelProfile],
    quotas: Quotas | None = None,
) -> MinuteResult:
    by_model: dict[str, list[Replica]] = {}
    for one in sorted(replicas, key=lambda r: (r.model_id, r.host_id)):
        by_model.setdefault(one.model_id, []).append(one)
    parts = (
        _parts_by_quota(requests, by_model, quotas)
        if quotas is not None
        else _parts_by_mapping(requests, by_model, mapping, profiles)
    )
    routed_units: dict[str, float] = {}
    for _i, model_id, units, _late in parts:
        routed_units[model_id] = routed_units.get(model_id, 0.0) + units
    left = {m: sum(r.units for r in reps) for m, reps in by_model.items()}
    capacity = dict(left)
    done: dict[int, float] = {}
    full: dict[int, bool] = {}
    home: dict[int, Replica] = {}
    for i, model_id, units, _late in sorted(parts, key=lambda p: (p[3], p[0])):
        take = min(units, max(0.0, left[model_id]))
        left[model_id] -= take
        done[i] = done.get(i, 0.0) + take
        full[i] = full.get(i, True) and take >= units - EPS
        if i not in home:
            rep = min(by_model[model_id], key=lambda r: (r.utilisation, r.host_id))
            home[i] = rep
            rep.used_s += requests[i].service_s / rep.speed
            rep.requests.append(i)
    out: list[Routed] = []
    for i, req in enumerate(requests):
        rep = home.get(i)
        if rep is None:
            out.append(Routed(req, None, None, Outcome.NO_ROUTE, 0.0, 0.0, 0))
            continue
        m = rep.model_id
        device = req.service_s / rep.speed
        queue = max(0, round(routed_units[m] - capacity[m]))
        served = done.get(i, 0.0)
        if full.get(i, False):
            util = min(1.0, routed_units[m] / capacity[m]) if capacity[m] > 0 else 1.0
            out.append(
                Routed(
                    req,
                    m,
                    rep.host_id,
                    Outcome.OK,
                    device,
                    device * (1 + util * util),
                    queue,
                    served,
                )
            )
        else:
            out.append(
                Routed(req, m, rep.host_id, Outcome.TIMEOUT, device, device * 2, queue, served)
            )
    overloaded = sorted(m for m in routed_units if routed_units[m] > capacity[m] + EPS)
    return MinuteResult(out, replicas, overloaded)
