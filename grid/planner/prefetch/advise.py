"""Cache-only advisories, replacements and expiries of one authoritative plan (pure).

1. Predictions (learned workflow edges with an active source) are merged per model, the
   strongest (confidence x pressure) naming the edge. A prediction wants its model's exact
   artifact on one more future-compatible host than the plan gives it serving slots: the
   predicted demand's next replica (the first one when the plan places none, else the one a
   surge or a lost host would need) has no slot yet, and a cached copy takes the transfer off
   its cold start. It is a candidate when fewer compatible hosts hold the artifact (cached,
   live or placed there; a host that is down now counts, its disk comes back with it) and its
   profile declares an exact source, SHA-256 and size. A model the plan serves needs no next
   replica (`served`) while its current plus expected predicted load stays below
   `surge_utilization` of the planned replicas' capacity.
2. For every future-compatible host with authenticated free disk where the next replica can
   land after the plan (a free slot and memory; context.landing_refusal), the transfer's value is
   confidence x pressure x counted transfer seconds (context.py), its rank that value per
   artifact MB. Greedily, up to `max_advisories_per_plan`: the best (prediction, host) pair that
   fits the post-assignment ledger less the reserve is chosen, the ledger is charged, and every
   remaining pair is re-evaluated against the changed ledger (one copy per prediction).
3. If the budget is still open and a candidate fits nowhere, a host whose disk a proven group
   of mature, unused predictive artifacts would free is searched (replace.py): the group's
   evictions are staged, and the prefetch waits for a later heartbeat proving the space (two
   generations; intended deletion is never credited as free space).
4. Unused predictive entries older than the TTL whose model no prediction or demand wants any
   more are expired (exact SHA, protect.py's rule).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice

from grid.fleet import (
    CacheEviction,
    FleetSnapshot,
    Host,
    ModelProfile,
    Plan,
    Prediction,
    PredictiveEntry,
    PrefetchAdvisory,
    PrefetchReport,
    PrefetchSkip,
)
from grid.planner.prefetch.context import (
    Context,
    counted_s,
    transfer_s,
    value_s,
)
from grid.planner.prefetch.protect import eviction_refusal
from grid.planner.prefetch.replace import Victim, best_group

SKIP_TEXT: dict[str, str] = {
    "unknown_model": "the prediction names no configured model",
    "low_confidence": "the edge's confidence is below policy.prefetch.min_confidence",
    "artifact_unverified": "the profile declares no artifact_sha256, so a download is unverifiable",
    "artifact_size_unknown": "the profile declares no artifact_size_mb, so disk cannot be proven",
    "artifact_source_missing": "the profile declares no exact artifact_source to download from",
    "already_cached": (
        "one more future-compatible host than the plan's replicas already holds the exact "
        "artifact (or is placed there)"
    ),
    "no_compatible_host": "no managed host with the load actuator can ever run the model",
    "no_disk_telemetry": "the host reports no free disk; a predictive transfer needs it",
    "insufficient_disk": "no compatible host has room for it above the predictive reserve",
    "served": (
        "the plan's replicas of the model have room for its current and predicted load, so "
        "the prediction gets a serving slot and a cached copy elsewhere would stay unused"
    ),
    "no_value": "the prediction has no pressure or no transfer time to save",
    "no_free_slot": (
        "every future-compatible host without the artifact is filled by the plan (no model "
        "slot or memory left for the next replica), so a later warm could not use a copy there"
    ),
    "budget_exhausted": "the plan's advisory budget went to a more valuable transfer",
    "replacement_staged": "mature unused predictive artifacts are evicted for it first",
}


@dataclass(frozen=True)
class _Pair:
    prediction: Prediction
    profile: ModelProfile
    host: Host
    transfer_s: float
    counted_s: float
    value_s: float

    @property
    def density(self) -> float:
        return self.value_s / self.profile.artifact_size_mb


def _skip(model_id: str, code: str, *, host_id: str | None = None, edge: str = "") -> PrefetchSkip:
    return PrefetchSkip(
        model_id=model_id, host_id=host_id, code=code, message=SKIP_TEXT[code], edge=edge
    )


def _merged(predictions: list[Prediction]) -> list[Prediction]:
    """One prediction per model: the strongest (confidence x pressure, then the edge)."""
    best: dict[str, Prediction] = {}
    for p in predictions:
        current = best.get(p.model_id)
        rank = (p.confidence * p.offered_concurrency, p.confidence, p.edge)
        if current is None or rank > (
            current.confidence * current.offered_concurrency,
            current.confidence,
            current.edge,
        ):
            best[p.model_id] = p
    return [best[m] for m in sorted(best)]


def plan_prefetch(snap: FleetSnapshot, plan: Plan) -> PrefetchReport | None:
    """The plan's prefetch report (None: no predictions and no predictive entries)."""
    policy = snap.policy.prefetch
    if not policy.enabled:
        return None
    if not snap.predictions and not any(h.predictive_cache for h in snap.hosts):
        return None
    ctx = Context(snap, plan)
    report = PrefetchReport(reserve_mb=ctx.reserve_mb)
    predictions = _merged(snap.predictions)
    pairs = _pairs(ctx, predictions, report)
    budget = policy.max_advisories_per_plan
    chosen: set[str] = set()
    while len(report.advisories) < budget:
        fitting = [
            p
            for p in pairs
            if p.profile.model_id not in chosen
            and (room := ctx.room_mb(p.host.host_id)) is not None
            and p.profile.artifact_size_mb <= room
        ]
        if not fitting:
            break
        pick = min(fitting, key=lambda p: _order(ctx, p))
        chosen.add(pick.profile.model_id)
        ctx.free[pick.host.host_id] = (ctx.free[pick.host.host_id] or 0) - (
            pick.profile.artifact_size_mb
        )
        report.advisories.append(_advisory(ctx, pick))
    waiting = sorted(
        {p.profile.model_id for p in pairs} - chosen,
        key=lambda m: -max(p.density for p in pairs if p.profile.model_id == m),
    )
    if len(report.advisories) < budget and waiting:
        staged = _replacement(ctx, [p for p in pairs if p.profile.model_id in waiting], report)
        if staged is not None:
            waiting.remove(staged)
    for model_id in waiting:
        edge = next(p.prediction.edge for p in pairs if p.profile.model_id == model_id)
        code = "budget_exhausted" if report.advisories else "insufficient_disk"
        report.skipped.append(_skip(model_id, code, edge=edge))
    _expire(ctx, {p.model_id for p in predictions}, report)
    return report


