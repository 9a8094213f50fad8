"""The portfolio problem of one tick, shared by both engines (pure).

Sets
    W   active workloads (snapshot `workloads`), W_a ⊆ W admitted by the evidence gates
    M_w models whose workload_scores name w; C ⊆ {(w, m)} the currently feasible pairs
    B   the base plan's placements (baseline, pinned, direct, inferred: solved first, as today)
    K   candidate keys (m, h) of the augmented placement problem: every model of some M_w is
        desired up to base + Σ_w req(w, m), so its pairs pass the same static filters
Fixed first
    every key of B is a constant (x = 1); hosts where the base plan stages a preemption or a
    repack are left out entirely (their placements stay as the base plan has them), so the
    portfolio never evicts or moves a baseline, pinned or directly demanded replica.
Feasibility
    (w, m) is feasible when m already has a base replica or some key of m fits alongside B
    (Ledger: both memory ledgers, slots, colocation, disk, the same rules as placement).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from grid.fleet import (
    LIVE_STATES,
    FleetSnapshot,
    ModelProfile,
    Outcome,
    Plan,
    PortfolioPolicy,
    ResidencyState,
    WorkloadForecast,
)
from grid.planner.cpsat import Ledger
from grid.planner.levels import quality_scores, startup_seconds
from grid.planner.narrow import portfolio_targets
from grid.planner.portfolio.evidence import Evidence, bonus_of, evidence_of, outcome_table
from grid.planner.portfolio.gates import (
    Gate,
    GateResult,
    gate_of,
    has_direct_demand,
    in_media_band,
    ordinary_gate,
    replicas_needed,
    weak_evidence,
)
from grid.planner.portfolio.reserve import reserved_hosts
from grid.planner.portfolio.spare import effective_spare_reserve, spare_capacity_proof
from grid.planner.portfolio.speed import UNIT, replica_weights
from grid.planner.problem import PlacementProblem
from grid.planner.problem_build import build_problem
from grid.planner.targets import HostIndex, Target, compute_targets, model_target

Key = tuple[str, str]
TENTHS = 10  # utilities enter CP-SAT in tenths of a point


@dataclass(frozen=True)
class PairInfo:
    """One (workload, model) candidate: feasibility, cost and value."""

    workload: str
    model_id: str
    score: float
    feasible: bool
    rejection: str | None  # "code: sentence" when infeasible
    blocked_by_residency: bool
    keys: tuple[Key, ...]  # keys of the model that fit alongside the base plan
    best_host: str | None
    startup_s: float | None
    transition_penalty: float
    evidence: Evidence
    bonus: float
    exploit_utility: float  # without the optimism bonus
    need: int  # req(w, m): replicas this workload asks of the model
    weak: bool

    @property
    def utility(self) -> float:
        return self.exploit_utility + self.bonus

    def utility_tenths(self, *, with_bonus: bool) -> int:
        value = self.utility if with_bonus else self.exploit_utility
        return round(value * TENTHS)


@dataclass(frozen=True)
class Carried:
    """A replacement authorization read from the snapshot's forecasts and still in effect
    (replace.py): `model_id` takes `host_id` once `victims` are gone."""

    workload: str
    model_id: str
    host_id: str
    victims: tuple[str, ...]
    live: tuple[str, ...]  # victims still live on the host
    placed: bool  # the beneficiary is already live there (loading, warming)
    replaced: tuple[str, ...] = ()  # workloads whose model the replacement takes away


def confident_pressure(forecast: WorkloadForecast | None, policy: PortfolioPolicy) -> float:
    """Confidence-weighted device-time pressure: offered × min(1, observations / full)."""
    if forecast is None:
        return 0.0
    return forecast.offered_concurrency * min(
        1.0, forecast.observations / policy.service_full_requests
    )


def still_beats(snap: FleetSnapshot, workload: str, replaced: tuple[str, ...] | list[str]) -> bool:
    """The mature-beneficiary pressure test on these forecasts: w's confident pressure is at
    least `mature_replacement_ratio` times the replaced workloads' together."""
    policy = snap.policy.portfolio
    mine = confident_pressure(snap.workloads.get(workload), policy)
    against = sum(confident_pressure(snap.workloads.get(w), policy) for w in replaced)
    return mine > 0 and mine >= policy.mature_replacement_ratio * against


