"""A hostile node (a test double, never shipped): one enrolled credential used against the fleet.

It holds a real host-scoped credential (token and reply key, from an enrollment token, as a
laptop would get one) and tries what issue 22 found one credential could do:

- term poisoning: its fence claims controller term 10^15 from another controller, with a
  forged proof;
- route hijack: a READY residency of the fleet's model and a route to its own fake engine
  (`tests/router/fake_engine.py`), which records every prompt it is sent;
- probe flooding and scanning: an advertised address with 64 routes, on black-holed ports
  (listeners whose accept queue is full, so a connect hangs) and on the honest engines' ports;
- replay: receipts of other hosts' commands (read from the public status) claiming success, and
  its own earlier heartbeat again;
- another host's record: updates for `<honest host>.allocator` and with the honest host's id.

`Forger` makes and sends the bodies. `Rogue.flood` runs one in its own process
(`python -m tests.chaos.rogue`, the credential on its stdin), so its 50 updates a second do not
share an interpreter with whoever measures the controller; `stop` collects its answer counts.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from grid.fleet.wire import NODE_HEADER
from tests.router.fake_engine import FakeEngine

ROGUE_HOST = "rogue-laptop"
POISON_TERM = 10**15
ENGINE_KEY = "rogue-engine-key-" + "r" * 24
REPO = Path(__file__).resolve().parents[2]


class BlackHoles:
    """`count` loopback ports where a TCP connect hangs: each listener's backlog is full."""

    def __init__(self, count: int, address: str = "127.0.0.1") -> None:
        self.listeners: list[socket.socket] = []
        self.fillers: list[socket.socket] = []
        for _ in range(count):
            listener = socket.socket()
            listener.bind((address, 0))
            listener.listen(0)
            self.listeners.append(listener)
            for _ in range(4):  # fill the queue; later SYNs are dropped
                filler = socket.socket()
                filler.setblocking(False)
                with contextlib.suppress(BlockingIOError, OSError):
                    filler.connect(listener.getsockname())
                self.fillers.append(filler)
        self.ports = [int(s.getsockname()[1]) for s in self.listeners]

    def close(self) -> None:
        for sock in self.fillers + self.listeners:
            with contextlib.suppress(OSError):
                sock.close()


class Forger:
    """The rogue's bodies, and a client that sends them with its credential."""

    def __init__(
        self,
        url: str,
        token: str,
        model_id: str,
        *,
        engine_port: int,
        ports: list[int],
        victim: str,
    ) -> None:
        self.url = url
        self.model_id = model_id
        self.engine_port = engine_port
        self.ports = ports[:64]  # black-holed, then scanned
        self.victim = victim
        self.http = httpx.Client(
            base_url=url, headers={NODE_HEADER: token}, timeout=10.0, trust_env=False
        )
        self.answers: Counter[str] = Counter()
        self._count = threading.Lock()
        self._last: dict[str, Any] | None = None
        self._ids: list[str] = []
        self._ids_at = float("-inf")

    def _body(self, allocator: dict[str, Any]) -> dict[str, Any]:
        return {
            "role": "allocator",
            "host_id": ROGUE_HOST,
            "resources": {"capacity_mb": 65536, "runtimes": ["llama.cpp"]},
            "allocator": {"schema_version": 1, "state": "accepting", **allocator},
            "request_commands": True,
        }

    def poisoned(self) -> dict[str, Any]:
        return self._body(
            {"highest_term": POISON_TERM, "controller_id": "x", "term_proof": "A" * 43}
        )

    def hijack(self) -> dict[str, Any]:
        row = {"model_id": self.model_id, "memory_mb": 1, "state": "ready", "managed": True}
        route = {"model_id": self.model_id, "port": self.engine_port, "grant": "A" * 43}
        return self._body({"residencies": [row], "routes": [route], "engine_key": ENGINE_KEY})

    def probes(self) -> dict[str, Any]:
        return self._body(
            {
                "advertise_address": "127.0.0.1",
                "residencies": [
                    {"model_id": f"m{p}", "memory_mb": 1, "state": "ready"} for p in self.ports
                ],
                "routes": [{"model_id": f"m{p}", "port": p} for p in self.ports],
                "engine_key": ENGINE_KEY,
            }
        )

    def replayed_receipts(self) -> dict[str, Any]:
        """Receipts of the honest hosts' commands (public status shows their ids; read at
        most every 2 s)."""
        if time.monotonic() - self._ids_at > 2.0:
            self._ids_at = time.monotonic()
            try:
                doc = httpx.get(f"{self.url}/allocator/status?history=20", timeout=5).json()
            except (httpx.HTTPError, ValueError):
                doc = {}
            history = doc.get("history", [])
            self._ids = [r["action_id"] for r in history if r.get("host_id") != ROGUE_HOST]
            self._ids += [c["action_id"] for c in doc.get("pending_commands", [])]
        body = self.hijack()
        body["acknowledgements"] = [
            {"action_id": a, "status": "succeeded", "message": "replayed"} for a in self._ids[:16]
        ]
        return body

    def replay(self) -> dict[str, Any]:
        return dict(self._last) if self._last is not None else self.poisoned()

    def send(self, body: dict[str, Any], node_id: str = f"{ROGUE_HOST}.allocator") -> int:
        try:
            code = str(self.http.put(f"/nodes/{node_id}", json=body).status_code)
        except httpx.HTTPError as exc:
            code = type(exc).__name__
        with self._count:
            self.answers[code] += 1
        return int(code) if code.isdigit() else 0

    def flood(self, per_second: float, stop: threading.Event) -> None:
        """Send the attacks in turn at `per_second` until `stop`, not waiting for answers."""
        kinds = itertools.cycle(
            [self.poisoned, self.hijack, self.probes, self.replayed_receipts, self.replay]
        )
        period = 1.0 / per_second
        due = time.monotonic()
        with ThreadPoolExecutor(16, thread_name_prefix="rogue") as pool:
            while not stop.is_set():
                body = next(kinds)()
                self._last = body
                pool.submit(self.send, body)
                due += period
                stop.wait(max(0.0, due - time.monotonic()))


