"""Headless Debian Chromium driven by Selenium (with /usr/bin/chromedriver), for the dashboard.

Outside CI a missing browser, driver or `selenium` skips the browser tests with the install
command; in CI (`CI` set) it fails them, because `scripts/install.sh` installs all three.
Chromium runs as root here, so it gets --no-sandbox, and a fresh empty profile per test.
Screenshots go to $GRID_UI_OUTPUT when set, else to the test's own tmp folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--password-store=basic",
    "--window-size=1400,1000",
)
OUTPUT_ENV = "GRID_UI_OUTPUT"


def _missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            return (
                f"{path} is missing: run scripts/install.sh as root "
                "(apt-get install chromium chromium-driver)"
            )
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is missing: run scripts/install.sh (pip install -e '.[dev]')"
    return None


def require_browser() -> None:
    why = _missing()
    if why is None:
        return
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


def output_dir(tmp_path: Path, name: str) -> Path:
    base = Path(os.environ[OUTPUT_ENV]) if os.environ.get(OUTPUT_ENV) else tmp_path
    folder = base / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    """A headless Chromium with console and network logging, closed afterwards."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must never download
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    shutil.rmtree(profile, ignore_errors=True)
    profile.mkdir(parents=True)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(driver: Any, condition: Callable[[Any], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            last = condition(driver)
            if last:
                return last
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def console_errors(driver: Any) -> list[str]:
    """SEVERE console entries since the last call (the log is drained on read)."""
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def network_bodies(driver: Any) -> list[tuple[str, str]]:
    """(url, body) of every response the page received since the last call, read back through
    the DevTools protocol (bodies the browser no longer holds are skipped)."""
    out: list[tuple[str, str]] = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") != "Network.responseReceived":
            continue
        params = message["params"]
        url = params["response"]["url"]
        with contextlib.suppress(Exception):
            body = driver.execute_cdp_cmd(
                "Network.getResponseBody", {"requestId": params["requestId"]}
            )
            out.append((url, str(body.get("body", ""))))
    return out


def storage_dump(driver: Any) -> str:
    """Everything the page could keep: web storage, cookies, its URL and history length."""
    script = (
        "const all = {};"
        "for (const s of [localStorage, sessionStorage])"
        "  for (let i = 0; i < s.length; i++) all[s.key(i)] = s.getItem(s.key(i));"
        "return JSON.stringify({storage: all, cookie: document.cookie, url: location.href,"
        " history: history.length});"
    )
    cookies = json.dumps(driver.get_cookies())
    return str(driver.execute_script(script)) + cookies


def click(driver: Any, css: str, timeout_s: float = 10) -> None:
    """Click the element `css` names, finding it again if a poll replaced it meanwhile."""
    from selenium.common.exceptions import StaleElementReferenceException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            driver.find_element("css selector", css).click()
            return
        except StaleElementReferenceException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def answer_token(driver: Any, text: str) -> None:
    """Type `text` (empty: none) into the page's token dialog and confirm."""
    wait_until(
        driver,
        lambda d: d.find_element("id", "token-dialog").get_attribute("open") is not None,
        10,
        "the token dialog",
    )
    field = driver.find_element("id", "token-input")
    field.clear()
    if text:
        field.send_keys(text)
    driver.find_element("id", "token-ok").click()


def read(driver: Any, script: str) -> Any:
    """One atomic read of the page (a poll may replace elements between Selenium calls)."""
    return driver.execute_script(script)


CHIP_STATES = (
    "const out = {};"
    "for (const card of document.querySelectorAll('.host'))"
    "  for (const chip of card.querySelectorAll('.chip[data-model=\"' + arguments[0] + '\"]'))"
    "    out[card.dataset.host] = chip.dataset.state;"
    "return out;"
)
HOST_STATES = (
    "const out = {};"
    "for (const card of document.querySelectorAll('.host'))"
    "  out[card.dataset.host] = card.dataset.state;"
    "return out;"
)