@dataclass
class PortfolioContext:
    snapshot: FleetSnapshot
    policy: PortfolioPolicy
    base_plan: Plan
    problem: PlacementProblem  # augmented targets
    base_keys: frozenset[Key]  # base placements that are candidate keys (fixed at 1)
    outside_hosts: frozenset[str]  # hosts with staged preemptions/repacks: left as planned
    base_counts: dict[str, int]  # replicas of each model in the base plan (fixed included)
    base_level: dict[str, int]  # the base targets' desired count: workload replicas go beyond
    # Base replicas beyond the base targets' desired count (idle incumbents the base plan keeps,
    # e.g. through the scale-down cooldown): already serving, they count as workload replicas.
    surplus: dict[str, int]
    base_desired: dict[str, int]  # the base targets' desired counts (cooldown holds included)
    gates: dict[str, GateResult]
    pairs: dict[tuple[str, str], PairInfo]  # every (w, m) with a score, feasible or not
    room: dict[str, int]  # workload replicas each model may receive
    spare_reserve: int
    # Admitted on ordinary evidence with no feasible candidate at all: whole-workload starvation
    # (a starvation reclaim may serve it, preempt.py; reserve.py holds its draining room).
    starved: frozenset[str] = frozenset()
    # Tenths of a replica at measured speed that one replica on the host is worth (speed.py).
    weights: dict[Key, int] = field(default_factory=dict)
    memo: dict[str, list[Key]] = field(default_factory=dict)  # derived key lists, once
    # Replacement authorizations carried in the forecasts and still in effect (replace.py);
    # their hosts are held: in `outside_hosts` for this tick's decision.
    authorized: dict[str, Carried] = field(default_factory=dict)
    held_rooms: frozenset[str] = frozenset()  # draining rooms held for starved workloads

    @property
    def admitted(self) -> list[str]:
        return sorted(w for w, g in self.gates.items() if g.admitted)

    def feasible_pairs(self, workload: str) -> list[PairInfo]:
        return [p for (w, _m), p in sorted(self.pairs.items()) if w == workload and p.feasible]

    @property
    def candidate_models(self) -> list[str]:
        return sorted(
            {
                p.model_id
                for p in self.pairs.values()
                if p.feasible and self.gates[p.workload].admitted
            }
        )

    def variable_keys(self) -> list[Key]:
        """Keys that are CP-SAT variables: base keys (fixed) and the candidate models' keys."""
        cached = self.memo.get("variable_keys")
        if cached is None:
            models = set(self.candidate_models)
            cached = self.memo["variable_keys"] = sorted(
                k
                for k in self.problem.candidates
                if k[1] not in self.outside_hosts and (k in self.base_keys or k[0] in models)
            )
        return list(cached)

    def outside_keys(self) -> list[Key]:
        return sorted(k for k in self.base_keys if k[1] in self.outside_hosts)

    def off_pin_allowance(self, model_id: str, workload: int) -> int | None:
        """Room off the pins (None: no pins) when the model has `workload` workload replicas.
        Pins are reserved, never substituted: placements off the pins ≤ the final desired count
        max(0, max(base desired, base_level + workload) − |pins| − fixed replicas off the pins)."""
        pins = set(self.problem.model_by_id[model_id].pinned_hosts)
        if not pins:
            return None
        fixed_off = sum(
            1 for f in self.problem.fixed if f.model_id == model_id and f.host_id not in pins
        )
        return max(0, self.final_desired(model_id, workload) - len(pins) - fixed_off)

    def final_desired(self, model_id: str, workload: int) -> int:
        """The plan's desired count of the model with `workload` workload replicas desired."""
        return max(self.base_desired.get(model_id, 0), self.base_level.get(model_id, 0) + workload)

    def weight(self, key: Key) -> int:
        return self.weights.get(key, UNIT)

    def forecast(self, workload: str) -> WorkloadForecast:
        return self.snapshot.workloads[workload]


