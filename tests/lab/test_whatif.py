"""grid.lab.whatif: snapshot edits, variant plans, the difference table, and the N−1 drill.

Expected values are worked by hand from the tiny fleets below (headroom 0, so a host's budget
is its capacity less its reserve; one replica of a model per host).
"""

from __future__ import annotations

import math

import pytest

from grid.fleet.errors import GridError
from grid.fleet.models import FleetSnapshot, Host
from grid.lab import whatif
from grid.lab.whatif_drill import drill
from tests.planner.fleets import NOW, host, model, snapshot, want

pytestmark = pytest.mark.unit

NO_HEADROOM = {"memory_headroom_fraction": 0.0}


def _two_hosts() -> FleetSnapshot:
    """h1 20000 MB, h2 12000 MB; a (5000 MB) wants 2 replicas, b (10000 MB, priority 100) 1.

    Baseline: a on h1 and h2, b on h1 (a + b = 15000 fits h1, not h2); h3 is cleared only for
    public data, so no model can use it.
    """
    return snapshot(
        [
            host("h1", 20000),
            host("h2", 12000),
            host("h3", 64000, data_tiers=["public"]),
        ],
        [
            model("a", 5000, max_replicas=2),
            model("b", 10000, priority=100, max_replicas=1),
        ],
        {"a": want(2), "b": want(1)},
        policy=NO_HEADROOM,
    )


def test_remove_hosts_drops_them_and_leaves_the_input_alone() -> None:
    snap = _two_hosts()
    out = whatif.remove_hosts(snap, ["h2"])
    assert [h.host_id for h in out.hosts] == ["h1", "h3"]
    assert [h.host_id for h in snap.hosts] == ["h1", "h2", "h3"]
    with pytest.raises(GridError) as err:
        whatif.remove_hosts(snap, ["nope"])
    assert err.value.code == "unknown_host"


def test_add_hosts_derives_fresh_ids_and_empty_hosts() -> None:
    snap = snapshot([host("t-1", 1000)], [model("a", 100, pinned_hosts=["t-3"])], {"a": want(1)})
    template = Host.model_validate({"host_id": "t", "capacity_mb": 9000, "tags": ["gpu"]})
    out = whatif.add_hosts(snap, template, 3)
    # t-1 is taken by a host and t-3 named by a pin: the new hosts are t-2, t-4, t-5.
    assert [h.host_id for h in out.hosts] == ["t-1", "t-2", "t-4", "t-5"]
    added = out.hosts[1:]
    assert all(h.capacity_mb == 9000 and h.tags == ["gpu"] for h in added)
    assert all(h.residencies == [] and h.last_heartbeat == NOW for h in added)
    assert len(snap.hosts) == 1


def test_scale_demand_all_models_and_one_model() -> None:
    # desired = ceil(oc x 1.2 / 0.75): 1.5 -> ceil(2.4) = 3; doubled 3.0 -> ceil(4.8) = 5.
    snap = snapshot(
        [host(f"h{i}", 64000) for i in range(8)],
        [model("a", 1000, max_replicas=8), model("b", 1000, max_replicas=8)],
        {"a": {"offered_concurrency": 1.5}, "b": {"offered_concurrency": 1.5}},
    )
    base = whatif.plan(snap)
    assert base.desired_replicas == {"a": 3, "b": 3}
    doubled = whatif.plan(whatif.scale_demand(snap, 2.0))
    assert doubled.desired_replicas == {"a": 5, "b": 5}
    only_a = whatif.plan(whatif.scale_demand(snap, 2.0, "a"))
    assert only_a.desired_replicas == {"a": 5, "b": 3}
    assert snap.demand["a"].offered_concurrency == 1.5  # the input is left alone
    override = snapshot([host("h", 8000)], [model("a", 10, max_replicas=9)], {"a": want(3)})
    assert whatif.scale_demand(override, 1.5).demand["a"].desired_replicas == math.ceil(4.5)
    with pytest.raises(GridError) as err:
        whatif.scale_demand(snap, -1.0)
    assert err.value.code == "invalid_factor"