def _order(ctx: Context, p: _Pair) -> tuple[float, float, int, int, int, str, str]:
    """Best first: value per MB, then value; ties go where the plan leaves the most memory
    free, then to more free disk, then by model and host id (deterministic)."""
    memory = ctx.free_memory_mb(p.host)
    return (
        -p.density,
        -p.value_s,
        0 if memory >= p.profile.memory_mb else 1,
        -memory,
        -(ctx.room_mb(p.host.host_id) or 0),
        p.profile.model_id,
        p.host.host_id,
    )


def _pairs(ctx: Context, predictions: list[Prediction], report: PrefetchReport) -> list[_Pair]:
    """Every (prediction, future-compatible host) pair worth a transfer; skips are reported."""
    policy = ctx.snap.policy.prefetch
    out: list[_Pair] = []
    for pred in predictions:
        prof = ctx.profiles.get(pred.model_id)
        code = _model_refusal(ctx, pred, prof)
        if code is not None:
            report.skipped.append(_skip(pred.model_id, code, edge=pred.edge))
            continue
        assert prof is not None
        if pred.confidence < policy.min_confidence:
            report.skipped.append(_skip(pred.model_id, "low_confidence", edge=pred.edge))
            continue
        planned = ctx.planned.get(prof.model_id, set())
        if planned and _absorbed(ctx, pred, prof):
            report.skipped.append(_skip(pred.model_id, "served", edge=pred.edge))
            continue
        near = [
            ctx.hosts[h] for h in ctx.mentions.get(prof.model_id, set()) | planned if h in ctx.hosts
        ]
        holding = {
            h.host_id
            for h in near
            if (ctx.cached(prof, h) or ctx.live(prof.model_id, h) or h.host_id in planned)
            and ctx.static_compatibility(prof, h) is None
        }
        covered = len(holding) >= len(planned) + 1
        compatible = (h for h in ctx.snap.hosts if ctx.compatibility(prof, h) is None)
        # With enough copies only whether any host is compatible at all decides the code.
        hosts = list(islice(compatible, 1) if covered else compatible)
        if not hosts:
            report.skipped.append(_skip(pred.model_id, "no_compatible_host", edge=pred.edge))
            continue
        if covered or all(h.host_id in holding for h in hosts):
            report.skipped.append(_skip(pred.model_id, "already_cached", edge=pred.edge))
            continue
        # The first replica may take the source workload's room (its sessions move on); a
        # surge copy of a served model needs room the plan leaves free.
        freed = None if planned else ctx.source_model(pred)
        found = full = 0
        for host in hosts:
            if host.host_id in holding:
                continue
            if host.disk_free_mb is None:
                report.skipped.append(
                    _skip(pred.model_id, "no_disk_telemetry", host_id=host.host_id, edge=pred.edge)
                )
                continue
            if ctx.landing_refusal(prof, host, freed) is not None:
                full += 1
                continue
            transfer = transfer_s(ctx.snap, prof, host.host_id)
            counted = counted_s(transfer, pred.lead_s)
            value = value_s(pred, counted)
            if value <= 0:
                continue
            out.append(_Pair(pred, prof, host, transfer, counted, value))
            found += 1
        if not found and all(h.disk_free_mb is not None for h in hosts):
            code = "no_free_slot" if full else "no_value"
            report.skipped.append(_skip(pred.model_id, code, edge=pred.edge))
    return out


