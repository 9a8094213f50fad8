"""The objective levels, highest first, and a solver-agnostic scorer (pure).

Every engine optimizes exactly these named terms in this order and reports them; the validator
scores any plan with `score_placement`, so engines are compared on one scale.

    pinned                       max  replicas on their pinned hosts
    p{P}:baseline:{k}            max  #models m with placed_m ≥ k, over models with k ≤ base_m
                                      (class P, high→low; max-min fair rounds, k = 1, 2, ...)
    p{P}:direct:{k}              max  #models m with placed_m ≥ k, for direct-demand replicas
                                      base_m < k ≤ desired_m (max-min fair rounds, k = 1, 2, ...)
    p{P}:direct:{k}:harm         max  Σ harm_rank(m)·[placed_m ≥ k] over the same models
                                      (an incomplete round goes to the most harmed models)
    p{P}:inferred                max  Σ_m (min(placed_m, desired_m) − min(placed_m, base_m)) over
                                      inferred-only models
    domain_shortfall             min  Σ_m max(0, min(min_failure_domains_m, placed_m) − domains_m)
    disruption                   min  Σ disruption_cost over managed incumbents not kept
    quality                      max  Σ quality_score over placed candidates
    spare_hosts                  max  #admitting hosts left without any placement

`placed_m` counts fixed (unmanaged) replicas too, so values describe the whole fleet.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from typing import Literal, cast

from grid.fleet import Evidence, FleetSnapshot, Host, HostState, ResidencyState
from grid.planner.problem import Candidate, PlacementProblem

Sense = Literal["max", "min"]
REPLICA_LEVEL_PREFIXES = ("pinned", "p")  # levels 1–2: the ones that count replicas


@dataclass(frozen=True)
class Level:
    name: str
    sense: Sense
    replica_level: bool  # part of levels 1–2 (pinned and priority classes)


def baseline_rounds(problem: PlacementProblem, priority: int) -> list[int]:
    """k = 1 .. the class's largest baseline: every model's k-th required replica is one round."""
    top = max(
        (problem.targets[m.model_id].baseline for m in problem.models if m.priority == priority),
        default=0,
    )
    return list(range(1, top + 1))


def baseline_members(problem: PlacementProblem, priority: int, k: int) -> list[str]:
    """The models of the class whose k-th replica is a required baseline replica."""
    return [
        m.model_id
        for m in problem.models
        if m.priority == priority and problem.targets[m.model_id].baseline >= k
    ]


def replica_values(problem: PlacementProblem, counts: dict[str, int]) -> dict[str, int]:
    """The per-class replica levels (baseline and direct rounds, inferred) for replica counts.

    The one definition of levels 2's values; `score_placement` and the solver's `Scorer` add
    the pinned level and levels 3-6.
    """
    values: dict[str, int] = {}
    harm = problem.harm_rank
    targets = problem.targets
    for p, rounds in _class_rounds(problem):
        for k, ids in rounds["baseline"]:
            values[f"p{p}:baseline:{k}"] = sum(1 for m in ids if counts[m] >= k)
        for k, ids in rounds["direct"]:
            values[f"p{p}:direct:{k}"] = sum(1 for m in ids if counts[m] >= k)
            values[f"p{p}:direct:{k}:harm"] = sum(harm[m] for m in ids if counts[m] >= k)
        inferred = [m for _k, ids in rounds["inferred"] for m in ids]
        if inferred:
            values[f"p{p}:inferred"] = sum(
                min(counts[m], targets[m].desired) - min(counts[m], targets[m].baseline)
                for m in inferred
            )
    return values


Rounds = dict[str, list[tuple[int, list[str]]]]


def _class_rounds(problem: PlacementProblem) -> list[tuple[int, Rounds]]:
    """Per class, highest first: its baseline rounds, direct rounds and inferred members."""
    cached = problem.memo.get("class_rounds")
    if cached is None:
        cached = problem.memo["class_rounds"] = [
            (
                p,
                {
                    "baseline": [
                        (k, baseline_members(problem, p, k)) for k in baseline_rounds(problem, p)
                    ],
                    "direct": [
                        (k, round_members(problem, p, k)) for k in direct_rounds(problem, p)
                    ],
                    "inferred": [(0, inferred_members(problem, p))],
                },
            )
            for p in problem.priorities
        ]
    return cached  # type: ignore[return-value]


def direct_rounds(problem: PlacementProblem, priority: int) -> list[int]:
    """The k values with at least one direct-demand replica k in this class."""
    ks: set[int] = set()
    for model in problem.models:
        if model.priority != priority:
            continue
        tgt = problem.targets[model.model_id]
        if tgt.evidence is Evidence.DIRECT:
            ks.update(range(tgt.baseline + 1, tgt.desired + 1))
    return sorted(ks)


def round_members(problem: PlacementProblem, priority: int, k: int) -> list[str]:
    out = []
    for model in problem.models:
        tgt = problem.targets[model.model_id]
        if (
            model.priority == priority
            and tgt.evidence is Evidence.DIRECT
            and tgt.baseline < k <= tgt.desired
        ):
            out.append(model.model_id)
    return out


def inferred_members(problem: PlacementProblem, priority: int) -> list[str]:
    return [
        m.model_id
        for m in problem.models
        if m.priority == priority
        and problem.targets[m.model_id].evidence is Evidence.INFERRED
        and problem.targets[m.model_id].desired > problem.targets[m.model_id].baseline
    ]


def levels(problem: PlacementProblem) -> list[Level]:
    out = [Level("pinned", "max", True)]
    for p in problem.priorities:
        for k in baseline_rounds(problem, p):
            out.append(Level(f"p{p}:baseline:{k}", "max", True))
        for k in direct_rounds(problem, p):
            out.append(Level(f"p{p}:direct:{k}", "max", True))
            out.append(Level(f"p{p}:direct:{k}:harm", "max", True))
        if inferred_members(problem, p):
            out.append(Level(f"p{p}:inferred", "max", True))
    out += [
        Level("domain_shortfall", "min", False),
        Level("disruption", "min", False),
        Level("quality", "max", False),
        Level("spare_hosts", "max", False),
    ]
    return out


# ----------------------------------------------------------------------------- coefficients


def startup_seconds(problem: PlacementProblem, cand: Candidate) -> float:
    model = problem.model_by_id[cand.model_id]
    if cand.incumbent is ResidencyState.READY:
        return 0.0
    # A copy already loading or warming does not pay the artifact load twice.
    cached = cand.incumbent is not None or cand.cached
    return problem.snapshot.startup_s(model, cand.host_id, cached=cached)


def disruption_cost(problem: PlacementProblem, cand: Candidate) -> int:
    """Cost of not keeping an incumbent: priority-weighted warm-back time."""
    if cand.incumbent is None:
        return 0
    model = problem.model_by_id[cand.model_id]
    warm_back = model.warm_estimate_s + (0.0 if cand.cached else model.load_estimate_s)
    state_weight = 2 if cand.incumbent is ResidencyState.READY else 1
    return (model.priority + 1) * state_weight * (10 + math.ceil(min(warm_back, 3600.0)))


def _performance_boost(problem: PlacementProblem, model_id: str) -> float:
    model = problem.model_by_id[model_id]
    demand = problem.snapshot.demand.get(model_id)
    if demand is None:
        return 1.0
    per_replica = model.replica_concurrency * model.target_utilization
    ratio = demand.offered_concurrency / per_replica if per_replica > 0 else 1.0
    return max(1.0, min(problem.snapshot.policy.max_performance_boost, ratio))


LOAD_POINTS_PER_TASK = 20  # per active task or queued request on the host
LOAD_POINTS_CAP = 100
LATENCY_MS_PER_POINT = 50  # measured latency of the model on the host
LATENCY_POINTS_CAP = 100
HOST_PRIORITY_POINTS = 10  # per step of the host's priority (0-10)


def host_terms(snap: FleetSnapshot, host: Host, model_id: str) -> int:
    """The quality terms a host adds for one model beyond locality, startup, speed, fit,
    scarcity and throttling: its priority raises the score; its load, the model's measured
    latency there and the model's failed starts there (bounded) lower it."""
    load = min(LOAD_POINTS_CAP, LOAD_POINTS_PER_TASK * (host.active_tasks + host.queue_depth))
    latency = host.measured_latency_ms.get(model_id, 0.0)
    slow = min(LATENCY_POINTS_CAP, math.ceil(latency / LATENCY_MS_PER_POINT))
    policy = snap.policy
    failures = host.start_failures.get(model_id, 0)
    penalty = min(policy.start_failure_penalty_cap, policy.start_failure_penalty * failures)
    return HOST_PRIORITY_POINTS * host.priority - load - slow - penalty


