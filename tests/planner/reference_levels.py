"""An independently written scorer of every objective level, for brute force on tiny fleets.

Written again from the level definitions (DESIGN.md's objective levels, with the coefficients
that levels.py's docstring and README state), from the snapshot itself, with none of the
planner's scoring code:

    replica levels    reference_staged.level_values (pinned, per class baseline and direct
                      rounds with the harm tie-break, inferred)
    domain_shortfall  Σ_m max(0, min(min_failure_domains, replicas) − distinct domains)
    disruption        Σ over incumbents (a live residency on a candidate pair) the plan drops:
                      (priority + 1) × (2 if ready else 1) × (10 + ⌈min(warm-back, 3600)⌉),
                      warm-back = warm estimate + load estimate unless cached
    quality           Σ over placed pairs: 1000 ready incumbent / 800 other incumbent / 400
                      cached / 0 cold; − min(300, ⌈startup⌉); + round(min(100, speed) × boost);
                      + round(50 × min(1, footprint / allocatable)); − 30 per scarce model
                      depending on the host (models with 1–2 candidate hosts; not for the
                      constrained models themselves); − 50 on a throttled host;
                      + 10 × host priority; − min(100, 20 × (active tasks + queued));
                      − min(100, ⌈measured latency ms / 50⌉); − min(cap, penalty × failed
                      starts of the model on the host) (policy start_failure_penalty[_cap])
                      speed = measured tokens/s, else bandwidth/10 + gflops/1000;
                      boost = offered concurrency / (replica concurrency × target
                      utilization) clamped to [1, max_performance_boost] (1 without demand)
    spare_hosts       admitting hosts without any placement or fixed replica

Shared inputs only: the candidate pairs (eligibility filter), the desired counts and the fixed
replicas, as in reference.py.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from grid.fleet.models import LIVE_STATES, Host, HostState, ModelProfile, ResidencyState
from grid.planner.eligibility import host_refusals
from grid.planner.problem import PlacementProblem
from tests.planner.reference import _allocatable, _cached, _footprint, _runtimes
from tests.planner.reference_staged import level_values

Key = tuple[str, str]
LOWER_LEVELS = (
    ("domain_shortfall", "min"),
    ("disruption", "min"),
    ("quality", "max"),
    ("spare_hosts", "max"),
)


def _live(host: Host, model_id: str) -> ResidencyState | None:
    for r in host.residencies:
        if r.model_id == model_id and r.state in LIVE_STATES:
            return r.state
    return None


def _memory(prof: ModelProfile, host: Host) -> int:
    """The pair's footprint: the smallest runtime's (or the incumbent's own), at least live."""
    res = next(
        (r for r in host.residencies if r.model_id == prof.model_id and r.state in LIVE_STATES),
        None,
    )
    if res is not None and res.runtime:
        own = prof.runtime_memory_mb.get(res.runtime, prof.memory_mb)
    else:
        own = _footprint(prof, host) if _runtimes(prof, host) else prof.memory_mb
    return max(own, res.memory_mb) if res is not None else own


def all_levels(problem: PlacementProblem, pairs: Iterable[Key]) -> dict[str, int]:
    snap = problem.snapshot
    hosts = {h.host_id: h for h in snap.hosts}
    profiles = {m.model_id: m for m in snap.models}
    chosen = set(pairs)
    fixed = {(f.model_id, f.host_id) for f in problem.fixed}
    values = level_values(problem, chosen)
    everyone = chosen | fixed
    shortfall = 0
    for prof in snap.models:
        mine = [h for m, h in everyone if m == prof.model_id]
        domains = {hosts[h].failure_domain or f"host:{h}" for h in mine}
        shortfall += max(0, min(prof.min_failure_domains, len(mine)) - len(domains))
    values["domain_shortfall"] = shortfall
    values["disruption"] = sum(
        _drop_cost(profiles[m], hosts[h])
        for m, h in problem.candidates
        if _live(hosts[h], m) is not None and (m, h) not in chosen
    )
    values["quality"] = sum(_quality(problem, profiles[m], hosts[h]) for m, h in chosen)
    used = {h for _m, h in everyone}
    values["spare_hosts"] = sum(
        1 for h in snap.hosts if not host_refusals(h, snap) and h.host_id not in used
    )
    return values


def better(problem: PlacementProblem, a: dict[str, int], b: dict[str, int]) -> int:
    """1 if `a` is lexicographically better than `b` over every level, -1 if worse."""
    order = [(name, "max") for name in level_values(problem, ())] + list(LOWER_LEVELS)
    for name, sense in order:
        if a[name] != b[name]:
            up = a[name] > b[name]
            return 1 if up == (sense == "max") else -1
    return 0


def _warm_back(prof: ModelProfile, host: Host) -> float:
    return prof.warm_estimate_s + (0.0 if _cached(prof, host) else prof.load_estimate_s)


def _drop_cost(prof: ModelProfile, host: Host) -> int:
    weight = 2 if _live(host, prof.model_id) is ResidencyState.READY else 1
    return (prof.priority + 1) * weight * (10 + math.ceil(min(_warm_back(prof, host), 3600.0)))


def _quality(problem: PlacementProblem, prof: ModelProfile, host: Host) -> int:
    state = _live(host, prof.model_id)
    cached = _cached(prof, host)
    if state is ResidencyState.READY:
        score, startup = 1000, 0.0
    elif state is not None:
        score, startup = 800, prof.warm_estimate_s
    elif cached:
        score, startup = 400, prof.warm_estimate_s
    else:
        score, startup = 0, prof.load_estimate_s + prof.warm_estimate_s
    score -= min(300, math.ceil(startup))
    speed = host.measured_tokens_per_s.get(prof.model_id)
    if speed is None:
        speed = host.memory_bandwidth_gbps / 10 + host.compute_gflops / 1000
    score += round(min(100.0, speed) * _boost(problem, prof))
    allocatable = _allocatable(host)
    if allocatable > 0:
        score += round(50 * min(1.0, _memory(prof, host) / allocatable))
    candidates = [h for m, h in problem.candidates if m == prof.model_id]
    if len(candidates) > 2:
        score -= 30 * _scarce_on(problem, host.host_id)
    if host.state is HostState.THROTTLED:
        score -= 50
    score += 10 * host.priority
    score -= min(100, 20 * (host.active_tasks + host.queue_depth))
    score -= min(100, math.ceil(host.measured_latency_ms.get(prof.model_id, 0.0) / 50))
    policy = problem.snapshot.policy
    failed = host.start_failures.get(prof.model_id, 0)
    score -= min(policy.start_failure_penalty_cap, policy.start_failure_penalty * failed)
    return score


def _boost(problem: PlacementProblem, prof: ModelProfile) -> float:
    demand = problem.snapshot.demand.get(prof.model_id)
    if demand is None:
        return 1.0
    per_replica = prof.replica_concurrency * prof.target_utilization
    ratio = demand.offered_concurrency / per_replica if per_replica > 0 else 1.0
    return max(1.0, min(problem.snapshot.policy.max_performance_boost, ratio))


def _scarce_on(problem: PlacementProblem, host_id: str) -> int:
    by_model: dict[str, list[str]] = {}
    for m, h in problem.candidates:
        by_model.setdefault(m, []).append(h)
    return sum(1 for hs in by_model.values() if 0 < len(hs) <= 2 and host_id in hs)
