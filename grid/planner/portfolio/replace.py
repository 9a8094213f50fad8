"""Mature-beneficiary replacement, and the authorization the plan carries until it is served
(pure).

The spec: "If that complete portfolio cannot fit ... the allocator normally retains the
demand-derived floor. A mature beneficiary with at least 1.5× the incumbent's confidence-
weighted device-time pressure may instead use one exact planner-proved replacement path.
Pinned models, configured minimum replicas, and directly named demand remain absolute fences.
The controller carries this authorization explicitly into the forecast, and an unvalidated
replacement is capped at one canary."

Trigger (preempt.py, after the stale and starvation-reclaim paths found nothing): a starved
workload w (ordinary evidence, no feasible candidate) whose candidate pair is not weak. Victims
on a host (`mature_victims`): READY managed replicas past their minimum residency and READY for
at least `policy.mature_victim_age_s` (30 minutes: two bursty workloads must not trade one room
back and forth every few minutes) of models with no pins, no configured minimum and no direct
named demand, that are not another speculative model's only active canary, each serving at
most one workload of the decided mapping, which w beats on (failures, pressure) (a busy replica
must serve one: live work that no workload explains is observed service); w's
confidence-weighted device-time pressure,
offered × min(1, observations / service_full_requests), must be at least
`policy.mature_replacement_ratio` (1.5) times the sum of the victims' workloads'. The path is
the feasibility scan's first acceptable one (paths.py) with the victims' floors waived for the
workloads w beats. The plan names the preemption and `portfolio.replacements[w]`.

Carry (context.carried_authorizations, `fulfil`): the controller copies `portfolio.replacements`
into the next snapshot's forecasts (`WorkloadForecast.replacement`). While the authorization is
in effect: the host is held (the portfolio adds nothing else there) and the live victims are
staged again (their replicas leave the plan, so a cooldown hold cannot keep them); once the
victims are gone the beneficiary is placed there (one replica: a canary until a fresh success
validates it) and w is mapped to it; the pre-warm does not ask for a victim's model meanwhile
(runtime/controller/workload_inputs.prewarm_demand). It ends when the beneficiary is READY
there, or is dropped when w's evidence lapses (not admitted), the host stops admitting, the
pressure test fails on the fresh forecasts against the workloads it replaced before the
beneficiary is live there (the demand moved: context.still_beats), or the room it was proved
on is taken after all (intended capacity is never treated as free).
"""

from __future__ import annotations

from grid.fleet import ModelProfile, ReplacementAuthorization, Residency, ResidencyState
from grid.planner.cpsat import Ledger
from grid.planner.portfolio.context import Carried, Key, PortfolioContext, confident_pressure
from grid.planner.portfolio.gates import has_direct_demand
from grid.planner.portfolio.score import failures_of, pressure_of


def fulfil(
    ctx: PortfolioContext, mapping: dict[str, str], placement: set[Key]
) -> tuple[dict[str, str], set[Key], dict[str, Carried]]:
    """Place each authorized beneficiary whose victims are gone (or keep it while it starts);
    returns the mapping, the placement and the authorizations still in effect."""
    mapping, placement = dict(mapping), set(placement)
    kept: dict[str, Carried] = {}
    for w, auth in sorted(ctx.authorized.items()):
        if auth.live and not auth.placed:
            kept[w] = auth  # still draining: staged again (preempt.py)
            continue
        key = (auth.model_id, auth.host_id)
        cand = ctx.problem.candidates.get(key)
        if cand is None:
            continue
        others = sorted(k for k in placement | set(ctx.base_keys) if k in ctx.problem.candidates)
        if key not in others and Ledger(ctx.problem, others).host_blockers(cand):
            continue  # the room was taken after all: the authorization lapses
        placement.add(key)
        mapping[w] = auth.model_id
        kept[w] = auth
    return mapping, placement, kept