def _base_keys(plan: Plan, problem: PlacementProblem) -> tuple[frozenset[Key], frozenset[str]]:
    touched = {p.host_id for p in plan.preemptions} | {
        p.relocated_to for p in plan.preemptions if p.relocated_to
    }
    keys = frozenset(
        (a.model_id, a.host_id)
        for a in plan.assignments
        if (a.model_id, a.host_id) in problem.candidates
    )
    return keys, frozenset(touched)


CAPACITY_REFUSALS = frozenset({"colocation_or_slots_full"})
RESIDENCY_REFUSALS = frozenset({"residency_not_reusable", "colocation_excluded"})


def _counted(counts: Counter[str]) -> str:
    ranked = sorted(counts.items(), key=lambda i: (-i[1], i[0]))[:3]
    return ", ".join(f"{code} on {n} host(s)" for code, n in ranked)


def _rejection(problem: PlacementProblem, ledger: Ledger, model_id: str) -> tuple[str, bool]:
    """Why no key of the model fits now, and whether live residencies (only) block it.

    no_headroom        a compatible host is full now (ledger blockers, or full model slots)
    no_eligible_host   no host can take the model at all (the static refusal codes); flagged
                       as blocked by residency when only live residencies refuse it
    """
    full: Counter[str] = Counter(
        b.family
        for cand in problem.candidates_of_model(model_id)
        for b in ledger.host_blockers(cand)
    )
    refused: Counter[str] = Counter()
    residency_only = True
    for (m, _h), why in problem.refusals.items():
        if m != model_id:
            continue
        codes = set(why)
        if codes and codes <= CAPACITY_REFUSALS:
            full["slots"] += 1
            continue
        refused.update(codes)
        residency_only = (
            residency_only and bool(codes) and codes <= RESIDENCY_REFUSALS | CAPACITY_REFUSALS
        )
    if full:
        return f"no_headroom: {_counted(full)}", False
    if not refused:
        return "no_eligible_host: the fleet has no admitting host", False
    return f"no_eligible_host: {_counted(refused)}", residency_only


def ready_on_admitting(snap: FleetSnapshot, problem: PlacementProblem) -> set[str]:
    """Models with a READY replica on a host that admits work now. A down, silent or draining
    host still reports its last residencies; they serve nobody, so they neither make a model
    "resident" (no transition penalty, the media RESIDENT gate) nor count as current service."""
    out: set[str] = set()
    for h in snap.hosts:
        budget = problem.host_by_id.get(h.host_id)
        if budget is None or not budget.admitting:
            continue
        out.update(r.model_id for r in h.residencies if r.state is ResidencyState.READY)
    return out


def carried_authorizations(snap: FleetSnapshot, problem: PlacementProblem) -> dict[str, Carried]:
    """The forecasts' replacement authorizations still in effect: the workload passes the
    ordinary evidence gate, the host admits work, the beneficiary scores the workload and is
    not READY there yet (then it is fulfilled and the mapping in effect carries on)."""
    policy = snap.policy.portfolio
    out: dict[str, Carried] = {}
    for w, forecast in sorted(snap.workloads.items()):
        auth = forecast.replacement
        if auth is None or not ordinary_gate(forecast, policy):
            continue
        host = snap.host(auth.host_id)
        budget = problem.host_by_id.get(auth.host_id)
        profile = snap.model(auth.model_id)
        if host is None or budget is None or not budget.admitting:
            continue
        if profile is None or w not in profile.workload_scores:
            continue
        states = {r.model_id: r.state for r in host.residencies if r.is_managed}
        mine = states.get(auth.model_id)
        if mine is ResidencyState.READY:
            continue
        live = tuple(v for v in auth.victims if states.get(v) in LIVE_STATES)
        placed = mine in (ResidencyState.LOADING, ResidencyState.WARMING)
        if not placed and not still_beats(snap, w, auth.replaced):
            continue  # the demand moved before the room changed hands: the authority lapses
        out[w] = Carried(
            w, auth.model_id, auth.host_id, tuple(auth.victims), live, placed, tuple(auth.replaced)
        )
    return out


