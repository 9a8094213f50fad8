"""Issue 15: a seeded schedule of faults against a real logical fleet (three node agents with
real llama.cpp children serving SmolLM2, one controller, min_replicas 2), with a monitor that
checks after every fault:

- the fleet reconverges within RECONVERGE_S: the controller is automatic and counts exactly the
  hosts where a ready child really answers, and exactly `min_replicas` children run;
- no interval with zero ready replicas (no single fault here can remove both replicas, so any
  such interval is a replacement that was not ready);
- no orphaned llama-server (a child no READY residency accounts for) once reconverged, and none
  at all after the fleet stops;
- no command executed twice (no action id accepted twice by any node);
- no false success (the controller's READY set is the oracle's ready set).

Faults: controller SIGKILL during a tick and during delivery, agent SIGKILL, agent SIGSTOP past
the route TTL, child SIGKILL, controller state corruption while it is stopped. The monitor's
oracle (tests/chaos/oracle.py) reads /proc and asks the children themselves, never Grid's own
records. The figures are printed: faults injected, reconvergence p50/p95, zero-ready intervals.

GRID_CHAOS_SEED and GRID_CHAOS_FAULTS change the schedule (defaults 15 and 16 draws).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import random
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from grid.fleet.errors import GridError
from grid.fleet.wire import reply_key_path
from grid.node.agent.config import CatalogEntry
from grid.node.engines.proc import is_alive
from grid.node.engines.state import atomic_write_text
from tests.chaos.oracle import Monitor, children, percentile
from tests.e2e.conftest import llama_server, smollm2_entry  # noqa: F401 (fixtures)
from tests.e2e.fleet_helpers import EngineNode, wait_for
from tests.service.harness import FAST_CONTROLLER, ControllerProcess

pytestmark = [pytest.mark.chaos, pytest.mark.engine]

SEED = int(os.environ.get("GRID_CHAOS_SEED", "15"))
FAULTS = int(os.environ.get("GRID_CHAOS_FAULTS", "16"))
RECONVERGE_S = 90.0
REPLICAS = 2
NODE_TTL_S = 5.0
CHAOS_CONTROLLER = {**FAST_CONTROLLER, "node_ttl_s": NODE_TTL_S, "destructive_margin_s": 2.0}
ACCEPTED = re.compile(r"accepted (\S+) (\S+) (\S+)")


class ChaosFleet:
    def __init__(self, tmp_path: Path, llama: Path, entry: CatalogEntry) -> None:
        self.root = (tmp_path / "nodes").absolute()
        self.entry = entry
        self.controller = ControllerProcess(tmp_path / "ctl", dict(CHAOS_CONTROLLER))
        self.controller.start()
        self.nodes: list[EngineNode] = []
        for index in range(3):
            low = 39800 + 10 * index
            node = EngineNode(
                self.root,
                self.controller,
                f"chaos-0{index + 1}",
                catalog=[entry],
                ports=(low, low + 9),
                llama_server=llama,
            )
            with self.controller.admin() as admin:  # the credential with its reply key
                minted = admin.node_credential(node.host_id)
            token_file = Path(node.config.token_file or "")
            atomic_write_text(token_file, f"{minted['token']}\n")
            atomic_write_text(reply_key_path(token_file), f"{minted['reply_key']}\n")
            node.start()
            self.nodes.append(node)
        self.configure()

    def configure(self) -> None:
        """What the operator (or `grid test start`) applies: the profile, automatic mode."""
        profile = {
            "memory_mb": 256,
            "min_replicas": REPLICAS,
            "max_replicas": REPLICAS,
            "artifact_sha256": self.entry.sha256,
            "min_residency_s": 0,
            "scale_down_cooldown_s": 0,
        }
        with self.controller.admin() as admin:
            admin.put_model(self.entry.model_id, profile)
            admin.set_mode("automatic")

    def status(self) -> dict[str, Any] | None:
        try:
            with self.controller.public() as public:
                doc: dict[str, Any] = public.status(history=0)
                return doc
        except GridError:
            return None

    def ready_hosts(self, doc: dict[str, Any]) -> set[str]:
        return {
            h["host_id"]
            for h in doc.get("hosts", [])
            for r in h.get("residencies", [])
            if r["model_id"] == self.entry.model_id and r["state"] == "ready"
        }

    def converged(self, http: httpx.Client) -> bool:
        doc = self.status()
        if doc is None or doc.get("mode") != "automatic":
            return False
        kids = children(self.root, http)
        oracle = {c.host_id for c in kids if c.ready}
        return len(kids) == REPLICAS and self.ready_hosts(doc) == oracle and len(oracle) == REPLICAS

    def diagnose(self, http: httpx.Client) -> str:
        doc = self.status() or {}
        rows = {h["host_id"]: h.get("residencies") for h in doc.get("hosts", [])}
        logs = {n.host_id: n.log()[-1500:] for n in self.nodes}
        return json.dumps(
            {
                "mode": doc.get("mode"),
                "warnings": doc.get("warnings"),
                "hosts": rows,
                "children": [c.__dict__ for c in children(self.root, http)],
                "node_logs": logs,
                "controller_log": self.controller.log_path.read_text()[-2000:],
            },
            indent=1,
            default=str,
        )

    def accepted_ids(self) -> collections.Counter[str]:
        counts: collections.Counter[str] = collections.Counter()
        for node in self.nodes:
            with contextlib.suppress(OSError):
                text = (node.folder / "agent.log").read_text(encoding="utf-8", errors="replace")
                counts.update(m.group(1) for m in ACCEPTED.finditer(text))
        return counts

    def cleanup(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.cleanup()
        self.controller.stop()


# ---------------------------------------------------------------------------------- faults


def _ready_child(fleet: ChaosFleet, rng: random.Random, http: httpx.Client) -> int:
    ready = sorted(c.pid for c in children(fleet.root, http) if c.ready)
    return rng.choice(ready)


def controller_kill_tick(fleet: ChaosFleet, rng: random.Random, http: httpx.Client) -> int:
    def tick() -> None:
        with contextlib.suppress(GridError), fleet.controller.admin() as admin:
            admin.tick()

    worker = threading.Thread(target=tick, daemon=True)
    worker.start()
    time.sleep(rng.uniform(0.0, 0.3))
    fleet.controller.kill()
    worker.join(timeout=10)
    fleet.controller.start()
    return 1


def controller_kill_delivery(fleet: ChaosFleet, rng: random.Random, http: httpx.Client) -> int:
    """A child dies, so the controller issues and delivers a replacement; it is SIGKILLed at a
    random moment of that."""
    os.kill(_ready_child(fleet, rng, http), signal.SIGKILL)
    time.sleep(rng.uniform(0.3, 2.0))
    fleet.controller.kill()
    fleet.controller.start()
    return 2


def agent_kill(fleet: ChaosFleet, rng: random.Random, http: httpx.Client) -> int:
    node = rng.choice(fleet.nodes)
    pid = node.agent_pid()
    assert pid is not None, f"the agent of {node.host_id} is not running"
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not is_alive(pid), 10, "the agent to die")
    node.start()
    return 1


def agent_stop(fleet: ChaosFleet, rng: random.Random, http: httpx.Client) -> int:
    node = rng.choice(fleet.nodes)
    pid = node.agent_pid()
    assert pid is not None, f"the agent of {node.host_id} is not running"
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(NODE_TTL_S + 1.0)  # past the route lease its last heartbeat granted
    finally:
        os.kill(pid, signal.SIGCONT)
    return 1


def child_kill(fleet: ChaosFleet, rng: random.Random, http: httpx.Client) -> int:
    os.kill(_ready_child(fleet, rng, http), signal.SIGKILL)
    return 1


CORRUPTIONS = [
    b'{"schema_version": 1, "mode": "automatic", "profiles": [',  # torn write
    b"\x00\xff" * 64,  # not text
    b"[" * 100_000 + b"]" * 100_000,  # hostile nesting
    b'{"schema_version": 1, "profiles": "not a list"}',  # wrong schema
]


def state_corruption(fleet: ChaosFleet, rng: random.Random, http: httpx.Client) -> int:
    """The controller dies, a child dies while it is down (so the new controller must issue new
    work: under a fresh epoch, against nodes that remember the old term), and the state file is
    corrupt and the lease file lost when it returns (the new controller must learn the term the
    nodes remember from their heartbeats)."""
    fleet.controller.kill()
    os.kill(_ready_child(fleet, rng, http), signal.SIGKILL)
    (fleet.controller.state_dir / "state.json").write_bytes(rng.choice(CORRUPTIONS))
    (fleet.controller.state_dir / "state.json.lease").unlink(missing_ok=True)  # lost as well
    fleet.controller.start()
    fleet.configure()  # a quarantined state starts in recommend mode with no profile
    return 2


Fault = Callable[[ChaosFleet, random.Random, httpx.Client], int]
KINDS: dict[str, Fault] = {
    "controller_kill_tick": controller_kill_tick,
    "controller_kill_delivery": controller_kill_delivery,
    "agent_kill": agent_kill,
    "agent_stop": agent_stop,
    "child_kill": child_kill,
    "state_corruption": state_corruption,
}


def schedule(rng: random.Random, count: int) -> list[str]:
    kinds = sorted(KINDS)
    rng.shuffle(kinds)  # every kind at least once, then seeded draws
    return (kinds + [rng.choice(sorted(KINDS)) for _ in range(max(0, count - len(kinds)))])[
        : max(count, len(kinds))
    ]


# ---------------------------------------------------------------------------------- the run


@pytest.fixture
def fleet(
    tmp_path: Path,
    llama_server: Path,  # noqa: F811
    smollm2_entry: CatalogEntry,  # noqa: F811
) -> Iterator[ChaosFleet]:
    made = ChaosFleet(tmp_path, llama_server, smollm2_entry)
    try:
        yield made
    finally:
        made.cleanup()


def test_a_seeded_fault_schedule_reconverges_without_loss_duplicates_or_orphans(
    fleet: ChaosFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(SEED)
    monitor = Monitor(fleet.root)
    monitor.start()
    injected: collections.Counter[str] = collections.Counter()
    reconverge: list[float] = []
    started = time.monotonic()
    with httpx.Client(trust_env=False) as http:
        try:
            wait_for(lambda: fleet.converged(http), 120, "the first convergence", step_s=0.25)
            monitor.armed = True
            plan = schedule(rng, FAULTS)
            for kind in plan:
                at = time.monotonic()
                injected[kind] += KINDS[kind](fleet, rng, http)
                deadline = at + RECONVERGE_S
                while not fleet.converged(http):
                    if time.monotonic() > deadline:
                        pytest.fail(f"no reconvergence after {kind}: {fleet.diagnose(http)}")
                    time.sleep(0.25)
                reconverge.append(time.monotonic() - at)
                twice = {a: n for a, n in fleet.accepted_ids().items() if n > 1}
                assert twice == {}, f"commands accepted twice after {kind}: {twice}"
                assert monitor.zero_intervals == [], f"zero ready replicas after {kind}"
        finally:
            monitor.stop()
    fleet.cleanup()
    leftover = children(fleet.root, httpx.Client(trust_env=False))
    figures = {
        "seed": SEED,
        "faults_injected": sum(injected.values()),
        "by_kind": dict(sorted(injected.items())),
        "reconvergence_p50_s": round(percentile(reconverge, 50), 2),
        "reconvergence_p95_s": round(percentile(reconverge, 95), 2),
        "reconvergence_max_s": round(max(reconverge, default=0.0), 2),
        "zero_ready_intervals": len(monitor.zero_intervals),
        "zero_ready_total_s": round(sum(b - a for a, b in monitor.zero_intervals), 2),
        "commands_accepted": sum(fleet.accepted_ids().values()),
        "orphans_after_stop": len(leftover),
        "wall_s": round(time.monotonic() - started, 1),
    }
    with capsys.disabled():
        print(f"\nchaos figures: {json.dumps(figures)}")
    assert leftover == [], f"orphaned llama-server after stop: {leftover}"
    assert figures["zero_ready_intervals"] == 0
