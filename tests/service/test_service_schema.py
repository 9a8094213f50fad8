"""Schemathesis against the served OpenAPI document: no generated request may cause a 5xx.

Runs every operation with and without the operator capability against a real loopback server
(cases derived deterministically). Skipped when schemathesis is not installed (dev extra).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.service.harness import ControllerProcess, mint

schemathesis = pytest.importorskip("schemathesis")

pytestmark = pytest.mark.service


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    server = ControllerProcess(Path(tmp_path_factory.mktemp("schema")) / "ctl")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("credential", ["none", "operator", "node"])
def test_no_generated_request_causes_a_server_error(
    live: ControllerProcess, credential: str
) -> None:
    headers = {
        "none": {},
        "operator": {"X-Grid-Allocator-Token": live.settings.operator_token},
        "node": {"X-Grid-Allocator-Node-Token": mint(live, "h-schema")},
    }[credential]
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 9
    failures: list[str] = []
    calls: list[int] = []
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=15,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: object) -> None:
            response = case.call(headers=headers)  # type: ignore[attr-defined]
            calls.append(response.status_code)
            if response.status_code >= 500:
                label = case.operation.label  # type: ignore[attr-defined]
                failures.append(f"{label}: {response.status_code} {response.text[:200]}")

        run()
    assert failures == []
    assert len(calls) >= 5 * len(operations)
    if credential == "operator":
        assert any(200 <= code < 300 for code in calls)