def demand_levels(snap: FleetSnapshot, targets: dict[str, Target]) -> dict[str, int]:
    """Per model, the replicas its base target asks for on account of demand, pins and bounds:
    the target itself, except that replicas held only by the scale-down cooldown (reason
    `cooldown`) are left out; those idle incumbents are the portfolio's to keep or release."""
    index = HostIndex(snap)
    out: dict[str, int] = {}
    for m in snap.models:
        target = targets[m.model_id]
        if target.reason == "cooldown":
            uncooled = m.model_copy(update={"scale_down_cooldown_s": -1.0})
            out[m.model_id] = min(target.desired, model_target(uncooled, snap, index).desired)
        else:
            out[m.model_id] = target.desired
    return out


@dataclass(frozen=True)
class _Scene:
    """What every (workload, model) pair of the tick is judged against."""

    snap: FleetSnapshot
    policy: PortfolioPolicy
    problem: PlacementProblem
    ledger: Ledger  # the base plan's kept placements, fixed
    base_keys: frozenset[Key]
    outside: frozenset[str]
    counts: Counter[str]  # replicas of each model in the base plan
    ready_models: set[str]
    quality: dict[Key, int]
    outcomes: dict[Key, Outcome]


def _scene(
    snap: FleetSnapshot,
    base_plan: Plan,
    problem: PlacementProblem,
    base_keys: frozenset[Key],
    outside: frozenset[str],
) -> _Scene:
    return _Scene(
        snap=snap,
        policy=snap.policy.portfolio,
        problem=problem,
        ledger=Ledger(problem, [k for k in base_keys if k[1] not in outside]),
        base_keys=base_keys,
        outside=outside,
        counts=Counter(a.model_id for a in base_plan.assignments),
        ready_models=ready_on_admitting(snap, problem),
        quality=quality_scores(problem),
        outcomes=outcome_table(snap),
    )


def _pair(sc: _Scene, m: ModelProfile, word: str, score: float) -> PairInfo:
    """Feasibility, cost and value of serving `word` with model `m` alongside the base plan."""
    snap, policy, problem, base_keys = sc.snap, sc.policy, sc.problem, sc.base_keys
    forecast = snap.workloads[word]
    fits = [
        c
        for c in problem.candidates_of_model(m.model_id)
        if c.host_id not in sc.outside
        and ((c.model_id, c.host_id) in base_keys or not sc.ledger.host_blockers(c))
    ]
    keys = tuple(sorted((c.model_id, c.host_id) for c in fits))
    feasible = bool(keys) or sc.counts[m.model_id] > 0
    rejection, residency = (None, False) if feasible else _rejection(problem, sc.ledger, m.model_id)
    startups = [
        0.0 if k in base_keys else startup_seconds(problem, problem.candidates[k]) for k in keys
    ]
    startup = min(startups) if startups else (0.0 if feasible else None)
    best = max(keys, key=lambda k: (k in base_keys, sc.quality[k], k[1]))[1] if keys else None
    penalty = 0.0
    if m.model_id not in sc.ready_models and sc.counts[m.model_id] == 0:
        penalty = min(policy.max_transition_penalty, (startup or 0.0) / 4.0)
    ev = evidence_of(sc.outcomes.get((m.model_id, word)), policy)
    suit = (1.0 - ev.quality_confidence) * score + ev.quality_confidence * (ev.quality or 0.0)
    exploit = 100.0 * suit - 20.0 * ev.service_confidence * (1.0 - ev.success_rate) - penalty
    weak = weak_evidence(
        forecast,
        policy,
        direct_demand=has_direct_demand(snap, m.model_id),
        fresh_success=ev.fresh_success,
    )
    return PairInfo(
        workload=word,
        model_id=m.model_id,
        score=score,
        feasible=feasible,
        rejection=rejection,
        blocked_by_residency=residency,
        keys=keys,
        best_host=best,
        startup_s=startup,
        transition_penalty=round(penalty, 3),
        evidence=ev,
        bonus=bonus_of(ev, policy) if feasible else 0.0,
        exploit_utility=round(exploit, 3),
        need=replicas_needed(
            m,
            forecast,
            policy,
            snap.policy.demand_headroom_fraction,
            weak=weak,
            serving=m.model_id in sc.ready_models and ev.fresh_success,
        ),
        weak=weak,
    )


