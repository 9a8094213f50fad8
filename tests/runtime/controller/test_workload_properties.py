"""Safety properties of what the request side adds to the snapshot (Hypothesis)."""

from __future__ import annotations

import secrets

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.demand import LearnedEdge, WorkflowLearner
from grid.fleet.models import DemandEntry, Evidence, ModelProfile
from grid.fleet.workloads import WorkloadForecast
from grid.runtime.controller.workload_inputs import prewarm_demand

pytestmark = pytest.mark.property

WORDS = ("coding", "research", "design", "general")
MODELS = ("m1", "m2", "m3")

edges = st.lists(
    st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS), st.integers(1, 10), st.integers(0, 5))
    .filter(lambda e: e[0] != e[1])
    .map(lambda e: LearnedEdge(e[0], e[1], e[2], e[2] + e[3], e[2] / (e[2] + e[3]))),
    max_size=6,
)
forecasts = st.dictionaries(
    st.sampled_from(WORDS),
    st.floats(0, 8, allow_nan=False).map(lambda c: WorkloadForecast(offered_concurrency=c)),
)
profiles = st.dictionaries(
    st.sampled_from(MODELS),
    st.dictionaries(st.sampled_from(WORDS), st.floats(0.01, 1.0)),
).map(
    lambda d: {m: ModelProfile(model_id=m, memory_mb=100, workload_scores=s) for m, s in d.items()}
)
demands = st.dictionaries(
    st.sampled_from(MODELS),
    st.builds(
        DemandEntry,
        offered_concurrency=st.floats(0, 8, allow_nan=False),
        evidence=st.sampled_from(list(Evidence)),
    ),
)
mappings = st.dictionaries(st.sampled_from(WORDS), st.sampled_from(MODELS))


@settings(max_examples=60, deadline=None)
@given(edges, forecasts, mappings, profiles, demands)
def test_prewarming_only_adds_inferred_demand_and_never_touches_direct_demand(
    learned: list[LearnedEdge],
    workloads: dict[str, WorkloadForecast],
    mapping: dict[str, str],
    models: dict[str, ModelProfile],
    demand: dict[str, DemandEntry],
) -> None:
    out = prewarm_demand(learned, workloads, mapping, models, demand)
    assert set(demand) <= set(out)
    for model_id, entry in out.items():
        before = demand.get(model_id)
        if before is not None and before.evidence is Evidence.DIRECT:
            assert entry == before  # direct demand is never rewritten
        if entry != before:
            assert entry.evidence is Evidence.INFERRED
            assert model_id in models  # only configured models are pre-warmed
            # never more than the busiest source workload offers
            top = max((w.offered_concurrency for w in workloads.values()), default=0.0)
            assert entry.offered_concurrency <= top + 1e-9
            assert before is None or entry.offered_concurrency > before.offered_concurrency


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(WORDS)), max_size=40))
def test_workflow_transitions_survive_a_restart_with_another_secret(
    pairs: list[tuple[str, str]],
) -> None:
    learner = WorkflowLearner(secrets.token_bytes(32))
    t = 1000.0
    for i, (a, b) in enumerate(pairs):
        key = f"client-{i % 3}"
        learner.observe(key, a, started_at=t, completed_at=t + 1, now=t + 1)
        learner.observe(key, b, started_at=t + 2, completed_at=t + 3, now=t + 3)
        t += 4
    again = WorkflowLearner(secrets.token_bytes(32))
    again.restore(learner.to_state())
    assert again.transitions() == learner.transitions()
    assert again.edges(t) == learner.edges(t)
    assert again.workflow_ids() == []  # cursors are never kept
