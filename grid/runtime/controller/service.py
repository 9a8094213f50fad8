"""The controller's wall clock and background thread: periodic and coalesced ticks.

The pure-ish `Controller` takes `now` everywhere; this runner supplies `time.time()` and keeps a
daemon thread that ticks at least every `periodic_interval_s` and promptly after inputs that mark
placement dirty (registration, heartbeats without a command request, profiles, observations).
Bursts of such events are coalesced into one pass by a short debounce, and such passes are at
least `notify_min_interval_s` apart. A command poll does not
wait for this thread: it runs (or joins) a tick itself through `Controller.ensure_success`. A
background plan (`plan_worker`) that finishes wakes the loop so the next pass adopts it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from grid.runtime.controller.core import Controller

log = logging.getLogger("grid.controller")
DEBOUNCE_S = 0.05


class ControllerService:
    def __init__(self, controller: Controller, *, clock: Callable[[], float] = time.time) -> None:
        self.controller = controller
        self.clock = clock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        controller.plan_ready = self.notify  # a background plan is adopted by the next pass

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="grid-controller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.controller.close()
        lease = self.controller.lease
        if lease is not None:
            lease.release()

    def notify(self) -> None:
        """Inputs changed: run a pass soon (many notifications make one pass)."""
        self._wake.set()

    def ensure_tick(self, revision: int) -> bool:
        return self.controller.ensure_success(revision, self.clock)

    def _run(self) -> None:
        config = self.controller.config
        interval = config.periodic_interval_s
        last = float("-inf")
        while not self._stop.is_set():
            self._wake.wait(timeout=interval)
            if self._stop.is_set():
                return
            if self._wake.is_set():
                # Let a burst of events land in the same pass, and keep passes that updates
                # ask for apart: a host flooding updates cannot keep the controller ticking.
                gap = config.notify_min_interval_s - (time.monotonic() - last)
                time.sleep(max(DEBOUNCE_S, gap))
                self._wake.clear()
            last = time.monotonic()
            try:
                report = self.controller.tick(self.clock())
            except Exception:  # the loop must survive anything one pass does
                log.exception("controller tick crashed")
                continue
            if not report.ok:
                log.warning("controller tick failed: %s", report.error)
