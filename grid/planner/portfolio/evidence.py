"""Outcome evidence of one (model, workload, artifact revision) as confidences (pure).

    service confidence  c_s = min(1, n_eff / service_full_requests), n_eff = n · 2^(−age/T_s)
    quality confidence  c_q = min(1, k_eff / quality_full_samples), k_eff = k · 2^(−age_q/T_q)
    evidence            c   = max(c_s, c_q)
    optimism bonus      b   = exploration_bonus · (1 − c)     (6 points with no evidence, 0 at full)

The two half-lives are independent: a fresh latency-only request cannot revive stale quality.
Only outcomes whose `artifact_sha256` equals the profile's configured digest count (a replaced
artifact starts uncertain; a late response of the old revision is evidence about another one).
"""

from __future__ import annotations

from dataclasses import dataclass

from grid.fleet import FleetSnapshot, ModelProfile, Outcome, PortfolioPolicy


@dataclass(frozen=True)
class Evidence:
    service_confidence: float
    quality_confidence: float
    success_rate: float  # 1.0 without requests
    quality: float | None
    fresh_success: bool  # a success of this exact revision within policy.fresh_success_s

    @property
    def confidence(self) -> float:
        return max(self.service_confidence, self.quality_confidence)


NO_EVIDENCE = Evidence(0.0, 0.0, 1.0, None, False)


def _decayed(count: float, age_s: float, half_life_s: float) -> float:
    return float(count * 0.5 ** (age_s / half_life_s))


def evidence_of(outcome: Outcome | None, policy: PortfolioPolicy) -> Evidence:
    if outcome is None:
        return NO_EVIDENCE
    n_eff = _decayed(outcome.requests, outcome.age_s, policy.service_half_life_s)
    cs = min(1.0, n_eff / policy.service_full_requests)
    cq = 0.0
    if outcome.quality is not None and outcome.quality_samples > 0:
        q_age = outcome.quality_age_s if outcome.quality_age_s is not None else outcome.age_s
        k_eff = _decayed(outcome.quality_samples, q_age, policy.quality_half_life_s)
        cq = min(1.0, k_eff / policy.quality_full_samples)
    rate = outcome.successes / outcome.requests if outcome.requests > 0 else 1.0
    fresh = outcome.successes > 0 and outcome.age_s <= policy.fresh_success_s
    return Evidence(cs, cq, rate, outcome.quality if cq > 0 else None, fresh)


def bonus_of(evidence: Evidence, policy: PortfolioPolicy) -> float:
    return policy.exploration_bonus * (1.0 - evidence.confidence)


def outcome_table(snap: FleetSnapshot) -> dict[tuple[str, str], Outcome]:
    """(model, workload) → the outcome of the configured artifact revision (others ignored)."""
    profiles: dict[str, ModelProfile] = {m.model_id: m for m in snap.models}
    out: dict[tuple[str, str], Outcome] = {}
    for outcome in snap.outcomes:
        profile = profiles.get(outcome.model_id)
        if profile is None or outcome.artifact_sha256 != profile.artifact_sha256:
            continue
        key = (outcome.model_id, outcome.workload)
        if key not in out or outcome.age_s < out[key].age_s:  # the freshest row wins
            out[key] = outcome
    return out
