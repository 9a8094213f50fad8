"""What the request side adds to the planning snapshot (issue 9), as pure functions of `now`.

- `classifier_config(policy)`: the request classifier speaks the policy's vocabulary, so it
  can never produce a word the snapshot would refuse (one vocabulary).
- `measured_hosts(hosts, profiles, measured, now)`: each host's `measured_tokens_per_s` for a
  model becomes the router's measurement of the model's configured artifact revision on that
  host, blended with the hardware prior by weight samples / 8 (full weight at eight samples;
  grid/demand/throughput.py). A revision nobody has measured yet keeps the prior: the hardware
  estimate, or the value the host reported itself when it reported one.
- `prewarm_demand(...)`: a learned workflow edge source -> target whose source workload has
  demand now asks for the target workload's model as INFERRED demand (spare capacity only,
  never an eviction: the planner's inferred stage), sized confidence x the source's offered
  concurrency. The target's model is the profile with the highest workload score for it. An
  edge whose target workload the last plan's portfolio already maps (serves) adds nothing: that
  model's replicas are sized by the target workload's own forecast, and an INFERRED entry would
  pin a second, demand-level copy in the base plan that the portfolio cannot release (measured
  in the scenario lab: text -> text edges held a general model on the only CUDA host that video
  needed). A model with direct demand is left alone, and so is a model that a replacement the
  last plan authorized is removing (the victims named in the forecasts' `replacement`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from grid.demand import ClassifierConfig, LearnedEdge, Measurements
from grid.fleet import DemandEntry, Evidence, Host, ModelProfile, Plan, Policy, WorkloadForecast

FALLBACK_WORD = "general"


def classifier_config(policy: Policy) -> ClassifierConfig:
    words = tuple(policy.workload_vocabulary)
    fallback = FALLBACK_WORD if FALLBACK_WORD in words else words[-1]
    return ClassifierConfig(workloads=words, fallback=fallback)


def measured_hosts(
    hosts: Sequence[Host],
    profiles: Mapping[str, ModelProfile],
    measured: Measurements,
    now: float,
) -> list[Host]:
    out: list[Host] = []
    for host in hosts:
        rates = dict(host.measured_tokens_per_s)
        for model_id in sorted(measured.models_of(host.host_id)):
            profile = profiles.get(model_id)
            if profile is None:
                continue
            prior = rates.get(model_id, host.hardware_tokens_per_s)
            estimate = measured.estimate(
                host.host_id, model_id, profile.artifact_sha256, prior, now
            )
            if estimate.samples:
                rates[model_id] = round(
                    estimate.tokens_per_s, 2
                )  # 0.01 tok/s: no plan churn from noise
        changed = rates != host.measured_tokens_per_s
        out.append(host.model_copy(update={"measured_tokens_per_s": rates}) if changed else host)
    return out


def target_model(
    workload: str, mapping: Mapping[str, str], profiles: Mapping[str, ModelProfile]
) -> str | None:
    mapped = mapping.get(workload)
    if mapped is not None and mapped in profiles:
        return mapped
    scored = [
        (p.workload_scores[workload], m)
        for m, p in profiles.items()
        if workload in p.workload_scores
    ]
    if not scored:
        return None
    best = max(score for score, _m in scored)
    return min(m for score, m in scored if score == best)


def prewarm_demand(
    edges: Sequence[LearnedEdge],
    workloads: Mapping[str, WorkloadForecast],
    mapping: Mapping[str, str],
    profiles: Mapping[str, ModelProfile],
    demand: Mapping[str, DemandEntry],
) -> dict[str, DemandEntry]:
    """`demand` with the INFERRED entries learned workflow edges add (a new dict)."""
    out = dict(demand)
    # a model an authorized replacement is removing is not pre-warmed back into its room
    replaced = {v for f in workloads.values() if f.replacement for v in f.replacement.victims}
    for edge in edges:
        source = workloads.get(edge.source)
        if source is None or source.offered_concurrency <= 0:
            continue
        if edge.target in mapping:
            continue  # the portfolio already serves the target workload: it sizes that model
        model_id = target_model(edge.target, mapping, profiles)
        if model_id is None or model_id in replaced:
            continue
        current = out.get(model_id)
        if current is not None and current.evidence is Evidence.DIRECT:
            continue
        offered = edge.confidence * source.offered_concurrency
        if current is not None and current.offered_concurrency >= offered:
            continue
        out[model_id] = DemandEntry(offered_concurrency=offered, evidence=Evidence.INFERRED)
    return out


def mapped_inputs(
    workloads: Mapping[str, WorkloadForecast], plan: Plan | None
) -> tuple[dict[str, WorkloadForecast], dict[str, str]]:
    """The last plan's portfolio mapping (empty without one) and the forecasts naming it, with
    the replacements that plan authorized carried into their workloads' forecasts."""
    mapping = dict(plan.portfolio.mapping) if plan is not None and plan.portfolio else {}
    return with_replacements(with_mapping(workloads, mapping), plan), mapping


def with_replacements(
    workloads: Mapping[str, WorkloadForecast], plan: Plan | None
) -> dict[str, WorkloadForecast]:
    """Each forecast carries the replacement the last plan authorized for its workload (the
    spec's "the controller carries this authorization explicitly into the forecast")."""
    granted = plan.portfolio.replacements if plan is not None and plan.portfolio else {}
    return {
        w: f.model_copy(update={"replacement": granted[w]}) if w in granted else f
        for w, f in workloads.items()
    }


def with_mapping(
    workloads: Mapping[str, WorkloadForecast], mapping: Mapping[str, str]
) -> dict[str, WorkloadForecast]:
    """Each forecast names the model the last plan's portfolio maps its workload to (where its
    `auto` requests route now): the state of the portfolio's mapping hysteresis."""
    return {
        w: f.model_copy(update={"mapped_model": mapping[w]}) if w in mapping else f
        for w, f in workloads.items()
    }
