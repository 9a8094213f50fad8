"""State-dependent hysteresis of the portfolio, on tiny fleets worked by hand.

The current mapping and residency reach the portfolio only through the snapshot: READY
residencies (and their `last_used_at`, which makes the base plan hold them for the scale-down
cooldown). These tests pin what that state must do:
- a specialist the base plan holds for its cooldown counts as the workload's replica, so it is
  not beaten by a shared generalist merely because it "would need another replica";
- a specialist placed at tick 1 and READY at tick 2 stays mapped, with no second replica;
- a cold candidate pays the transition penalty (min(10, startup/4)) against a resident peer, and
  after the switch the penalty falls on the peer that is no longer resident.
"""

from __future__ import annotations

import pytest

from tests.planner.portfolio.builders import NOW, host, model, resident, work, wsnapshot
from tests.planner.portfolio.helpers import candidate, hosts_of, planned

pytestmark = pytest.mark.unit

RECENT = {"loaded_at": NOW - 900, "last_used_at": NOW - 30}  # past min residency, in cooldown


def _coder(**extra: object) -> dict[str, object]:
    return model("coder", 4096, max_replicas=4, workload_scores={"coding": 1.0}, **extra)


def _gen() -> dict[str, object]:
    # At its replica ceiling (1): the portfolio can ask it for no further replica.
    return model("gen", 4096, max_replicas=1, workload_scores={"coding": 0.6, "general": 0.9})


@pytest.mark.parametrize("engine", ["cpsat", "heuristic"])
def test_cooldown_held_specialist_keeps_its_workload(engine: str) -> None:
    # h1 (3 slots) holds coder and gen, both READY and recently used. Both mappings cover
    # coding and general (2), same pressure (100), 1 free slot either way (the base plan holds
    # coder for its cooldown whatever the portfolio does), no missing replica (coder's held
    # replica serves coding; read as an extra replica on top of the held one, coder would miss
    # one while gen, at its ceiling, could miss none). Utility decides: coder 100 + 6 bonus
    # against gen 60 + 6.
    snap = wsnapshot(
        [
            host(
                "h1",
                32768,
                max_models=3,
                residencies=[resident("coder", 4096, **RECENT), resident("gen", 4096, **RECENT)],
            )
        ],
        [_coder(), _gen()],
        {"coding": work(5, 0.5), "general": work(5, 0.5)},
    )
    plan, report = planned(snap, engine)
    assert report.mapping == {"coding": "coder", "general": "gen"}
    assert hosts_of(plan, "coder") == ["h1"]
    assert plan.desired_replicas["coder"] == 1  # the held replica, not one more
    assert not [u for u in plan.unsatisfied if u.model_id == "coder"]


@pytest.mark.parametrize("engine", ["cpsat", "heuristic"])
def test_two_tick_sequence_the_incumbent_stays(engine: str) -> None:
    # h1 has 4 slots, so the reserve of 2 is kept whichever model serves coding.
    # Tick 1: only gen is resident; coder is cached on h1 (startup 20 s warm: penalty 5).
    # coder 100 − 5 + 6 = 101 against gen 60 + 6 = 66: coding goes to coder, one new replica.
    tick1 = wsnapshot(
        [
            host(
                "h1",
                32768,
                max_models=4,
                cached_models=["coder"],
                residencies=[resident("gen", 4096, **RECENT)],
            )
        ],
        [_coder(), _gen()],
        {"coding": work(5, 0.5), "general": work(5, 0.5)},
    )
    plan1, report1 = planned(tick1, engine)
    assert report1.mapping["coding"] == "coder"
    assert hosts_of(plan1, "coder") == ["h1"]
    assert candidate(report1, "coding", "coder").transition_penalty == 5.0
    # Tick 2: coder is READY on h1 and served coding a moment ago. Same demand: the mapping
    # stays, coder keeps exactly its one replica and pays no penalty now.
    tick2 = wsnapshot(
        [
            host(
                "h1",
                32768,
                max_models=4,
                cached_models=["coder"],
                residencies=[
                    resident("gen", 4096, **RECENT),
                    resident("coder", 4096, loaded_at=NOW - 60, last_used_at=NOW - 30),
                ],
            )
        ],
        [_coder(), _gen()],
        {"coding": work(5, 0.5), "general": work(5, 0.5)},
    )
    plan2, report2 = planned(tick2, engine)
    assert report2.mapping == report1.mapping
    assert hosts_of(plan2, "coder") == ["h1"]
    assert plan2.desired_replicas["coder"] == 1
    assert candidate(report2, "coding", "coder").transition_penalty == 0.0


@pytest.mark.parametrize("engine", ["cpsat", "heuristic"])
def test_cold_candidate_must_beat_a_resident_peer_by_the_penalty(engine: str) -> None:
    # h1 has 4 slots (the reserve of 2 is kept either way, so the penalty decides).
    # a (coding 0.90) is resident; b (coding 0.95) is cold: load 60 s + warm 20 s = 80 s,
    # penalty min(10, 80/4) = 10. b: 95 − 10 + 6 = 91 < a: 90 + 6 = 96, so a keeps coding.
    models = [
        model("a", 4096, workload_scores={"coding": 0.9}),
        model("b", 4096, workload_scores={"coding": 0.95}),
    ]
    before = wsnapshot(
        [host("h1", 32768, max_models=4, residencies=[resident("a", 4096, **RECENT)])],
        models,
        {"coding": work(5, 0.5)},
    )
    _plan, report = planned(before, engine)
    assert report.mapping == {"coding": "a"}
    assert candidate(report, "coding", "b").transition_penalty == 10.0
    assert candidate(report, "coding", "a").transition_penalty == 0.0
    # After a justified switch (b resident, a unloaded) the penalty reverses: a is now the cold
    # one (90 − 10 + 6 = 86 against b's 95 + 6 = 101).
    after = wsnapshot(
        [host("h1", 32768, max_models=4, residencies=[resident("b", 4096, **RECENT)])],
        models,
        {"coding": work(5, 0.5)},
    )
    _plan, report = planned(after, engine)
    assert report.mapping == {"coding": "b"}
    assert candidate(report, "coding", "a").transition_penalty == 10.0
    assert candidate(report, "coding", "b").transition_penalty == 0.0


@pytest.mark.parametrize("served_recently", [True, False])
def test_resident_video_model_stays_through_a_burst_gap(served_recently: bool) -> None:
    # video has 1 observation and 0.2 units: below both gates (3, 1.5) and the media band
    # (1.0). The video model is READY on h1; when it served video 2 minutes ago (a fresh
    # success), the workload stays admitted on it; without that evidence it is deferred.
    outcomes = (
        [{"model_id": "vid", "workload": "video", "requests": 1, "successes": 1, "age_s": 120}]
        if served_recently
        else []
    )
    snap = wsnapshot(
        [host("h1", 32768, max_models=2, residencies=[resident("vid", 8192, **RECENT)])],
        [model("vid", 8192, workload_scores={"video": 0.9})],
        {"video": work(1, 0.2, modality="video")},
        outcomes=outcomes,
    )
    _plan, report = planned(snap)
    r = next(r for r in report.admission if r.workload == "video")
    if served_recently:
        assert report.mapping == {"video": "vid"}
        assert r.state == "ready"
    else:
        assert report.mapping == {}
        assert r.state == "deferred" and r.reason.startswith("below_evidence_gate:")
