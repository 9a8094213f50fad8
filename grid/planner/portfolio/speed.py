"""What one replica of a model on a host is worth, in replicas at measured speed (pure).

A workload's offered concurrency is its arrival rate × *measured* service time, and a service
time is measured on the hosts that served the requests: req(w, m) counts replicas of the speed
at which m's device time was measured. A replica on a host k× as fast serves k× the offered
concurrency (device time depends on the host), so the portfolio's `missing` level counts
replicas in these units (score.py, link.py).

    speed(m, h)   h.measured_tokens_per_s[m], else the hardware prior h.hardware_tokens_per_s;
                  × throttle_fraction when h is THROTTLED
    ref(m)        the mean speed of m's READY replicas on admitting hosts (where m's service
                  time was measured)
    weight(m, h)  max(10, round(10 · speed(m, h) / ref(m))), in tenths of a replica;
                  10 (one replica) when m serves nowhere (no measured speed to scale: the
                  workload's service time was measured on other models) or a speed is unknown

A replica is never worth less than one (the floor): the rule only credits a faster host, it
does not ask for more replicas on slower ones. Measured in the lab (4 machines, seed 144): with
the mean over candidate hosts as the reference of a model that serves nowhere and no floor, a
single slow replica left 0.4 of a replica "missing", the first fill packed the only CUDA host
and video starved (least-workload 0.43 → 0.03). With no speed figures in the snapshot every
weight is 10 and `missing` counts replicas, as before.
"""

from __future__ import annotations

from grid.fleet import FleetSnapshot, Host, HostState, ResidencyState
from grid.planner.problem import PlacementProblem

Key = tuple[str, str]
UNIT = 10  # weights are tenths of a replica at measured speed


def host_speed(host: Host, model_id: str) -> float:
    measured = host.measured_tokens_per_s.get(model_id)
    speed = measured if measured is not None else host.hardware_tokens_per_s
    if host.state is HostState.THROTTLED:
        speed *= host.throttle_fraction
    return speed


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def replica_weights(snap: FleetSnapshot, problem: PlacementProblem) -> dict[Key, int]:
    """weight(m, h) of every candidate key of the problem (docstring above)."""
    hosts = {h.host_id: h for h in snap.hosts}
    serving: dict[str, list[float]] = {}
    for h in snap.hosts:
        budget = problem.host_by_id.get(h.host_id)
        if budget is None or not budget.admitting:
            continue
        for r in h.residencies:
            if r.state is ResidencyState.READY:
                serving.setdefault(r.model_id, []).append(host_speed(h, r.model_id))
    out: dict[Key, int] = {}
    for model in problem.models:
        m = model.model_id
        cands = problem.candidates_of_model(m)
        ref = _mean(serving.get(m, []))
        for c in cands:
            speed = host_speed(hosts[c.host_id], m)
            weight = UNIT if ref <= 0 or speed <= 0 else max(UNIT, round(UNIT * speed / ref))
            out[(m, c.host_id)] = weight
    return out
