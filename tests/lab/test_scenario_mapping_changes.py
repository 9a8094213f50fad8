"""`summary.mapping_changes`: (tick, workload) pairs whose portfolio mapping moved from one model
to another (first mappings and unmapped workloads are not changes). The oracle replays the
published timeline's `portfolio_changes` (every tick with a change is in the timeline)."""

from __future__ import annotations

import pytest

from grid.lab.scenario.lab import run_scenario
from grid.lab.scenario.report import document
from grid.lab.scenario.world import ScenarioConfig

pytestmark = pytest.mark.unit


def _replayed(timeline: list[dict[str, object]]) -> int:
    state: dict[str, str] = {}
    switches = 0
    for entry in timeline:
        changes = entry["portfolio_changes"]
        assert isinstance(changes, dict)
        for workload, model_id in changes.items():
            if model_id is None:
                state.pop(workload, None)
                continue
            if workload in state and state[workload] != model_id:
                switches += 1
            state[workload] = model_id
    return switches


@pytest.mark.parametrize("strategy", ["smart", "static"])
def test_mapping_changes_equal_the_timeline_replay(strategy: str) -> None:
    cfg = ScenarioConfig(machines=4, seed=144, duration_s=1800, users=50, strategy=strategy)
    doc = document(run_scenario(cfg), timeline=True)
    assert doc["summary"]["mapping_changes"] == _replayed(doc["timeline"])
    if strategy == "static":
        assert doc["summary"]["mapping_changes"] == 0  # the declared mix, never rescheduled