def _scarce_peers(problem: PlacementProblem) -> dict[str, int]:
    """Per host: how many constrained models (≤ 2 candidate hosts) depend on it."""
    counts: dict[str, int] = {}
    for model in problem.models:
        cands = problem.candidates_of_model(model.model_id)
        if 0 < len(cands) <= 2:
            for cand in cands:
                counts[cand.host_id] = counts.get(cand.host_id, 0) + 1
    return counts


def _scarce(problem: PlacementProblem) -> dict[str, int]:
    found = problem.memo.get("scarce_peers")
    if found is None:
        found = problem.memo["scarce_peers"] = _scarce_peers(problem)
    return found  # type: ignore[return-value]


def quality_scores(problem: PlacementProblem) -> dict[tuple[str, str], int]:
    """Static placement-quality score of every candidate (higher is better), memoized."""
    cached = problem.memo.get("quality_scores")
    if cached is None:
        cached = problem.memo["quality_scores"] = _quality_scores(problem)
    return cached  # type: ignore[return-value]


def _quality_scores(problem: PlacementProblem) -> dict[tuple[str, str], int]:
    snap = problem.snapshot
    hosts = {h.host_id: h for h in snap.hosts}
    scarce = _scarce(problem)
    boost = {m.model_id: _performance_boost(problem, m.model_id) for m in problem.models}
    widely = {m.model_id: len(problem.candidates_of_model(m.model_id)) > 2 for m in problem.models}

    def score_of(cand: Candidate) -> int:
        host = hosts[cand.host_id]
        budget = problem.host_by_id[cand.host_id]
        if cand.incumbent is ResidencyState.READY:
            score = 1000
        elif cand.incumbent is not None:
            score = 800
        elif cand.cached:
            score = 400
        else:
            score = 0
        score -= min(300, math.ceil(startup_seconds(problem, cand)))
        measured = host.measured_tokens_per_s.get(cand.model_id)
        perf = measured if measured is not None else host.hardware_tokens_per_s
        score += round(min(100.0, perf) * boost[cand.model_id])
        if budget.allocatable_mb > 0:
            score += round(50 * min(1.0, cand.memory_mb / budget.allocatable_mb))
        if widely[cand.model_id]:
            score -= 30 * scarce.get(cand.host_id, 0)
        if host.state is HostState.THROTTLED:
            score -= 50
        return score + host_terms(snap, host, cand.model_id)

    # Hosts of one shape give a model the same score unless the host has its own measured
    # throughput or learned startup for it: those figures are all the score reads of a host
    # but its ID, so the score is computed once per (model, host shape, candidate figures).
    # Hosts of one build shape (problem.py) also have equal candidates, model by model, so a
    # host of a known (build shape, quality class) copies that pair's whole score list.
    classes = quality_classes(problem)
    shapes: dict[str, int] = problem.memo.get("build_shapes", {})  # type: ignore[assignment]
    memo: dict[tuple[object, ...], int] = {}
    by_shape: dict[tuple[int, tuple[object, ...]], list[int]] = {}
    group_of: dict[tuple[int, tuple[object, ...]], int] = {}
    host_group: dict[str, int] = {}  # hosts of a (build shape, quality class): its group
    tables: list[dict[str, int]] = []  # per group: model -> score
    problem.memo["quality_groups"] = (host_group, tables)
    per_host: list[list[int]] = []  # each host's scores, in candidates_of_host order
    for budget in problem.hosts:
        host_id = budget.host_id
        cands = problem.candidates_of_host(host_id)
        if not cands:
            continue
        klass = classes[host_id]
        shape = shapes.get(host_id)
        if klass is not None and shape is not None:
            found_scores = by_shape.get((shape, klass))
            if found_scores is None:
                found_scores = by_shape[(shape, klass)] = [score_of(c) for c in cands]
                tables.append(dict(zip(map(_MODEL, cands), found_scores, strict=True)))
                group_of[(shape, klass)] = len(tables) - 1
            host_group[host_id] = group_of[(shape, klass)]
            per_host.append(found_scores)
            continue
        host = hosts[host_id]
        figures = klass or _quality_shape(problem, host)
        own: list[int] = []
        for cand in cands:
            if klass is None and _own_figures(snap, host, cand.model_id):
                own.append(score_of(cand))
                continue
            memo_key = (cand.model_id, figures, cand.incumbent, cand.cached, cand.memory_mb)
            found = memo.get(memo_key)
            if found is None:
                found = memo[memo_key] = score_of(cand)
            own.append(found)
        per_host.append(own)
    scores = chain.from_iterable(per_host)
    if problem.memo.get("host_major"):
        # build_problem lists every host's candidates in host order in `problem.candidates`,
        # so its own key tuples are reused: no new key per candidate (3.65 M at 10,000 hosts).
        return dict(zip(problem.candidates, scores, strict=True))
    hosts_cands = (problem.candidates_of_host(b.host_id) for b in problem.hosts)
    return dict(zip(map(_KEY, chain.from_iterable(hosts_cands)), scores, strict=True))


