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
import signal
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from grid.fleet.errors import GridError
from grid.node.engines.proc import is_alive
from tests.chaos.fleet import NODE_TTL_S, ChaosFleet
from tests.chaos.oracle import Monitor, children, percentile
from tests.e2e.fleet_helpers import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.engine]

SEED = int(os.environ.get("GRID_CHAOS_SEED", "15"))
FAULTS = int(os.environ.get("GRID_CHAOS_FAULTS", "16"))
RECONVERGE_S = 90.0


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
