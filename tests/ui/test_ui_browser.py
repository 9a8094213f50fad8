"""The dashboard in a real headless Chromium against a real controller process with fake nodes:
render without console errors, live updates, the token flow of an operator action, and no
secret in the page, its storage or any response it received."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.service.harness import ControllerProcess, HttpNode, converge, mint
from tests.support.fake_node import FakeNode
from tests.ui.browser import (
    HOST_STATES,
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

pytestmark = pytest.mark.service

HOSTS = {"web-a": 8192, "web-b": 4096}


class Heartbeats:
    """The fake nodes keep heartbeating (and obeying commands) while the browser looks."""

    def __init__(self, nodes: list[HttpNode]) -> None:
        self.nodes = nodes
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.3):
            for node in self.nodes:
                try:
                    node.poll()
                except Exception:  # a restart in between: the next round registers again
                    continue

    def __enter__(self) -> Heartbeats:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[ControllerProcess, list[HttpNode], list[str]]]:
    require_browser()
    server = ControllerProcess(tmp_path / "ctl")
    server.start()
    nodes: list[HttpNode] = []
    secrets = [server.settings.operator_token, server.settings.node_signing_key]
    try:
        for host_id, capacity in HOSTS.items():
            token = mint(server, host_id)
            secrets.append(token)
            node = HttpNode(FakeNode(host_id, capacity_mb=capacity), server.url, token)
            node.register()
            nodes.append(node)
        with server.admin() as admin:
            admin.put_model("tiny", {"memory_mb": 1024, "min_replicas": 1, "max_replicas": 2})
            admin.set_mode("automatic")
        converge(nodes, rounds=6)
        yield server, nodes, secrets
    finally:
        for node in nodes:
            node.close()
        server.stop()


def _state(driver: Any, host_id: str) -> str:
    return str(read(driver, HOST_STATES).get(host_id))


def _notice(driver: Any) -> str:
    return str(driver.find_element("id", "notice").text)


def test_dashboard_renders_updates_and_guards_actions(fleet, tmp_path: Path) -> None:
    server, nodes, secrets = fleet
    shots = output_dir(tmp_path, "ui-browser")
    with Heartbeats(nodes), chromium(tmp_path / "profile") as driver:
        driver.get(f"{server.url}/ui")
        wait_until(driver, lambda d: d.find_elements("css selector", ".host"), 10, "host cards")
        names = {
            e.get_attribute("data-host") for e in driver.find_elements("css selector", ".host")
        }
        assert names == set(HOSTS)
        wait_until(driver, lambda d: d.find_elements("css selector", '.chip[data-state="ready"]'),
                   10, "the ready replica")  # fmt: skip
        assert "recommend mode" not in driver.page_source.lower()
        driver.save_screenshot(str(shots / "fleet.png"))
        assert console_errors(driver) == []

        # Drain without a token: refused, nothing changes.
        click(driver, '[data-act="drain"][data-host="web-b"]')
        answer_token(driver, "")
        wait_until(driver, lambda d: "Refused (401" in _notice(d), 10, "the 401 refusal")
        # With a wrong token: refused (403), and the token is asked for again.
        click(driver, '[data-act="drain"][data-host="web-b"]')
        answer_token(driver, "not-the-token")
        wait_until(driver, lambda d: "Refused (403" in _notice(d), 10, "the 403 refusal")
        assert _state(driver, "web-b") == "accepting"
        with server.public() as public:
            assert [
                h["state"]
                for h in public.status().model_dump(mode="json")["hosts"]
                if h["host_id"] == "web-b"
            ] == ["accepting"]
        refusals = console_errors(driver)  # the browser logs each refused request, nothing else
        assert len(refusals) == 2 and all("401" in r or "403" in r for r in refusals)

        # With the token: it takes effect and the card follows without a reload.
        click(driver, '[data-act="drain"][data-host="web-b"]')
        answer_token(driver, server.settings.operator_token)
        wait_until(driver, lambda d: _state(d, "web-b") == "draining", 10, "web-b draining")
        driver.save_screenshot(str(shots / "drained.png"))
        # Once per tab: undrain does not ask again.
        click(driver, '[data-act="undrain"][data-host="web-b"]')
        wait_until(driver, lambda d: _state(d, "web-b") == "accepting", 10, "web-b accepting")
        assert driver.find_element("id", "token-dialog").get_attribute("open") is None

        # A mode change from the page, then the recommend-mode note with its command.
        click(driver, '#mode-select option[value="recommend"]')
        driver.find_element("id", "mode-set").click()
        note = wait_until(
            driver,
            lambda d: d.find_element("id", "mode-note").text,
            10,
            "the recommend-mode note",
        )
        assert "grid allocator mode automatic" in note
        driver.save_screenshot(str(shots / "recommend.png"))

        # No secret anywhere the page could keep or show it.
        assert console_errors(driver) == []
        kept = storage_dump(driver) + driver.page_source
        responses = network_bodies(driver)
        assert any(url.endswith("/ui/view.json") for url, _b in responses)
        for secret in secrets:
            assert secret not in kept
            assert all(secret not in body for _u, body in responses)
    assert (shots / "fleet.png").stat().st_size > 10_000
