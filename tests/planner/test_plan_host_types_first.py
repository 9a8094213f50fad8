"""pipeline.py: on fleets that aggregate (up to early_types_max_hosts hosts) the host-type
model runs before the vacate moves (phase `host_types`), and a proof there skips them;
deterministic plans run it after them (`host_types_late`); fleets that do not aggregate have
neither. The phase order is read from the Deadline's clock (phases are recorded as they end)."""

from __future__ import annotations

import pytest

from grid.lab.fleetgen import generate_fleet
from grid.lab.fleetgen_production import generate_production_fleet
from grid.planner.deadline import Deadline
from grid.planner.plan import make_plan
from grid.planner.validate import violations

pytestmark = pytest.mark.unit


def _phases(snap: object, *, deterministic: bool) -> list[str]:
    deadline = Deadline(3.0)
    plan = make_plan(
        snap,  # type: ignore[arg-type]
        deterministic=deterministic,
        deadline=deadline,
        soft_stage_limit_s=0.05,  # the soft levels' proofs are not what this test is about
    )
    assert violations(snap, plan) == []  # type: ignore[arg-type]
    return list(deadline.spent)


def test_host_types_run_before_vacate_on_a_fleet_that_aggregates() -> None:
    order = _phases(generate_production_fleet(128, 24, 64), deterministic=False)
    assert "host_types" in order and "vacate" in order and "host_types_late" not in order
    assert order.index("host_types") < order.index("vacate")


def test_a_deterministic_plan_keeps_vacate_first() -> None:
    order = _phases(generate_production_fleet(128, 24, 64), deterministic=True)
    assert "host_types" not in order
    assert order.index("vacate") < order.index("host_types_late")


def test_a_fleet_that_does_not_aggregate_has_no_host_type_phase() -> None:
    order = _phases(generate_fleet(24, 12, 7), deterministic=False)
    assert "host_types" not in order and "host_types_late" not in order and "vacate" in order
