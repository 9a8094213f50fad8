"""Suite-wide pytest configuration: the `smoke` selection (issue 14, item 14).

`scripts/test.sh -m smoke` runs a fast cross-section for local work (well under a minute on two
cores): the unit tests of the files below, one or two per layer, plus any test marked
`pytest.mark.smoke` itself. Property, service, engine and slow tests are never smoke here.
The full suite (no -m) stays the CI default (.ci/run).
"""

from __future__ import annotations

import pytest

SMOKE_FILES = (
    "tests/fleet/test_snapshot.py",
    "tests/fleet/test_value_ceilings.py",
    "tests/cli/test_cli_errors.py",
    "tests/cli/test_render.py",
    "tests/demand/test_classify.py",
    "tests/demand/test_forecast.py",
    "tests/planner/test_eligibility.py",
    "tests/planner/test_spec_examples.py",
    "tests/planner/test_validate.py",
    "tests/runtime/test_gates.py",
    "tests/runtime/test_reconcile_examples.py",
    "tests/router/test_choose.py",
    "tests/router/test_breaker.py",
    "tests/node/test_protection.py",
    "tests/api/test_settings.py",
)
NEVER_SMOKE = ("property", "service", "engine", "slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path in SMOKE_FILES and not any(item.get_closest_marker(m) for m in NEVER_SMOKE):
            item.add_marker(pytest.mark.smoke)


@pytest.fixture(autouse=True)
def _own_current_controller(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test has its own current-controller file (grid/cli/context.py) and no $GRID_URL:
    a test's `grid up` or `grid test start` never points another test (or the user's shell)
    at its fleet."""
    monkeypatch.setenv("GRID_CONTEXT", str(tmp_path_factory.mktemp("context") / "context.json"))
    monkeypatch.delenv("GRID_URL", raising=False)
