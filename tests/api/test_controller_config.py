"""config.json's `controller` section: known names are applied, misspelt ones refused."""

from __future__ import annotations

import pytest

from grid.api.server import controller_config
from grid.fleet.errors import GridError

pytestmark = pytest.mark.unit


def test_known_settings_and_demand_settings_are_applied() -> None:
    config = controller_config({"plan_budget_s": 3.5, "demand": {"bucket_s": 7.0}})
    assert config.plan_budget_s == 3.5 and config.demand.bucket_s == 7.0


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"plan_budget": 3.0}, "plan_budget"),
        ({"engine": "cpsat", "periodic_interval": 1.0}, "periodic_interval"),
        ({"demand": {"bucket": 5.0}}, "controller.demand setting(s): bucket"),
        ({"demand": 5}, "demand must be an object"),
    ],
)
def test_a_misspelt_setting_is_refused_by_name(overrides: dict[str, object], named: str) -> None:
    with pytest.raises(GridError) as caught:
        controller_config(overrides)
    assert caught.value.code == "invalid_controller_config"
    assert named in caught.value.message and caught.value.fix