class Rogue:
    """The hostile node as a test drives it: its fake engine, black holes and credential."""

    def __init__(self, url: str, token: str, model_id: str, *, victim: str) -> None:
        self.url = url
        self.token = token
        self.model_id = model_id
        self.victim = victim  # an honest host whose record it tries to take
        self.engine = FakeEngine(ENGINE_KEY, "rogue").start()
        self.holes = BlackHoles(48)
        self.scanned: list[int] = []  # honest engine ports it asks the controller to probe
        self.answers: Counter[str] = Counter()
        self._process: subprocess.Popen[bytes] | None = None

    def forger(self) -> Forger:
        return Forger(
            self.url,
            self.token,
            self.model_id,
            engine_port=self.engine.port,
            ports=self.holes.ports + self.scanned,
            victim=self.victim,
        )

    def send(self, body: dict[str, Any], node_id: str = f"{ROGUE_HOST}.allocator") -> int:
        forger = self.forger()
        code = forger.send(body, node_id)
        self.answers.update(forger.answers)
        forger.http.close()
        return code

    def hijack(self) -> dict[str, Any]:
        return self.forger().hijack()

    def register(self) -> int:
        return self.send(self.hijack())

    def poison(self) -> int:
        """One term-poisoning report (the status code it got)."""
        return self.send(self.forger().poisoned())

    def other_hosts_record(self) -> tuple[int, int]:
        """(status for the victim's record id, status for the victim's host id)."""
        by_record = self.send(self.hijack(), f"{self.victim}.allocator")
        body = self.hijack()
        body["host_id"] = self.victim
        return by_record, self.send(body)

    def flood(self, per_second: float = 50.0) -> None:
        """The attacks at `per_second` from a process of their own, until `stop`."""
        spec = {
            "url": self.url,
            "token": self.token,
            "model_id": self.model_id,
            "engine_port": self.engine.port,
            "ports": self.holes.ports + self.scanned,
            "victim": self.victim,
            "per_second": per_second,
        }
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.chaos.rogue"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO,
        )
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(spec).encode() + b"\n")
        self._process.stdin.flush()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.send_signal(signal.SIGTERM)
        out, _err = process.communicate(timeout=30)
        self.answers.update(json.loads(out.decode() or "{}"))

    def close(self) -> None:
        self.stop()
        self.engine.stop()
        self.holes.close()


def main() -> None:
    """The flood process: the spec (credential included) on stdin, the answers on stdout."""
    spec = json.loads(sys.stdin.readline())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    forger = Forger(
        spec["url"],
        spec["token"],
        spec["model_id"],
        engine_port=spec["engine_port"],
        ports=spec["ports"],
        victim=spec["victim"],
    )
    forger.flood(float(spec["per_second"]), stop)
    print(json.dumps(dict(forger.answers)), flush=True)


if __name__ == "__main__":
    main()