def test_change_profile_is_validated_and_changes_the_plan() -> None:
    snap = _two_hosts()
    # b grown to 16000 MB: h1 can hold b (16000) but not a besides it (21000 > 20000).
    bigger = whatif.change_profile(snap, "b", memory_mb=16000)
    assert snap.model("b") is not None and snap.model("b").memory_mb == 10000
    summary = whatif.summarize("bigger", bigger, whatif.plan(bigger))
    assert summary.placed == 2  # b on h1, a on h2 only
    assert summary.unmet_by_model == {"a": 1}
    with pytest.raises(GridError) as err:
        whatif.change_profile(snap, "b", memory_mb=-5)
    assert err.value.code == "invalid_value"
    with pytest.raises(GridError):
        whatif.change_profile(snap, "b", min_replicas=3)


def test_difference_table_against_the_baseline() -> None:
    snap = _two_hosts()
    summaries = whatif.plan_variants(
        {"baseline": snap, "without h2": whatif.remove_hosts(snap, ["h2"])}
    )
    rows = whatif.difference_table(summaries)
    assert [r["variant"] for r in rows] == ["baseline", "without h2"]
    assert rows[0]["placed"] == 3 and rows[0]["unmet"] == 0
    # Without h2 only h1 is left: a once and b once (15000 MB), a's second replica unmet.
    assert rows[1]["placed"] == 2 and rows[1]["Δ placed"] == -1 and rows[1]["Δ unmet"] == 1
    assert "insufficient_capacity=1" in str(rows[1]["unmet by code"])
    assert rows[0]["memory used MB"] == 5000 + 5000 + 10000
    assert summaries[0].memory_allocatable_mb == 20000 + 12000 + 64000
    assert summaries[0].host_memory == {
        "h1": {"a": 5000, "b": 10000},
        "h2": {"a": 5000},
        "h3": {},
    }
    text = whatif.format_table(rows)
    assert "without h2" in text.splitlines()[3]


def test_demand_growth_is_monotone_in_unmet_here() -> None:
    snap = snapshot(
        [host("h1", 8000), host("h2", 8000)],
        [model("a", 3000, max_replicas=8)],
        {"a": {"offered_concurrency": 0.5}},
        policy=NO_HEADROOM,
    )
    # 0.5 x f x 1.2 / 0.75 = 0.8 f replicas: 1x -> 1, 2x -> 2, 3x -> 3, 4x -> 4; two hosts.
    unmet = [s.unmet for s in whatif.demand_growth(snap, [1, 2, 3, 4])]
    assert unmet == [0, 0, 1, 2]


def test_drill_hand_worked() -> None:
    result = drill(_two_hosts())
    rows = {r.host_id: r for r in result.rows}
    assert result.baseline_placed == 3 and result.baseline_desired == 3
    # h1 fails: h2 (12000 MB) holds a (5000) or b (10000), not both; b has priority, so a
    # loses both replicas; b's only replica was on h1.
    assert rows["h1"].replicas == 2
    assert rows["h1"].unmet == {"a": 2}
    assert rows["h1"].last_replica == ["b"]
    assert rows["h1"].lost == ["a"]
    # h2 fails: h1 keeps a and b (15000 MB); a is one replica short; nothing lost.
    assert rows["h2"].replicas == 1
    assert rows["h2"].unmet == {"a": 1}
    assert rows["h2"].last_replica == [] and rows["h2"].lost == []
    # h3 carries nothing in the plan: its failure costs nothing and it is not re-planned.
    assert rows["h3"].replicas == 0 and rows["h3"].unmet == {} and not rows["h3"].replanned
    table = result.table()
    assert table[0]["host"] == "h1" and table[0]["unmet after failure"] == 2
    doc = result.to_dict()
    assert doc["hosts"][0] == {
        "host_id": "h1",
        "replicas": 2,
        "unmet_replicas": 2,
        "unmet": {"a": 2},
        "last_replica": ["b"],
        "lost": ["a"],
    }


def test_drill_skip_of_empty_hosts_matches_replanning() -> None:
    # The shortcut (an empty host's failure costs nothing) checked by planning without it.
    snap = _two_hosts()
    after = whatif.plan(whatif.remove_hosts(snap, ["h3"]))
    assert sum(whatif.placed_by_model(after).values()) == 3