_KEY = operator.itemgetter(0, 1)
_MODEL = operator.itemgetter(0)
_HOST = operator.itemgetter(1)


def model_scores(
    problem: PlacementProblem, cands: list[Candidate], host_ids: list[str] | None = None
) -> list[int]:
    """`quality_scores` of one model's candidates, in their order (memoized for the problem's
    own `candidates_of_model` list: the result is shared, never mutate it). Where every host is in a
    quality group (a build shape and quality class: one score per model), C-level maps over
    a table per group instead of one lookup per candidate in the fleet-wide table. `host_ids`:
    the candidates' host IDs when the caller has them (reading them touches every candidate
    object, one cache miss each at millions of candidates)."""
    scores = quality_scores(problem)
    if not cands:
        return []
    model_id = cands[0].model_id
    own = cands is problem.candidates_of_model(model_id)
    memo: dict[str, list[int]] = problem.memo.setdefault("model_scores", {})  # type: ignore[assignment]
    if own and model_id in memo:
        return memo[model_id]
    groups_memo: tuple[dict[str, int], list[dict[str, int]]]
    groups_memo = problem.memo["quality_groups"]  # type: ignore[assignment]
    host_group, tables = groups_memo
    groups = list(map(host_group.get, host_ids if host_ids is not None else map(_HOST, cands)))
    if None in groups:
        out = list(map(scores.__getitem__, map(_KEY, cands)))
    else:
        table = [t.get(model_id, 0) for t in tables]  # the model is on every host of its groups
        out = list(map(table.__getitem__, cast("list[int]", groups)))
    if own:
        memo[model_id] = out
    return out