def _pairs(sc: _Scene) -> dict[tuple[str, str], PairInfo]:
    """Every (workload, model) with a score and an active workload, feasible or not."""
    pairs: dict[tuple[str, str], PairInfo] = {}
    for m in sorted(sc.snap.models, key=lambda p: p.model_id):
        for word, score in sorted(m.workload_scores.items()):
            if word in sc.snap.workloads:
                pairs[(word, m.model_id)] = _pair(sc, m, word, score)
    return pairs


def _gates(sc: _Scene, pairs: dict[tuple[str, str], PairInfo]) -> dict[str, GateResult]:
    """The evidence gate of every active workload."""
    policy = sc.policy
    gates: dict[str, GateResult] = {}
    for word, forecast in sorted(sc.snap.workloads.items()):
        proof = False
        if not ordinary_gate(forecast, policy) and in_media_band(word, forecast, policy):
            proof = any(
                spare_capacity_proof(sc.problem, sc.ledger, p.keys, policy)
                for (w, _m), p in pairs.items()
                if w == word and p.feasible
            )
        candidate = any(p.feasible for (w, _m), p in pairs.items() if w == word)
        incumbent = next(
            (
                m
                for (w, m), p in sorted(pairs.items())
                if w == word and p.feasible and m in sc.ready_models and p.evidence.fresh_success
            ),
            None,
        )
        if word not in policy.media_workloads:
            incumbent = None  # text traffic is continuous; sparse bursts are image/video jobs
        gates[word] = gate_of(
            word,
            forecast,
            policy,
            proof,
            has_candidate=candidate,
            resident_incumbent=incumbent,
        )
    return gates


def _starved(
    gates: dict[str, GateResult], pairs: dict[tuple[str, str], PairInfo]
) -> frozenset[str]:
    return frozenset(
        w
        for w, g in gates.items()
        if g.gate is Gate.ORDINARY
        and not any(p.feasible for (ww, _m), p in pairs.items() if ww == w)
    )


def _cap_unproven(
    pairs: dict[tuple[str, str], PairInfo],
    gates: dict[str, GateResult],
    authorized: dict[str, Carried],
    policy: PortfolioPolicy,
) -> None:
    """A media canary is one replica whatever the concurrency asks, and so is an authorized
    replacement until a fresh success validates it (in place)."""
    for key, p in list(pairs.items()):
        auth = authorized.get(p.workload)
        unvalidated = (
            auth is not None and auth.model_id == p.model_id and not p.evidence.fresh_success
        )
        if gates[p.workload].gate is Gate.MEDIA_CANARY or unvalidated:
            pairs[key] = replace(p, need=min(p.need, policy.canary_max_replicas), weak=True)


