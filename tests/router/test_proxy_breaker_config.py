"""The controller process reads the breaker's numbers from config.json (`breaker` section)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.router.fake_engine import FakeEngine
from tests.router.test_proxy_service import ENGINE_KEY, chat, configure, register
from tests.service.harness import REPO, ControllerProcess

pytestmark = pytest.mark.service


def test_a_configured_failure_count_and_backoff_redirect_after_one_failure(
    tmp_path: Path,
) -> None:
    # Defaults need two consecutive failures; this controller opens the circuit after one and
    # keeps it open for a minute, so the test does not depend on timing.
    server = ControllerProcess(
        tmp_path / "ctl",
        breaker={"failures_to_open": 1, "first_backoff_s": 60.0, "max_backoff_s": 120.0},
    )
    first = FakeEngine(ENGINE_KEY, "first").start()
    second = FakeEngine(ENGINE_KEY, "second").start()
    server.start()
    try:
        configure(server, "delta")
        second.delay_s = 0.3  # the first engine is preferred while both are healthy
        register(server, "b-delta", {"delta": second})
        register(server, "a-delta", {"delta": first})
        assert chat(server, "delta").json()["served_by"] == "first"
        first.mode = "500"
        assert chat(server, "delta").status_code == 500  # passed through, never replayed
        first.mode = "ok"
        served = [chat(server, "delta").json()["served_by"] for _ in range(3)]
        assert served == ["second"] * 3
        assert len(first.requests) == 2
    finally:
        server.stop()
        first.stop()
        second.stop()


def test_a_bad_breaker_setting_stops_the_server_with_its_code(tmp_path: Path) -> None:
    server = ControllerProcess(tmp_path / "ctl", breaker={"failures_to_open": 0})
    done = subprocess.run(
        [sys.executable, "-m", "grid.api.server", "--state-dir", str(server.state_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    assert "invalid_breaker_config" in done.stderr and "failures_to_open" in done.stderr
    assert "To fix:" in done.stderr and "Traceback" not in done.stderr