def _own_figures(snap: FleetSnapshot, host: Host, model_id: str) -> bool:
    """The host has its own measured throughput, latency, failed starts or learned startup
    for the model."""
    learned = snap.learned_startup.get(model_id)
    return (
        model_id in host.measured_tokens_per_s
        or model_id in host.measured_latency_ms
        or model_id in host.start_failures
        or bool(learned and host.host_id in learned)
    )


def _quality_shape(problem: PlacementProblem, host: Host) -> tuple[object, ...]:
    """All that the static score reads of a host but its ID and its own per-model figures."""
    return (
        host.hardware_tokens_per_s,
        problem.host_by_id[host.host_id].allocatable_mb,
        _scarce(problem).get(host.host_id, 0),
        host.state is HostState.THROTTLED,
        host.priority,
        host.active_tasks + host.queue_depth,
    )


def quality_classes(problem: PlacementProblem) -> dict[str, tuple[object, ...] | None]:
    """Per host: its `_quality_shape` when it has no measured throughput and no learned
    startup of its own for any model (two hosts of one class then give equal candidates
    equal scores), else None (its scores are computed candidate by candidate)."""
    cached = problem.memo.get("quality_classes")
    if cached is None:
        snap = problem.snapshot
        learned_hosts = {h for per_host in snap.learned_startup.values() for h in per_host}
        cached = problem.memo["quality_classes"] = {
            host.host_id: None
            if host.measured_tokens_per_s
            or host.measured_latency_ms
            or host.start_failures
            or host.host_id in learned_hosts
            else _quality_shape(problem, host)
            for host in snap.hosts
        }
    return cached  # type: ignore[return-value]


