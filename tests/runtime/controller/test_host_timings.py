"""Defect 4 (issue 8): learned load/warm timings stay per (host, model, artifact revision).

The fastest host's learned times used to overwrite the model profile, so every host was scored
with them and the lookahead projected demand over a path no eligible host could offer. Expected
values are worked by hand from the configured priors (load 60 s, warm 20 s) and the learned
samples (four of each, so the learned mean is authoritative).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grid.fleet.models import (
    DemandEntry,
    FleetSnapshot,
    Host,
    LearnedStartup,
    ModelProfile,
    Policy,
    Residency,
)
from grid.planner.plan import make_plan
from grid.planner.targets import compute_targets, next_replica_startup_s
from grid.runtime.controller.core import Controller
from grid.runtime.controller.store import StateStore
from grid.runtime.controller.timings import Phase
from tests.runtime.controller.harness import FAST, T0, Fleet, profile
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.unit

PRIOR_LOAD, PRIOR_WARM = 60.0, 20.0
FAST_LOAD, FAST_WARM = 10.0, 5.0


def _fleet(tmp_path: Path, nodes: list[FakeNode], **fields: object) -> Fleet:
    fleet = Fleet(tmp_path, nodes)
    fleet.register_all()
    body = profile(load_estimate_s=PRIOR_LOAD, warm_estimate_s=PRIOR_WARM, **fields)
    fleet.ctl.put_profile("m", body, fleet.now)
    return fleet


def _teach(ctl: Controller, host_id: str, *, load: float, warm: float, now: float) -> None:
    for _ in range(4):  # four samples: authoritative
        ctl.timings.record(Phase.LOAD, host_id, "m", "", load, now)
        ctl.timings.record(Phase.WARM, host_id, "m", "", warm, now)


def _with_demand(snap: FleetSnapshot, **demand: float) -> FleetSnapshot:
    return snap.model_copy(
        update={
            "policy": Policy(demand_headroom_fraction=0.0),
            "demand": {"m": DemandEntry(**demand)},  # type: ignore[arg-type]
        }
    )


def test_learned_timings_of_one_host_do_not_score_another_host(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path, [FakeNode("a-slow"), FakeNode("b-fast")])
    _teach(fleet.ctl, "b-fast", load=FAST_LOAD, warm=FAST_WARM, now=fleet.now)
    snap = fleet.ctl.snapshot(fleet.now)
    model = snap.models[0]
    # The profile keeps the operator's priors: no host's learning rewrites it.
    assert (model.load_estimate_s, model.warm_estimate_s) == (PRIOR_LOAD, PRIOR_WARM)
    # An unknown host pays the configured prior path: 60 + 20 s.
    assert snap.startup_s(model, "a-slow", cached=False) == pytest.approx(80.0)
    # The learned host pays its own path: 10 + 5 s; with cached weights no fetch: 5 s.
    assert snap.startup_s(model, "b-fast", cached=False) == pytest.approx(15.0)
    assert snap.startup_s(model, "b-fast", cached=True) == pytest.approx(5.0)


def test_lookahead_uses_the_fastest_eligible_path_not_an_ineligible_fast_host(
    tmp_path: Path,
) -> None:
    fleet = _fleet(
        tmp_path, [FakeNode("a-slow"), FakeNode("b-fast", state="draining")], max_replicas=8
    )
    _teach(fleet.ctl, "b-fast", load=FAST_LOAD, warm=FAST_WARM, now=fleet.now)
    snap = _with_demand(fleet.ctl.snapshot(fleet.now), offered_concurrency=2.0, trend=1.2)
    # b-fast drains, so the next replica starts on a-slow over the prior path (80 s):
    # load = 2.0 + 1.2/min x 80/60 min = 3.6; replicas = ceil(3.6 / (1.0 x 0.75)) = 5.
    # (The fast host's 15 s path would give 2.0 + 0.3 = 2.3 -> ceil(3.07) = 4.)
    assert compute_targets(snap)["m"].desired == 5


def test_lookahead_is_cache_aware(tmp_path: Path) -> None:
    cached = FakeNode("c-cached", cached={"m"})
    fleet = _fleet(tmp_path, [FakeNode("a-slow"), cached], max_replicas=8)
    snap = _with_demand(fleet.ctl.snapshot(fleet.now), offered_concurrency=2.0, trend=1.2)
    # c-cached holds the weights: warm only, 20 s: 2.0 + 1.2 x 20/60 = 2.4 -> ceil(3.2) = 4.
    assert compute_targets(snap)["m"].desired == 4


def test_placement_prefers_the_host_with_the_faster_learned_path(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path, [FakeNode("a-slow"), FakeNode("b-fast")], min_replicas=1)
    _teach(fleet.ctl, "b-fast", load=FAST_LOAD, warm=FAST_WARM, now=fleet.now)
    plan = make_plan(fleet.ctl.snapshot(fleet.now), engine="heuristic")
    # Identical hosts; only b-fast's 15 s cold path (vs 80 s) tells them apart.
    assert [a.host_id for a in plan.placed("m")] == ["b-fast"]


def test_per_host_timings_survive_a_restart_and_old_state_files_load(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path, [FakeNode("a-slow"), FakeNode("b-fast")])
    _teach(fleet.ctl, "b-fast", load=FAST_LOAD, warm=FAST_WARM, now=fleet.now)
    fleet.ctl.save(fleet.now)
    again = fleet.start("ctl-a")
    fleet.register_all()
    snap = again.snapshot(fleet.now)
    assert snap.startup_s(snap.models[0], "b-fast", cached=False) == pytest.approx(15.0)
    assert snap.startup_s(snap.models[0], "a-slow", cached=False) == pytest.approx(80.0)

    # A state file written before timings were kept has no `timings` key at all.
    path = tmp_path / "old" / "state.json"
    path.parent.mkdir()
    doc = json.loads((tmp_path / "state.json").read_text())
    doc.pop("timings")
    path.write_text(json.dumps(doc))
    old = Controller(StateStore(path), now=T0, config=FAST)
    assert old.restored and len(old.timings) == 0 and "m" in old.profiles


host_case = st.fixed_dictionaries(
    {
        "state": st.sampled_from(["accepting", "throttled", "draining"]),
        "tagged": st.booleans(),
        "cached": st.booleans(),
        "live": st.booleans(),
        "load": st.none() | st.sampled_from([1.0, 30.0, 90.0]),
        "warm": st.none() | st.sampled_from([2.0, 10.0, 40.0]),
    }
)


@pytest.mark.property
@settings(max_examples=60, deadline=None)
@given(cases=st.lists(host_case, min_size=0, max_size=6))
def test_next_replica_path_matches_a_brute_force_over_every_host(cases: list[dict]) -> None:
    model = ModelProfile(
        model_id="m", memory_mb=1, required_tags=["gpu"], load_estimate_s=60.0, warm_estimate_s=20.0
    )
    hosts, learned = [], {}
    for i, case in enumerate(cases):
        host_id = f"h{i}"
        hosts.append(
            Host(
                host_id=host_id,
                capacity_mb=1000,
                state=case["state"],
                tags=["gpu"] if case["tagged"] else [],
                cached_models=["m"] if case["cached"] else [],
                residencies=[Residency(model_id="m", memory_mb=1)] if case["live"] else [],
                last_heartbeat=T0,
            )
        )
        if case["load"] is not None or case["warm"] is not None:
            learned[host_id] = LearnedStartup(load_s=case["load"], warm_s=case["warm"])
    snap = FleetSnapshot(now=T0, hosts=hosts, models=[model], learned_startup={"m": learned})
    # Brute force: every host that admits work, carries the tag and holds no live copy.
    paths = []
    for case in cases:
        if case["state"] == "draining" or not case["tagged"] or case["live"]:
            continue
        warm = case["warm"] if case["warm"] is not None else 20.0
        load = case["load"] if case["load"] is not None else 60.0
        paths.append(warm + (0.0 if case["cached"] else load))
    expected = min(paths) if paths else 80.0
    assert next_replica_startup_s(model, snap) == pytest.approx(expected)
