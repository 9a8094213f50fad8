"""smart carries the controller's workflow pre-warm, reactive does not: on one lab run, every
INFERRED entry of smart's snapshot demand is a learned edge's target model sized as the spec
says (edge confidence x the source workload's offered concurrency), and reactive's demand never
has one, on the same arrivals."""

from __future__ import annotations

import dataclasses

import pytest

import grid.lab.scenario.strategies as strategies
from grid.fleet.models import Evidence
from grid.lab.scenario import ScenarioConfig, build_world, document, run_scenario

pytestmark = pytest.mark.unit

CFG = ScenarioConfig(machines=4, models=8, users=30, duration_s=45 * 60, seed=42)


def test_smart_prewarms_learned_edges_and_reactive_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, list[tuple[float, list, dict, dict]]] = {"smart": [], "reactive": []}
    original = {"smart": strategies.Control.fields, "reactive": strategies.Reactive.fields}

    def spy(name: str):  # type: ignore[no-untyped-def]
        def fields(self, now):  # type: ignore[no-untyped-def]
            demand, workloads, outcomes = original[name](self, now)
            seen[name].append((now, list(self.signals.edges(now)), demand, workloads))
            return demand, workloads, outcomes

        return fields

    monkeypatch.setattr(strategies.Control, "fields", spy("smart"))
    monkeypatch.setattr(strategies.Reactive, "fields", spy("reactive"))
    world = build_world(CFG)
    docs = {
        s: document(run_scenario(dataclasses.replace(CFG, strategy=s), world))
        for s in ("smart", "reactive")
    }
    assert docs["smart"]["demand_trace_sha256"] == docs["reactive"]["demand_trace_sha256"]
    inferred = 0
    for _now, edges, demand, workloads in seen["smart"]:
        for model_id, entry in demand.items():
            if entry.evidence is not Evidence.INFERRED:
                continue
            inferred += 1
            # some edge whose source is active and whose target maps to this model sizes it
            sizes = [
                e.confidence * workloads[e.source].offered_concurrency
                for e in edges
                if e.source in workloads
            ]
            assert any(abs(entry.offered_concurrency - s) < 1e-9 for s in sizes), model_id
    assert inferred > 0  # the workday's sessions teach edges, and smart acts on them
    for _now, _control, demand, _w in seen["reactive"]:
        assert all(e.evidence is not Evidence.INFERRED for e in demand.values())
