"""The scenario report counts the timeline checks: the recorded READY moments agree with what
the routing physics saw serving, and every timeline violation is in `safety` and the count."""

from __future__ import annotations

import pytest

from grid.lab.scenario import ScenarioConfig, document, run_scenario
from grid.lab.scenario.lab import T0, TICK_S

pytestmark = pytest.mark.unit


def test_ready_events_cover_every_serving_minute_and_violations_are_counted() -> None:
    run = run_scenario(ScenarioConfig(machines=2, models=5, users=10, duration_s=30 * 60, seed=3))
    events = run.metrics.lifelog.events
    readies = [e for e in events if e.kind == "ready"]
    assert readies
    for t, serving in enumerate(run.metrics.serving):
        start = T0 + TICK_S * t
        for host, model in serving:
            # READY at the start of minute t means it became ready at or before that moment
            assert any(
                e.host_id == host and e.model_id == model and e.at <= start for e in readies
            ), (t, host, model)
    doc = document(run)
    assert doc["summary"]["safety_violations"] == len(doc["safety"])
    timeline_codes = {"minimum_residency_broken", "last_ready_replica_drained"}
    found = run.metrics.lifelog.violations(
        run.fleet, {p.model_id: p.min_residency_s for p in run.world.profiles}
    )
    assert sum(v["code"] in timeline_codes for v in doc["safety"]) == len(found)
