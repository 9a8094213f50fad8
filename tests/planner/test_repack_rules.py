"""A repack move obeys every hard rule of placement, not only memory (issue 8, #8).

The mover `small` already runs on `dest` beside incumbents that the plan keeps and that leave
it no room there: `big` allows one model per host, or the host's two model slots are taken.
The plan therefore drops small's copy on dest. When `need` (priority 10, directly demanded)
cannot fit `src` because small serves there, a repack must not "move" small back onto dest:
that breaks the ceiling or the slots. The only valid staging evicts small from src (it has a
lower priority and no protection); both engines' plans must pass the validator.
"""

from __future__ import annotations

import pytest

from grid.fleet.models import FleetSnapshot
from grid.planner.plan import make_plan
from grid.planner.validate import violations
from tests.planner.fleets import NOW, host, model, resident, snapshot, want

pytestmark = pytest.mark.unit

ENGINES = ("heuristic", "cpsat")
OLD = NOW - 90_000  # loaded long ago: no minimum-residency protection


def _fleet(rule: str) -> FleetSnapshot:
    if rule == "ceiling":
        dest_models = [model("big", 40_000, priority=50, min_replicas=1, max_colocated_models=1)]
        dest_host = host(
            "dest",
            65_536,
            residencies=[
                resident("big", 40_000, loaded_at=OLD),
                resident("small", 1000, loaded_at=OLD),
            ],
        )
    else:  # two model slots, both taken by kept incumbents (too big to move to src)
        dest_models = [
            model("a", 8000, priority=50, min_replicas=1),
            model("b", 8000, priority=50, min_replicas=1),
        ]
        dest_host = host(
            "dest",
            65_536,
            max_models=2,
            residencies=[
                resident("a", 8000, loaded_at=OLD),
                resident("b", 8000, loaded_at=OLD),
                resident("small", 1000, loaded_at=OLD),
            ],
        )
    return snapshot(
        [host("src", 8192, residencies=[resident("small", 1000, loaded_at=OLD)]), dest_host],
        [
            *dest_models,
            model("small", 1000, priority=0, max_replicas=2),
            model("need", 7500, priority=10),
        ],
        {"small": want(2), "need": want(1)},
        policy={"memory_headroom_fraction": 0.0},
    )


@pytest.mark.parametrize("rule", ["ceiling", "slots"])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_repack_never_moves_an_incumbent_past_a_ceiling_or_slot_limit(
    engine: str, rule: str
) -> None:
    snap = _fleet(rule)
    plan = make_plan(snap, engine=engine, time_limit_s=5, deterministic=True)
    assert violations(snap, plan) == []
    on_dest = {a.model_id for a in plan.assignments if a.host_id == "dest"}
    assert "small" not in on_dest
    # small cannot move anywhere, so the demanded model's room comes from evicting it.
    assert [(p.victim_model_id, p.host_id, p.relocated_to) for p in plan.preemptions] == [
        ("small", "src", None)
    ]
