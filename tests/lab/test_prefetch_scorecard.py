"""The scenario report's prefetch scorecard on a workday with image -> video campaign sessions:
every prefetch is the production path's (plan advisory -> predictive LOAD record -> simulated
node), and the scorecard agrees with what the simulated nodes themselves recorded (their
predictive provenance: downloaded, warmed), recounted here without the scorer."""

from __future__ import annotations

import dataclasses

import pytest

from grid.fleet.actions import ActionKind, RecordStatus
from grid.lab.scenario import ScenarioConfig, build_world, document, run_scenario

pytestmark = pytest.mark.unit

CFG = ScenarioConfig(machines=2, models=8, users=50, duration_s=2 * 3600, seed=144)


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[object, dict]]:  # type: ignore[type-arg]
    world = build_world(CFG)
    out = {}
    for strategy in ("smart", "reactive"):
        run = run_scenario(dataclasses.replace(CFG, strategy=strategy), world)
        out[strategy] = (run, document(run))
    return out


def test_the_scorecard_is_what_the_nodes_recorded(runs: dict) -> None:  # type: ignore[type-arg]
    run, doc = runs["smart"]
    card = doc["prefetch"]
    records = list(run.fleet.records.values())
    loads = [
        r
        for r in records
        if r.kind is ActionKind.LOAD and r.predictive and r.status is RecordStatus.SUCCEEDED
    ]
    assert card["downloads"] == len(loads) > 0
    # Every predictive load was cache-only: no memory claimed, nothing drained for it.
    assert all(r.memory_mb == 0 for r in records if r.predictive)
    # The nodes' own provenance: one entry per download (none evicted in a two-hour day), and
    # an entry is warmed exactly when a placement used it.
    entries = [
        (host_id, e) for host_id, host in run.fleet.hosts.items() for e in host.predictive.values()
    ]
    assert sorted((h, e.model_id) for h, e in entries) == sorted(
        (r.host_id, r.model_id) for r in loads
    )
    warmed = [(h, e) for h, e in entries if e.warmed]
    assert card["hits"] == len(warmed)
    assert card["unused"] == len(entries) - len(warmed)
    assert card["hit_rate"] == pytest.approx(len(warmed) / len(entries), abs=1e-4)
    assert card["downloaded_mb"] == sum(e.size_mb for _h, e in entries)
    # Avoided transfer: each used download took its model's load estimate off a cold start
    # (a placement that joined a still-running prefetch avoided at most that).
    profiles = {p.model_id: p for p in run.world.profiles}
    assert (
        0
        < card["avoided_load_s"]
        <= sum(profiles[e.model_id].load_estimate_s for _h, e in warmed) + 0.05
    )
    assert card["expired"] == card["replaced"] == card["reclaimed_mb"] == 0
    assert card["mean_lead_s"] is not None and card["mean_lead_s"] >= 0
    assert doc["summary"]["safety_violations"] == 0


def test_smart_prefetches_pay_off_and_reactive_prefetches_nothing(runs: dict) -> None:  # type: ignore[type-arg]
    smart, reactive = runs["smart"][1], runs["reactive"][1]
    assert smart["demand_trace_sha256"] == reactive["demand_trace_sha256"]
    assert reactive["prefetch"]["downloads"] == 0
    # The goal on this cell: at least 60 % of the downloads are used.
    assert smart["prefetch"]["hits"] >= 1
    assert smart["prefetch"]["hit_rate"] >= 0.6
    assert smart["prefetch"]["avoided_load_s"] > 0
    assert smart["summary"]["startup_s"] < reactive["summary"]["startup_s"]
    assert smart["summary"]["cold_starts"] < reactive["summary"]["cold_starts"]