def _absorbed(ctx: Context, pred: Prediction, prof: ModelProfile) -> bool:
    """The plan's replicas of the model take the prediction: its current load plus the
    expected arrival (confidence x pressure) stays below `surge_utilization` of their capacity
    at target utilization, so no next replica is in sight and a cached copy would go unused."""
    load = ctx.served_load(prof.model_id) + pred.confidence * pred.offered_concurrency
    share = ctx.snap.policy.prefetch.surge_utilization
    return load < share * ctx.planned_capacity(prof)


def _model_refusal(ctx: Context, pred: Prediction, prof: ModelProfile | None) -> str | None:
    if prof is None:
        return "unknown_model"
    if prof.artifact_sha256 is None:
        return "artifact_unverified"
    if prof.artifact_size_mb <= 0:
        return "artifact_size_unknown"
    if not prof.artifact_source:
        return "artifact_source_missing"
    return None


def _advisory(ctx: Context, p: _Pair) -> PrefetchAdvisory:
    pred, prof = p.prediction, p.profile
    assert prof.artifact_sha256 is not None
    lead = "unknown lead" if pred.lead_s is None else f"lead {pred.lead_s:.0f} s"
    return PrefetchAdvisory(
        model_id=prof.model_id,
        host_id=p.host.host_id,
        sha256=prof.artifact_sha256,
        size_mb=prof.artifact_size_mb,
        edge=pred.edge,
        confidence=round(pred.confidence, 4),
        pressure=round(pred.offered_concurrency, 4),
        transfer_s=round(p.transfer_s, 3),
        lead_s=pred.lead_s,
        counted_s=round(p.counted_s, 3),
        value_s=round(p.value_s, 4),
        value_per_mb=round(p.density, 8),
        disk_left_mb=ctx.free[p.host.host_id] or 0,
        reason=f"learned {pred.edge} at confidence {pred.confidence:.2f}: fetch "
        f"{prof.artifact_size_mb} MB to disk only ({p.counted_s:.0f} of {p.transfer_s:.0f} s "
        f"transfer counted, {lead})",
    )


# ----------------------------------------------------------------------------- replacement


def _victims(ctx: Context, host: Host) -> list[tuple[Victim, str]]:
    """Mature, unused predictive entries of the exact current revision nobody demands."""
    policy = ctx.snap.policy.prefetch
    out: list[tuple[Victim, str]] = []
    for entry in host.predictive_cache:
        prof = ctx.profiles.get(entry.model_id)
        if prof is None or prof.artifact_sha256 != entry.sha256:
            continue  # an inexact revision is never a replacement candidate
        if entry.model_id in ctx.demanded:
            continue
        if ctx.now - entry.cached_at < policy.replacement_min_age_s:
            continue
        refusal = eviction_refusal(
            host,
            entry.model_id,
            entry.sha256,
            profile=prof,
            planned_here=host.host_id in ctx.planned.get(entry.model_id, set()),
        )
        if refusal is not None:
            continue
        victim = Victim(entry.model_id, entry.size_mb, _kept_value(ctx, prof, host.host_id))
        out.append((victim, entry.sha256))
    return out


