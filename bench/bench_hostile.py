"""One hostile node against a real logical fleet: what a user sees, with and without it.

The fleet is the chaos suite's (tests/chaos/fleet.py): one controller, three node
agents with real llama.cpp children serving SmolLM2, min_replicas 2. The rogue is the hostile
node of tests/chaos/rogue.py: an enrolled credential sending forged heartbeats (term poisoning,
a hijacked route to its own fake engine, 64 black-holed and scanned ports, replayed receipts).

Phases, all in one run (the baseline is the same fleet without the rogue):
1. baseline: `--seconds` of /healthz and /v1/models latency and chats through the controller;
2. flood: the same with the rogue at `--flood` updates a second, then `--kills` child SIGKILLs
   under the flood, each timed until the independent oracle (/proc and the children's own
   /v1/models) sees two ready children again and the controller agrees;
3. restarts: `--restarts` controller SIGKILLs (each right after a child SIGKILL, at a random
   moment of the replacement's delivery, as the chaos suite's `controller_kill_delivery`),
   each timed from the SIGKILL until reconvergence, and from the new controller's first answer
   (process start-up is most of the difference on a loaded machine); the most children seen at
   once says whether a restart ever ran an extra replica.

    .venv/bin/python bench/bench_hostile.py              # 20 s phases, 3 kills, 20 restarts
    .venv/bin/python bench/bench_hostile.py --seconds 10 --restarts 5 --json

Figures are wall-clock on whatever machine runs it: say how loaded it was.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grid.fleet.errors import GridError  # noqa: E402
from grid.node.agent.config import CatalogEntry  # noqa: E402
from grid.node.artifacts import SMOLLM2_MODEL_ID, SMOLLM2_SHA256, smollm2_path  # noqa: E402
from grid.node.engines.binary import llama_server_binary  # noqa: E402
from grid.wire import AllocatorClient  # noqa: E402
from tests.chaos.fleet import ChaosFleet  # noqa: E402
from tests.chaos.oracle import UserProbe, children, percentile  # noqa: E402
from tests.chaos.rogue import ROGUE_HOST, Rogue  # noqa: E402

EXTRA: list[dict[str, Any]] = []  # what the fleet looked like when it ran an extra replica


def wait(condition: Any, timeout_s: float, step_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step_s)
    return False


def user_view(probe: UserProbe, kills: list[tuple[float, float]] = ()) -> dict[str, Any]:
    ok, sent = probe.chat_success()
    calm_ok, calm = probe.chat_success(outside=kills)
    return {
        "healthz_p50_ms": round(percentile(probe.health, 50) * 1000, 1),
        "healthz_p95_ms": round(percentile(probe.health, 95) * 1000, 1),
        "v1_models_p50_ms": round(percentile(probe.models, 50) * 1000, 1),
        "v1_models_p95_ms": round(percentile(probe.models, 95) * 1000, 1),
        "samples": len(probe.health),
        "chats": sent,
        "chat_success": round(ok / sent, 4) if sent else None,
        "chats_outside_kills": calm,
        "chat_success_outside_kills": round(calm_ok / calm, 4) if calm else None,
    }


def child_kills(
    fleet: ChaosFleet, http: httpx.Client, count: int, rng: random.Random
) -> list[tuple[float, float]]:
    """(killed, reconverged) monotonic times: SIGKILL a ready child, until two children serve
    again and the controller agrees."""
    windows: list[tuple[float, float]] = []
    for _ in range(count):
        ready = sorted(c.pid for c in children(fleet.root, http) if c.ready)
        killed = time.monotonic()
        os.kill(rng.choice(ready), signal.SIGKILL)
        wait(lambda: not fleet.converged(http), 10)
        if not wait(lambda: fleet.converged(http), 120):
            raise SystemExit(f"no reconvergence after a child kill: {fleet.diagnose(http)}")
        windows.append((killed, time.monotonic()))
        time.sleep(1.0)
    return windows


def lengths(windows: list[tuple[float, float]]) -> list[float]:
    return [b - a for a, b in windows]


def restarts(
    fleet: ChaosFleet, http: httpx.Client, count: int, rng: random.Random
) -> tuple[list[float], list[float], list[int]]:
    """Controller SIGKILLs during a replacement's delivery: (from the SIGKILL until
    reconverged, from the new controller's first answer until reconverged, the most children
    seen at once)."""
    totals: list[float] = []
    after_up: list[float] = []
    most: list[int] = []
    for _ in range(count):
        ready = sorted(c.pid for c in children(fleet.root, http) if c.ready)
        os.kill(rng.choice(ready), signal.SIGKILL)
        time.sleep(rng.uniform(0.3, 2.0))
        killed = time.monotonic()
        fleet.controller.kill()
        fleet.controller.start()
        up = time.monotonic()
        peak = [0]

        def converged(peak: list[int] = peak, killed: float = killed) -> bool:
            kids = children(fleet.root, http)
            if len(kids) > max(peak[0], 2):  # an extra replica: keep the evidence
                try:
                    with fleet.controller.public() as public:
                        doc = public.status(history=30).model_dump(mode="json")
                except GridError:
                    doc = {}
                EXTRA.append(
                    {
                        "after_kill_s": round(time.monotonic() - killed, 2),
                        "children": [(c.host_id, c.ready) for c in kids],
                        "hosts": {
                            h["host_id"]: [r["state"] for r in h["residencies"]]
                            for h in doc.get("hosts", [])
                        },
                        "grace": doc.get("grace"),
                        "commands": [
                            (r["kind"], r["host_id"], r["status"], r["action_id"][-8:])
                            for r in doc.get("history", [])[-8:]
                        ],
                    }
                )
            peak[0] = max(peak[0], len(kids))
            return fleet.converged(http)

        if not wait(converged, 120, 0.1):
            raise SystemExit(f"no reconvergence after a controller kill: {fleet.diagnose(http)}")
        done = time.monotonic()
        totals.append(done - killed)
        after_up.append(done - up)
        most.append(peak[0])
        time.sleep(1.0)
    return totals, after_up, most


def summary(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50_s": round(percentile(values, 50), 2),
        "p95_s": round(percentile(values, 95), 2),
        "max_s": round(max(values, default=0.0), 2),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    llama = llama_server_binary()
    entry = CatalogEntry(model_id=SMOLLM2_MODEL_ID, path=str(smollm2_path()), sha256=SMOLLM2_SHA256)
    out: dict[str, Any] = {"load_average_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as folder:
        fleet = ChaosFleet(Path(folder), llama, entry)
        try:
            with httpx.Client(trust_env=False) as http:
                if not wait(lambda: fleet.converged(http), 180, 0.25):
                    raise SystemExit(f"the fleet never converged: {fleet.diagnose(http)}")
                if args.only_restarts:
                    totals, after_up, most = restarts(fleet, http, args.restarts, rng)
                    out["restarts"] = {
                        **summary(totals),
                        "after_the_controller_answers": summary(after_up),
                        "most_children_at_once": max(most, default=0),
                        "extra_replica_events": EXTRA,
                    }
                    out["load_average_end"] = os.getloadavg()[0]
                    return out
                probe = UserProbe(fleet.controller.url, fleet.entry.model_id)
                probe.start()
                time.sleep(args.seconds)
                kills = child_kills(fleet, http, args.kills, rng)
                probe.stop()
                windows = [(a - 1.0, b) for a, b in kills]
                out["baseline"] = {
                    **user_view(probe, windows),
                    "child_replaced": summary(lengths(kills)),
                }
                with fleet.controller.admin() as admin:
                    issued = admin.create_enrollment(ROGUE_HOST)
                with AllocatorClient(fleet.controller.url) as anyone:
                    minted = anyone.enroll(issued.token)
                rogue = Rogue(
                    fleet.controller.url,
                    minted.token,
                    fleet.entry.model_id,
                    victim=fleet.nodes[0].host_id,
                )
                rogue.scanned = [c.port for c in children(fleet.root, http)]
                try:
                    rogue.register()
                    rogue.flood(args.flood)
                    time.sleep(2.0)
                    probe = UserProbe(fleet.controller.url, fleet.entry.model_id)
                    probe.start()
                    time.sleep(args.seconds)
                    kills = child_kills(fleet, http, args.kills, rng)
                    probe.stop()
                finally:
                    rogue.stop()
                sent = sum(rogue.answers.values())
                windows = [(a - 1.0, b) for a, b in kills]
                out["flood"] = {
                    **user_view(probe, windows),
                    "child_replaced": summary(lengths(kills)),
                    "rogue_updates_sent": sent,
                    "rogue_answers": dict(sorted(rogue.answers.items())),
                    "served_by_rogue": len(rogue.engine.requests),
                }
                with fleet.controller.admin() as admin:
                    doc = admin.status(history=0).model_dump(mode="json")
                    out["flood"]["controller_term"] = doc["lease"]["term"]
                    out["flood"]["rogue_named"] = any(
                        ROGUE_HOST in w["message"] for w in doc["warnings"]
                    )
                    admin.revoke_node_credentials(host_id=ROGUE_HOST)
                rogue.close()
                totals, after_up, most = restarts(fleet, http, args.restarts, rng)
                out["restarts"] = {
                    **summary(totals),
                    "after_the_controller_answers": summary(after_up),
                    "most_children_at_once": max(most, default=0),
                    "extra_replica_events": EXTRA,
                }
        finally:
            with contextlib.suppress(Exception):
                fleet.cleanup()
    out["load_average_end"] = os.getloadavg()[0]
    return out


def print_table(result: dict[str, Any]) -> None:
    if "flood" in result:  # absent with --only-restarts
        print_flood(result["baseline"], result["flood"])
    r, up = result["restarts"], result["restarts"]["after_the_controller_answers"]
    print(f"controller SIGKILL reconvergence over {r['n']} trials: p50 {r['p50_s']} s, "
          f"p95 {r['p95_s']} s, max {r['max_s']} s; from the new controller's first answer: "
          f"p50 {up['p50_s']} s, max {up['max_s']} s; most children at once "
          f"{r['most_children_at_once']} (of 2)")  # fmt: skip
    print(f"load average: {result['load_average_start']:.1f} at start, "
          f"{result['load_average_end']:.1f} at end")  # fmt: skip


def print_flood(base: dict[str, Any], flood: dict[str, Any]) -> None:
    rows = [
        ("/healthz p95 ms", base["healthz_p95_ms"], flood["healthz_p95_ms"]),
        ("/v1/models p95 ms", base["v1_models_p95_ms"], flood["v1_models_p95_ms"]),
        ("/healthz p50 ms", base["healthz_p50_ms"], flood["healthz_p50_ms"]),
        ("/v1/models p50 ms", base["v1_models_p50_ms"], flood["v1_models_p50_ms"]),
        ("chat success", base["chat_success"], flood["chat_success"]),
        (
            "  outside child kills",
            base["chat_success_outside_kills"],
            flood["chat_success_outside_kills"],
        ),
        ("chats", base["chats"], flood["chats"]),
        ("child replaced max s", base["child_replaced"]["max_s"], flood["child_replaced"]["max_s"]),
        ("served by the rogue", "-", flood["served_by_rogue"]),
    ]
    print(f"{'':24} {'baseline':>10} {'hostile':>10}")
    for name, a, b in rows:
        print(f"{name:24} {a!s:>10} {b!s:>10}")
    print(f"rogue: {flood['rogue_updates_sent']} updates {flood['rogue_answers']}, term "
          f"{flood['controller_term']}, named in status: {flood['rogue_named']}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each phase")
    parser.add_argument("--flood", type=float, default=50.0, help="rogue updates a second")
    parser.add_argument("--kills", type=int, default=3, help="child SIGKILLs under the flood")
    parser.add_argument("--restarts", type=int, default=20, help="controller SIGKILL trials")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--only-restarts", action="store_true", help="phase 3 alone")
    args = parser.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)


if __name__ == "__main__":
    main()