def _raise_targets(
    snap: FleetSnapshot,
    base_targets: dict[str, Target],
    levels: dict[str, int],
    pairs: dict[tuple[str, str], PairInfo],
    gates: dict[str, GateResult],
) -> tuple[dict[str, Target], dict[str, int]]:
    """The augmented targets (each model desired up to its level plus what admitted workloads
    ask of it, within its ceiling) and the workload room each model receives."""
    final = dict(base_targets)
    room: dict[str, int] = {}
    for m in snap.models:
        asked = sum(
            p.need
            for (w, mid), p in pairs.items()
            if mid == m.model_id and p.feasible and gates[w].admitted
        )
        level = levels[m.model_id]
        ceiling = max(m.max_replicas, len(set(m.pinned_hosts)))
        desired = max(level, min(ceiling, level + asked))
        room[m.model_id] = desired - level
        if desired > base_targets[m.model_id].desired:
            final[m.model_id] = replace(
                base_targets[m.model_id], desired=desired, reason="portfolio"
            )
    return final, room


def _spare_reserve(
    problem: PlacementProblem,
    base_keys: frozenset[Key],
    pairs: dict[tuple[str, str], PairInfo],
    gates: dict[str, GateResult],
    surplus: dict[str, int],
    policy: PortfolioPolicy,
) -> int:
    asked_by_word = {
        w: min(max(0, p.need - surplus.get(p.model_id, 0)) for p in options)
        for w in sorted(gates)
        if gates[w].admitted
        and (options := [p for (ww, _m), p in pairs.items() if ww == w and p.feasible])
    }
    usable = {
        w: {
            h
            for p in pairs.values()
            if p.workload == w and p.feasible
            for m, h in p.keys
            if (m, h) not in base_keys
        }
        for w in asked_by_word
    }
    return effective_spare_reserve(problem, base_keys, asked_by_word, usable, policy)


def build_context(
    snap: FleetSnapshot,
    base_plan: Plan,
    targets: dict[str, Target] | None = None,
    problem: PlacementProblem | None = None,
) -> PortfolioContext:
    """`targets`: the base plan's targets (default: compute_targets of the snapshot);
    `problem`: the portfolio's placement problem when the caller built it (the pipeline builds
    it once, narrow.py), else built here with `portfolio_targets`."""
    policy = snap.policy.portfolio
    base_targets = targets if targets is not None else compute_targets(snap)
    scored = {
        m.model_id for m in snap.models if any(w in snap.workloads for w in m.workload_scores)
    }
    if problem is None:
        problem = build_problem(snap, portfolio_targets(snap, base_targets, scored))
    base_keys, outside = _base_keys(base_plan, problem)
    authorized = carried_authorizations(snap, problem)
    outside = outside | frozenset(a.host_id for a in authorized.values())
    sc = _scene(snap, base_plan, problem, base_keys, outside)
    pairs = _pairs(sc)
    gates = _gates(sc, pairs)
    starved = _starved(gates, pairs)
    reserved = reserved_hosts(snap, problem, base_keys, (m for (w, m) in pairs if w in starved))
    _cap_unproven(pairs, gates, authorized, policy)
    levels = demand_levels(snap, base_targets)
    problem.targets, room = _raise_targets(snap, base_targets, levels, pairs, gates)
    surplus = {m: max(0, sc.counts[m] - n) for m, n in levels.items()}
    return PortfolioContext(
        snapshot=snap,
        policy=policy,
        base_plan=base_plan,
        problem=problem,
        base_keys=base_keys,
        outside_hosts=outside | reserved,
        base_counts=dict(sc.counts),
        base_level=levels,
        surplus=surplus,
        base_desired={m: t.desired for m, t in base_targets.items()},
        gates=gates,
        pairs=pairs,
        room=room,
        spare_reserve=_spare_reserve(problem, base_keys, pairs, gates, surplus, policy),
        starved=starved,
        weights=replica_weights(snap, problem),
        authorized=authorized,
        held_rooms=reserved,
    )
