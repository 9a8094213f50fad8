"""The chaos suite's independent view of the fleet: which llama-server children really run and
answer, read from /proc and from the children themselves (never from Grid's own records).

A child belongs to a node when its `--api-key-file` lies in that node's folder; it is ready when
`GET /v1/models` with the key from that file answers 200.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx


@dataclass(frozen=True)
class Child:
    pid: int
    host_id: str
    port: int
    ready: bool


def _argv(pid: str) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [p.decode("utf-8", "replace") for p in raw.split(b"\0") if p]


def _state(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return "X"


def children(root: Path, client: httpx.Client) -> list[Child]:
    """Every live llama-server whose key file lies under `root/<host_id>/`."""
    found: list[Child] = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        argv = _argv(pid)
        if not argv or not argv[0].endswith("llama-server") or _state(pid) in ("Z", "X"):
            continue
        try:
            key_file = Path(argv[argv.index("--api-key-file") + 1])
            port = int(argv[argv.index("--port") + 1])
        except (ValueError, IndexError):
            continue
        if root not in key_file.parents:
            continue
        host_id = key_file.relative_to(root).parts[0]
        try:
            key = key_file.read_text(encoding="utf-8").split()[0]
            reply = client.get(
                f"http://127.0.0.1:{port}/v1/models",
                headers={"Authorization": f"Bearer {key}"},
                timeout=1.0,
            )
            ready = reply.status_code == 200
        except (OSError, IndexError, httpx.HTTPError):
            ready = False
        found.append(Child(int(pid), host_id, port, ready))
    return found


@dataclass
class Monitor:
    """Samples the ready children every `interval_s` and keeps the zero-ready intervals."""

    root: Path
    interval_s: float = 0.25
    samples: list[tuple[float, int]] = field(default_factory=list)
    armed: bool = False  # zero-ready intervals count only once the fleet first converged
    zero_intervals: list[tuple[float, float]] = field(default_factory=list)
    _zero_since: float | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._zero_since is not None:
            self.zero_intervals.append((self._zero_since, time.monotonic()))

    def _run(self) -> None:
        with httpx.Client(trust_env=False) as client:
            while not self._stop.is_set():
                ready = sum(1 for c in children(self.root, client) if c.ready)
                now = time.monotonic()
                self.samples.append((now, ready))
                if self.armed and ready == 0 and self._zero_since is None:
                    self._zero_since = now
                elif ready > 0 and self._zero_since is not None:
                    self.zero_intervals.append((self._zero_since, now))
                    self._zero_since = None
                self._stop.wait(self.interval_s)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]
