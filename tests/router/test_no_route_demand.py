"""Issue 8 defect 6 through the real proxy: a 503 "no ready route" is demand, not an error."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service.harness import ControllerProcess

pytestmark = pytest.mark.service


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    process = ControllerProcess(Path(tmp_path_factory.mktemp("noroute")) / "ctl")
    process.start()
    try:
        yield process
    finally:
        process.stop()


def _forecast(server: ControllerProcess, model_id: str, at_least: int) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        with server.admin() as admin:
            status = admin.status()
        seen = status["counters"]["observations_accepted"] >= at_least
        if seen or time.monotonic() > deadline:
            forecast: dict[str, Any] = status["forecasts"].get(model_id, {})
            return forecast
        time.sleep(0.1)


def test_unroutable_requests_are_demand_without_an_error_rate(server: ControllerProcess) -> None:
    with server.admin() as admin:
        admin.put_model("delta", {"memory_mb": 200, "max_replicas": 2})
    body = {"model": "delta", "messages": [{"role": "user", "content": "hi"}]}
    for _ in range(4):
        reply = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=10)
        assert reply.status_code == 503
        assert reply.json()["error"]["code"] == "model_unavailable"
    forecast = _forecast(server, "delta", 4)
    assert forecast["rpm"] > 0  # the refused requests still count as arrivals
    assert forecast["error_rate"] == 0.0  # but no engine failed