def _replacement(ctx: Context, pairs: list[_Pair], report: PrefetchReport) -> str | None:
    """Stage the evictions of the best proven group for the strongest waiting prediction."""
    policy = ctx.snap.policy.prefetch
    for pair in sorted(pairs, key=lambda p: _order(ctx, p)):
        host = pair.host
        victims = _victims(ctx, host)
        free = ctx.free.get(host.host_id)
        if not victims or free is None:
            continue
        group = best_group(
            pair.profile.artifact_size_mb,
            pair.value_s,
            [v for v, _sha in victims],
            free_mb=free,
            reserve_mb=ctx.reserve_mb,
            gain=policy.replacement_gain,
            bound=policy.max_replacement_victims,
        )
        if group is None:
            continue
        shas = {v.model_id: sha for v, sha in victims}
        ages = {e.model_id: ctx.now - e.cached_at for e in host.predictive_cache}
        for victim in group:
            report.evictions.append(
                CacheEviction(
                    model_id=victim.model_id,
                    host_id=host.host_id,
                    sha256=shas[victim.model_id],
                    size_mb=victim.size_mb,
                    code="replaced",
                    age_s=round(ages[victim.model_id], 1),
                    beneficiary_model_id=pair.profile.model_id,
                    reason=f"replaced by {pair.profile.model_id} ({pair.prediction.edge}): "
                    f"{pair.density:.6f} value/MB against the group's "
                    f"{sum(v.value_s for v in group) / sum(v.size_mb for v in group):.6f}",
                )
            )
        report.skipped.append(
            _skip(
                pair.profile.model_id,
                "replacement_staged",
                host_id=host.host_id,
                edge=pair.prediction.edge,
            )
        )
        return pair.profile.model_id
    return None


def _kept_value(ctx: Context, profile: ModelProfile, host_id: str) -> float:
    """What a cached copy keeps saving: the strongest current prediction of its model, valued
    with this host's transfer time (0 when nothing predicts it any more)."""
    transfer = transfer_s(ctx.snap, profile, host_id)
    return max(
        (
            value_s(p, counted_s(transfer, p.lead_s))
            for p in ctx.snap.predictions
            if p.model_id == profile.model_id
        ),
        default=0.0,
    )


# ----------------------------------------------------------------------------- expiry


def _expire(ctx: Context, predicted: set[str], report: PrefetchReport) -> None:
    policy = ctx.snap.policy
    replaced = {(e.model_id, e.host_id) for e in report.evictions}
    for host in sorted(ctx.snap.hosts, key=lambda h: h.host_id):
        if not ctx.fresh(host.host_id):
            continue
        for entry in sorted(host.predictive_cache, key=lambda e: e.model_id):
            if len(report.evictions) >= policy.max_evictions_per_plan:
                return
            if (entry.model_id, host.host_id) in replaced or not _expired(ctx, entry, predicted):
                continue
            refusal = eviction_refusal(
                host,
                entry.model_id,
                entry.sha256,
                profile=ctx.profiles.get(entry.model_id),
                planned_here=host.host_id in ctx.planned.get(entry.model_id, set()),
            )
            if refusal is not None:
                continue
            age = ctx.now - entry.cached_at
            report.evictions.append(
                CacheEviction(
                    model_id=entry.model_id,
                    host_id=host.host_id,
                    sha256=entry.sha256,
                    size_mb=entry.size_mb,
                    code="expired",
                    age_s=round(age, 1),
                    reason=f"unused for {age / 3600:.1f} h, past the predictive cache TTL of "
                    f"{policy.prefetch.cache_ttl_s / 3600:.1f} h, and no prediction wants it",
                )
            )


def _expired(ctx: Context, entry: PredictiveEntry, predicted: set[str]) -> bool:
    if entry.warmed or entry.model_id in predicted or entry.model_id in ctx.demanded:
        return False
    return ctx.now - entry.cached_at >= ctx.snap.policy.prefetch.cache_ttl_s
