"""The demand side end to end: real-looking requests -> classifier -> workload forecast and
evidence -> snapshot -> the planner's portfolio (the shapes match what the planner reads)."""

from __future__ import annotations

import pytest

from grid.demand import DemandConfig, EndpointFamily
from grid.demand.classify import RequestOutcome, classify
from grid.fleet.models import FleetSnapshot, Host, ModelProfile
from grid.fleet.workloads import PortfolioPolicy
from grid.planner.plan import make_plan
from grid.runtime.controller.evidence_store import RequestSignals

pytestmark = pytest.mark.unit

NOW = 1000.0
PROFILES = {
    "general": ModelProfile(
        model_id="general",
        memory_mb=2000,
        min_replicas=1,
        workload_scores={"general": 1.0, "coding": 0.5},
    ),
    "coder": ModelProfile(model_id="coder", memory_mb=2000, workload_scores={"coding": 1.0}),
}
PROMPTS = [
    "Write a Python function that merges two sorted lists.",
    "Why does this fail?\n```python\nprint(items[3])\n```\nIndexError: list index out of range",
    "Refactor this SQL: SELECT id, name FROM users WHERE active = 1",
    "Implement a debounce function in TypeScript.",
    "Add unit tests for the parser class.",
]


def test_coding_requests_served_by_the_generalist_earn_the_coder_a_portfolio_slot() -> None:
    signals = RequestSignals(DemandConfig(), secret=b"x" * 32)
    policy = PortfolioPolicy()
    for i, prompt in enumerate(PROMPTS):
        stamp = NOW - 50 + 5 * i
        body = {"model": "auto", "messages": [{"role": "user", "content": prompt}]}
        done = RequestOutcome(
            requested_model="auto", served_model="general", service_time_s=4.0, timestamp=stamp
        )
        obs = classify(body, EndpointFamily.CHAT, done)
        assert obs.workload == "coding"
        signal = signals.observe(obs, profiles=PROFILES, policy=policy, now=stamp)
        assert signal.workload_demand and signal.evidence
    workloads, outcomes = signals.snapshot_fields(NOW, PROFILES)
    assert workloads["coding"].observations == 5  # above the 3-observation gate
    # The generalist that served them holds the evidence: 5 requests, 30 s to 50 s old.
    (row,) = outcomes
    assert (row.model_id, row.workload, row.age_s) == ("general", "coding", 30.0)
    snap = FleetSnapshot(
        now=NOW,
        hosts=[Host(host_id="h1", capacity_mb=8000, last_heartbeat=NOW)],
        models=list(PROFILES.values()),
        workloads=workloads,
        outcomes=outcomes,
    )
    plan = make_plan(snap, deterministic=True, time_limit_s=5.0)
    assert plan.portfolio is not None
    assert plan.portfolio.mapping == {"coding": "coder"}
    general = next(c for c in plan.portfolio.candidates if c.model_id == "general")
    # 5 effective requests of the 20 that give full weight (decay over 50 s is negligible).
    assert general.confidence == pytest.approx(5 / 20, abs=1e-3)
