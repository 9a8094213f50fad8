"""Dashboard benchmark: the fleet page of a generated fleet in headless Chromium.

    .venv/bin/python bench/bench_ui.py [--hosts 256] [--models 96] [--runs 5] [--json]

A real controller (the production app on uvicorn, loopback) holds a generated fleet
(grid.lab.fleetgen) registered through the node wire contract, in recommend mode. Chromium
(Debian's, through chromedriver; tests/ui/browser.py) opens /ui:
- first render: from navigation start to every host card on the page (performance.now() in the
  page, by a MutationObserver installed before the page loads), median and max of --runs loads;
- live update: from the heartbeat that adds a residency to one host (wall clock, same machine)
  to that host's card showing it, median and max over --runs hosts;
- page weight: every byte the first load transferred (HTML, script, style sheet, view document).
Baseline in the same run: GET /allocator/status, the document a page would otherwise read
(its size and fetch time). Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout

import httpx  # noqa: E402
import uvicorn  # noqa: E402

from bench.bench_controller import wire_update  # noqa: E402
from grid.api.app import create_app  # noqa: E402
from grid.api.auth import Credentials, new_secret  # noqa: E402
from grid.fleet.models import Residency, ResidencyState  # noqa: E402
from grid.lab.fleetgen import generate_fleet  # noqa: E402
from grid.runtime.controller import Controller, ControllerConfig, ControllerService  # noqa: E402
from grid.runtime.controller.store import StateStore  # noqa: E402
from tests.service.harness import free_port  # noqa: E402
from tests.ui.browser import chromium  # noqa: E402

WATCH = """
window.__firstRender = null;
window.__seen = {};
new MutationObserver(() => {
  const cards = document.querySelectorAll('.host');
  if (window.__firstRender === null && cards.length >= %d) window.__firstRender = performance.now();
  for (const chip of document.querySelectorAll('.chip[data-model^="bench-live-"]')) {
    const key = chip.dataset.model;
    if (!(key in window.__seen)) window.__seen[key] = Date.now();
  }
}).observe(document, {subtree: true, childList: true});
"""
# The first load: the page and the first fetch of each resource (later polls are not load).
WEIGHT = """
const nav = performance.getEntriesByType('navigation')[0];
let total = nav.transferSize || nav.encodedBodySize;
const seen = new Set();
for (const r of performance.getEntriesByType('resource')) {
  if (seen.has(r.name)) continue;
  seen.add(r.name);
  total += r.transferSize || r.encodedBodySize;
}
return total;
"""


def serve(hosts: int, models: int) -> tuple[str, Controller, Any, Any]:
    now = time.time()
    snap = generate_fleet(hosts, models, seed=42, now=now)
    folder = Path(tempfile.mkdtemp(prefix="grid-bench-ui-"))
    config = ControllerConfig(engine="cpsat", plan_budget_s=2.0, membership_grace_s=0.0)
    ctl = Controller(StateStore(folder / "state.json"), now=now, config=config)
    for host in snap.hosts:
        ctl.node_update(f"node-{host.host_id}", host.host_id, wire_update(host), now)
    for profile in snap.models:
        ctl.put_profile(profile.model_id, profile.model_dump(mode="json"), now)
    service = ControllerService(ctl)
    service.start()
    app = create_app(service, Credentials(new_secret(), new_secret()))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    ctl.tick(time.time())  # a plan on the page from the first load
    return url, ctl, (server, thread, service), snap


def live_update(driver: Any, ctl: Controller, snap: Any, index: int) -> float:
    host = snap.hosts[(index * 37) % len(snap.hosts)]
    model_id = f"bench-live-{index}"
    extra = Residency(model_id=model_id, memory_mb=1, state=ResidencyState.WARMING, managed=False)
    changed = host.model_copy(update={"residencies": [*host.residencies, extra]})
    sent = time.time()
    ctl.node_update(f"node-{host.host_id}", host.host_id, wire_update(changed), sent)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        seen = driver.execute_script("return window.__seen[arguments[0]] || null;", model_id)
        if seen is not None:
            return float(seen) / 1000.0 - sent
        time.sleep(0.02)
    return float("inf")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=256)
    parser.add_argument("--models", type=int, default=96)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    url, ctl, (server, thread, service), snap = serve(args.hosts, args.models)
    try:
        started = time.perf_counter()
        status = httpx.get(f"{url}/allocator/status", timeout=30)
        status_s = time.perf_counter() - started
        started = time.perf_counter()
        view = httpx.get(f"{url}/ui/view.json", timeout=30)
        view_s = time.perf_counter() - started
        renders: list[float] = []
        updates: list[float] = []
        weight = 0
        with chromium(Path(tempfile.mkdtemp(prefix="grid-bench-ui-profile-"))) as driver:
            driver.execute_cdp_cmd(
                "Page.addScriptToEvaluateOnNewDocument", {"source": WATCH % args.hosts}
            )
            driver.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
            for run in range(args.runs):
                driver.get(f"{url}/ui")
                deadline = time.monotonic() + 20
                first = None
                while first is None and time.monotonic() < deadline:
                    first = driver.execute_script("return window.__firstRender;")
                    time.sleep(0.02)
                renders.append(float(first) / 1000.0 if first is not None else float("inf"))
                if run == 0:
                    time.sleep(0.5)
                    weight = int(driver.execute_script(WEIGHT))
            for index in range(args.runs):
                updates.append(live_update(driver, ctl, snap, index))
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        service.stop()
    figures = {
        "hosts": args.hosts,
        "models": args.models,
        "first_render_s": {"median": statistics.median(renders), "max": max(renders)},
        "live_update_s": {"median": statistics.median(updates), "max": max(updates)},
        "page_weight_kb": round(weight / 1024, 1),
        "view_json_kb": round(len(view.content) / 1024, 1),
        "view_json_fetch_s": round(view_s, 3),
        "baseline_status_kb": round(len(status.content) / 1024, 1),
        "baseline_status_fetch_s": round(status_s, 3),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(f"Dashboard at {args.hosts} hosts, {args.models} models ({args.runs} runs)")
    print(f"{'figure':34} {'median':>9} {'max':>9}   goal")
    fr, lu = figures["first_render_s"], figures["live_update_s"]
    print(f"{'fleet page first render (s)':34} {fr['median']:9.3f} {fr['max']:9.3f}   <= 1")
    print(f"{'live update after a heartbeat (s)':34} {lu['median']:9.3f} {lu['max']:9.3f}   <= 2")
    print(f"{'page weight, first load (KB)':34} {figures['page_weight_kb']:9.1f} {'':9}   <= 300")
    print(f"{'view document (KB, fetch s)':34} {figures['view_json_kb']:9.1f} "
          f"{figures['view_json_fetch_s']:9.3f}")  # fmt: skip
    print(f"{'baseline: /allocator/status (KB, s)':34} {figures['baseline_status_kb']:9.1f} "
          f"{figures['baseline_status_fetch_s']:9.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
