"""The dashboard on a logical fleet (`grid test start`: a real controller, two node agents, real
llama.cpp children) in headless Chromium: a warm appears on the fleet page without a reload,
an unmet replica shows its binding constraint, the bounds action is refused without the token
and takes effect with it, and no secret reaches the page. Screenshots: see tests/ui/browser.py.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grid.api.settings import load_settings
from grid.fleet.errors import GridError
from grid.lab.logical_fleet import LogicalFleet
from grid.lab.logical_fleet_settings import FleetSettings, resolve_model
from grid.node.artifacts import SMOLLM2_MODEL_ID
from grid.node.engines.binary import llama_server_binary
from tests.service.harness import free_port
from tests.ui.browser import (
    CHIP_STATES,
    answer_token,
    chromium,
    click,
    console_errors,
    network_bodies,
    output_dir,
    read,
    require_browser,
    storage_dump,
    wait_until,
)

pytestmark = pytest.mark.engine


def _engine_port_base() -> int:
    """A block of 20 free loopback ports (two nodes' engine ranges)."""
    for base in range(41000, 47000, 37):
        with contextlib.ExitStack() as stack:
            try:
                for port in range(base, base + 20):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return base
    raise RuntimeError("no free block of engine ports")


@pytest.fixture
def logical(tmp_path: Path) -> Iterator[tuple[LogicalFleet, FleetSettings]]:
    require_browser()
    try:
        llama_server_binary()
        model = resolve_model(SMOLLM2_MODEL_ID, tmp_path / "weights")
    except GridError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"{exc.message} {exc.fix}")
    fleet = LogicalFleet(tmp_path / "run")
    settings = FleetSettings(
        machines=2,
        model=model,
        capacities_mb=[1024, 1024],
        port=free_port(),
        engine_port_base=_engine_port_base(),
        heartbeat_s=0.5,
        min_replicas=1,
        max_replicas=1,
    )
    try:
        report = fleet.start(settings, wait_ready_s=90)
        assert report.ready_hosts, "smollm2 did not become READY"
        yield fleet, settings
    finally:
        fleet.stop(timeout_s=30)


def _chips(driver: Any, model_id: str) -> dict[str, str]:
    """host -> the model's shown state on that host's card."""
    return dict(read(driver, CHIP_STATES.replace("arguments[0]", repr(model_id))))


def _set_bounds(driver: Any, low: int, high: int) -> None:
    click(driver, f'[data-act="bounds"][data-model="{SMOLLM2_MODEL_ID}"]')
    for value in (low, high):
        alert = wait_until(driver, lambda d: d.switch_to.alert, 10, "the bounds prompt")
        alert.send_keys(str(value))
        alert.accept()


UNMET = (
    "const row = document.querySelector('tr.unmet[data-unmet=\"%s\"]');"
    "if (!row) return null;"
    "return [row.innerText, [...row.querySelectorAll('ul.binding li')].map(li => li.innerText)];"
)


def test_dashboard_follows_a_real_warm_and_explains_an_unmet_replica(
    logical: tuple[LogicalFleet, FleetSettings], tmp_path: Path
) -> None:
    fleet, settings = logical
    url = fleet.url()
    assert url is not None
    config = load_settings(fleet.controller_dir)
    secrets = [config.operator_token, config.node_signing_key]
    for host_id in fleet.hosts(settings):
        secrets.append((fleet.node_dir(host_id) / "node.token").read_text(encoding="utf-8").strip())
    shots = output_dir(tmp_path, "ui-logical-fleet")
    with chromium(tmp_path / "profile") as driver:
        driver.get(f"{url}/ui")
        wait_until(driver, lambda d: "ready" in _chips(d, SMOLLM2_MODEL_ID).values(), 20,
                   "smollm2 ready on the page")  # fmt: skip
        assert console_errors(driver) == []
        driver.save_screenshot(str(shots / "fleet-ready.png"))
        driver.execute_script("window.__gridNoReload = 42;")
        before = _chips(driver, SMOLLM2_MODEL_ID)
        (first,) = before
        (second,) = [h for h in fleet.hosts(settings) if h != first]

        # Without the token: refused, the bounds stay 1-1.
        _set_bounds(driver, 2, 2)
        answer_token(driver, "")
        wait_until(driver, lambda d: "Refused (401" in d.find_element("id", "notice").text, 10,
                   "the refusal")  # fmt: skip
        with_status = fleet.controller_status() or {}
        profile = next(p for p in with_status["profiles"] if p["model_id"] == SMOLLM2_MODEL_ID)
        assert (profile["min_replicas"], profile["max_replicas"]) == (1, 1)

        # With it: a second replica warms on the other machine, and the page follows.
        _set_bounds(driver, 2, 2)
        answer_token(driver, config.operator_token)
        seen: list[str] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            state = _chips(driver, SMOLLM2_MODEL_ID).get(second)
            if state and (not seen or seen[-1] != state):
                seen.append(state)
            if state == "ready":
                break
            time.sleep(0.1)
        assert seen and seen[-1] == "ready", f"states seen on {second}: {seen}"
        assert driver.execute_script("return window.__gridNoReload;") == 42  # no reload
        driver.save_screenshot(str(shots / "warmed.png"))

        # A third replica on two machines cannot be placed: the page names what binds it.
        _set_bounds(driver, 3, 3)  # the token is remembered for this tab: no dialog
        text, bindings = wait_until(
            driver, lambda d: read(d, UNMET % SMOLLM2_MODEL_ID), 30, "the unmet replica"
        )
        assert bindings and all(b.strip() for b in bindings), text
        assert "1 replica(s) unmet" in text
        driver.save_screenshot(str(shots / "unmet.png"))

        refused = console_errors(driver)  # only the one refused request
        assert len(refused) == 1 and "401" in refused[0]
        kept = storage_dump(driver) + driver.page_source
        responses = network_bodies(driver)
        for secret in secrets:
            assert secret not in kept
            assert all(secret not in body for _u, body in responses)