def authorizations(
    kept: dict[str, Carried],
    staged: list[tuple[str, str, str, tuple[str, ...], tuple[str, ...]]],
) -> dict[str, ReplacementAuthorization]:
    """What the plan authorizes: the carried ones still in effect and the new ones."""
    out = {
        w: ReplacementAuthorization(
            model_id=a.model_id,
            host_id=a.host_id,
            victims=list(a.victims),
            replaced=list(a.replaced),
        )
        for w, a in kept.items()
    }
    for w, model_id, host_id, victims, replaced in staged:
        out[w] = ReplacementAuthorization(
            model_id=model_id, host_id=host_id, victims=list(victims), replaced=list(replaced)
        )
    return dict(sorted(out.items()))


def served_by(mapping: dict[str, str], model_id: str) -> list[str]:
    return sorted(w for w, m in mapping.items() if m == model_id)


def mature_victims(
    ctx: PortfolioContext, workload: str, host_id: str, mapping: dict[str, str]
) -> list[str]:
    """Incumbents on the host a mature beneficiary of `workload` may replace (least valuable
    first), before the pressure test of the whole set (`beats`)."""
    out: list[tuple[int, bool, str]] = []
    age = ctx.policy.mature_victim_age_s
    for res, profile in movable_on(ctx, host_id):
        if res.loaded_at is None or ctx.snapshot.now - res.loaded_at < age:
            continue
        serves = served_by(mapping, res.model_id)
        if len(serves) > 1 or (serves and not _beats(ctx, workload, serves[0])):
            continue
        if res.active_requests != 0 and not serves:
            continue  # live work no workload of the plan explains: observed service
        if _only_canary(ctx, res.model_id, serves):
            continue
        out.append((profile.priority, res.active_requests != 0, res.model_id))
    return [m for _p, _busy, m in sorted(out)]


def movable_on(ctx: PortfolioContext, host_id: str) -> list[tuple[Residency, ModelProfile]]:
    """The host's residencies that `movable` lets go, with their profiles."""
    host = ctx.snapshot.host(host_id)
    assert host is not None
    out = []
    for res in host.residencies:
        profile = movable(ctx, res)
        if profile is not None:
            out.append((res, profile))
    return out


def movable(ctx: PortfolioContext, res: Residency) -> ModelProfile | None:
    """The profile of a READY managed replica whose model no absolute fence protects (pins,
    a configured minimum, direct named demand) and that is past its minimum residency."""
    snap = ctx.snapshot
    if not res.is_managed or res.state is not ResidencyState.READY:
        return None
    profile = snap.model(res.model_id)
    if profile is None or profile.pinned_hosts or profile.min_replicas > 0:
        return None
    if has_direct_demand(snap, res.model_id):
        return None
    if res.loaded_at is None or snap.now - res.loaded_at < profile.min_residency_s:
        return None
    return profile


def _beats(ctx: PortfolioContext, beneficiary: str, incumbent: str) -> bool:
    return (failures_of(ctx, beneficiary), pressure_of(ctx, beneficiary)) > (
        failures_of(ctx, incumbent),
        pressure_of(ctx, incumbent),
    )


def _only_canary(ctx: PortfolioContext, model_id: str, serves: list[str]) -> bool:
    """The victim is another speculative model's only active canary: its one READY replica
    serves a workload on weak evidence."""
    if not serves:
        return False
    pair = ctx.pairs.get((serves[0], model_id))
    ready = sum(
        1
        for h in ctx.snapshot.hosts
        for r in h.residencies
        if r.model_id == model_id and r.state is ResidencyState.READY
    )
    return pair is not None and pair.weak and ready <= 1


def beats(
    ctx: PortfolioContext, workload: str, victims: tuple[str, ...], mapping: dict[str, str]
) -> bool:
    """The pressure test: w's confident pressure ≥ ratio × its victims' workloads'."""
    theirs = {w for v in victims for w in served_by(mapping, v)}
    against = sum(confident_pressure(ctx.forecast(w), ctx.policy) for w in theirs)
    mine = confident_pressure(ctx.forecast(workload), ctx.policy)
    return mine > 0 and mine >= ctx.policy.mature_replacement_ratio * against
