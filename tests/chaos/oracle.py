"""The chaos suite's independent view of the fleet: which llama-server children really run and
answer, read from /proc and from the children themselves (never from Grid's own records), and
what a user sees of the controller (`UserProbe`).

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


class UserProbe:
    """What a user sees (threads): /healthz and /v1/models latency sampled every 0.1 s, and a
    chat through the controller every 0.5 s with its status and the host that served it."""

    def __init__(self, url: str, model_id: str) -> None:
        self.url = url
        self.model_id = model_id
        self.health: list[float] = []
        self.models: list[float] = []
        # (monotonic start, status, the host that served it or why it failed)
        self.chats: list[tuple[float, int, str]] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._sample, daemon=True),
            threading.Thread(target=self._chat, daemon=True),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _timed(self, http: httpx.Client, path: str, into: list[float]) -> None:
        started = time.monotonic()
        try:
            http.get(path)
        except httpx.HTTPError:
            into.append(float("inf"))
            return
        into.append(time.monotonic() - started)

    def _sample(self) -> None:
        with httpx.Client(base_url=self.url, timeout=30, trust_env=False) as http:
            while not self._stop.is_set():
                self._timed(http, "/healthz", self.health)
                self._timed(http, "/v1/models", self.models)
                self._stop.wait(0.1)

    def _chat(self) -> None:
        body = {
            "model": self.model_id,
            "messages": [{"role": "user", "content": "Reply with OK"}],
            "max_tokens": 4,
        }
        with httpx.Client(base_url=self.url, timeout=60, trust_env=False) as http:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    reply = http.post("/v1/chat/completions", json=body)
                    served = reply.headers.get("X-Grid-Served-By", "")
                    why = "" if reply.is_success else reply.text[:200]
                    self.chats.append((started, reply.status_code, served or why))
                except (httpx.HTTPError, ValueError) as exc:
                    self.chats.append((started, 0, type(exc).__name__))
                self._stop.wait(0.5)

    def chat_success(self, *, outside: list[tuple[float, float]] = ()) -> tuple[int, int]:
        """(succeeded, sent) of the chats that did not start within any `outside` window (a
        child SIGKILLed under a request in flight fails it: the proxy never replays a POST)."""
        kept = [
            status for at, status, _who in self.chats if not any(a <= at <= b for a, b in outside)
        ]
        return sum(1 for s in kept if s == 200), len(kept)
