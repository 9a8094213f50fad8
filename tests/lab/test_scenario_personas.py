"""The campaign persona gives the workflow learner the spec's image -> video sequence: counted
straight from the arrivals (per session, consecutive requests of different words), image is
followed by video at least five times within an hour, the learner's evidence threshold."""

from __future__ import annotations

import pytest

from grid.lab.scenario import ScenarioConfig, build_world

pytestmark = pytest.mark.unit


def test_campaign_sessions_repeat_image_then_video() -> None:
    world = build_world(ScenarioConfig(machines=4, models=8, users=50, duration_s=3600, seed=42))
    last: dict[str, str] = {}
    transitions: dict[tuple[str, str], int] = {}
    for minute in world.arrivals:
        for r in minute:
            if r.user_id == "ops":
                continue
            prev = last.get(r.user_id)
            if prev is not None and prev != r.workload:
                key = (prev, r.workload)
                transitions[key] = transitions.get(key, 0) + 1
            last[r.user_id] = r.workload
    assert transitions.get(("image", "video"), 0) >= 5