# ----------------------------------------------------------------------------- scoring


def placed_counts(problem: PlacementProblem, placed: Iterable[tuple[str, str]]) -> dict[str, int]:
    counts = {m.model_id: 0 for m in problem.models}
    for f in problem.fixed:
        counts[f.model_id] = counts.get(f.model_id, 0) + 1
    for model_id, _host in placed:
        counts[model_id] = counts.get(model_id, 0) + 1
    return counts


def score_placement(problem: PlacementProblem, placed: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Value of every level for a set of placed candidate pairs (fixed replicas implied)."""
    chosen = sorted(set(placed))
    counts = placed_counts(problem, chosen)
    values: dict[str, int] = {}
    pinned = sum(1 for key in chosen if problem.candidates[key].pinned)
    pinned += sum(
        1 for f in problem.fixed if f.host_id in problem.model_by_id[f.model_id].pinned_hosts
    )
    values["pinned"] = pinned
    values.update(replica_values(problem, counts))
    domains: dict[str, set[str]] = {}
    for f in problem.fixed:
        domains.setdefault(f.model_id, set()).add(problem.host_by_id[f.host_id].domain)
    for model_id, host_id in chosen:
        domains.setdefault(model_id, set()).add(problem.host_by_id[host_id].domain)
    values["domain_shortfall"] = sum(
        max(0, min(m.min_failure_domains, counts[m.model_id]) - len(domains.get(m.model_id, ())))
        for m in problem.models
    )
    chosen_set = set(chosen)
    values["disruption"] = sum(  # the incumbents only: not a scan of every candidate
        disruption_cost(problem, cand)
        for cand in problem.incumbent_candidates
        if (cand.model_id, cand.host_id) not in chosen_set
    )
    scores = quality_scores(problem)
    values["quality"] = sum(scores[key] for key in chosen)
    used_hosts = {h for _m, h in chosen} | {f.host_id for f in problem.fixed}
    values["spare_hosts"] = sum(
        1 for h in problem.hosts if h.admitting and h.host_id not in used_hosts
    )
    return values


def compare(
    problem: PlacementProblem,
    a: dict[str, int],
    b: dict[str, int],
    *,
    replica_levels_only: bool = False,
) -> int:
    """Lexicographic comparison: 1 if `a` is better, -1 if worse, 0 if equal."""
    for level in levels(problem):
        if replica_levels_only and not level.replica_level:
            break
        va, vb = a.get(level.name, 0), b.get(level.name, 0)
        if va == vb:
            continue
        better = va > vb if level.sense == "max" else va < vb
        return 1 if better else -1
    return 0
