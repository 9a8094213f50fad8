"""Controller failover benchmark: SIGKILL (and SIGSTOP) of the leader of three controllers on a
real three-member etcd cluster, with a real node agent and real llama.cpp children.

    .venv/bin/python bench/bench_failover.py [--kills 20] [--stops 3] [--ttl 3] [--seed 1]
                                             [--json]

Each round the leader gets a new profile (`p<i>`, never placed) and a second model's demand
flips (min_replicas 1 <-> 0), so WARM or DRAIN/UNLOAD commands are being planned, delivered or
executed; after a random delay of 0-2.5 s (the tick runs every second: any tick phase,
mid-delivery included) the leader is SIGKILLed while a chat streams through a standby. It
prints, over all rounds:
- failover: seconds from the kill until a standby reports itself leader (median, max) against
  the bound lease TTL + 2 s;
- commands: node receipts per action id (a duplicate is a command executed twice), receipts
  the final leader's history lacks (lost), profiles or plan generations lost (a new leader
  whose profiles miss one set before the kill, or whose generation sequence went back);
- /v1: a client sending short chats to the standbys all along: answers other than 200 and the
  longest run of them, against the failover window; streams through a standby cut by a kill;
- stops: a SIGSTOPped leader resumed after its lease expired: its role at once, and the node's
  fence refusals (a command the old leader sent would be one; with the receipts check above,
  it issued none).
The baseline, measured in the same run: one controller on the state file, SIGKILLed and
restarted at once by hand (what the file store needs), until it answers again.
Prints figures only; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from grid.node.agent.config import CatalogEntry, save_config
from grid.node.artifacts import (
    GEMMA3_270M_MODEL_ID,
    GEMMA3_270M_SHA256,
    SMOLLM2_MODEL_ID,
    SMOLLM2_SHA256,
    gemma3_270m_path,
    smollm2_path,
)
from grid.node.engines.binary import llama_server_binary
from tests.e2e.fleet_helpers import EngineNode, host_row, wait_for
from tests.ha.cluster import EtcdCluster
from tests.ha.harness import HA_CONTROLLER, HAControllerProcess, leader_of, start_controllers
from tests.service.harness import ControllerProcess


def profile(entry: CatalogEntry, replicas: int) -> dict[str, Any]:
    return {
        "memory_mb": 400,
        "min_replicas": replicas,
        "max_replicas": 1,
        "artifact_sha256": entry.sha256,
        "min_residency_s": 0,
        "scale_down_cooldown_s": 0,
    }


class Client(threading.Thread):
    """Short chats to the standbys, one after another, recording (time, status)."""

    def __init__(self, targets: list[str], model: str) -> None:
        super().__init__(daemon=True)
        self.targets = targets
        self.model = model
        self.results: list[tuple[float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 2,
            "temperature": 0,
        }
        with httpx.Client(timeout=30, trust_env=False) as client:
            while not self.stop.is_set():
                targets = list(self.targets)
                if not targets:
                    time.sleep(0.1)
                    continue
                url = random.choice(targets)
                try:
                    status = client.post(f"{url}/v1/chat/completions", json=body).status_code
                except httpx.HTTPError:
                    status = 0
                self.results.append((time.monotonic(), status))
                time.sleep(0.1)


def stream(url: str, model: str, out: dict[str, Any]) -> None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Count to twenty."}],
        "max_tokens": 80,
        "temperature": 0,
        "stream": True,
    }
    try:
        with (
            httpx.Client(timeout=120, trust_env=False) as client,
            client.stream("POST", f"{url}/v1/chat/completions", json=body) as reply,
        ):
            lines = [x for x in reply.iter_lines() if x.startswith("data:")]
            out["ok"] = reply.status_code == 200 and bool(lines) and lines[-1] == "data: [DONE]"
    except httpx.HTTPError:
        out["ok"] = False


def sequence(generation: str | None) -> tuple[str, int]:
    if not generation:
        return "", -1
    epoch, seq, _digest = generation.split(":")
    return epoch, int(seq)


def baseline(root: Path, kills: int) -> list[float]:
    """One controller on the state file: SIGKILL, restart at once, until it answers."""
    ctl = ControllerProcess(root / "file-ctl")
    took = []
    try:
        ctl.start(300.0)
        for _ in range(kills):
            ctl.kill()
            started = time.monotonic()
            ctl.start(300.0)
            took.append(time.monotonic() - started)
    finally:
        ctl.stop()
    return took


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="grid-failover-"))
    out: dict[str, Any] = {"kills": args.kills, "ttl_s": args.ttl, "rounds": []}
    out["baseline_restart_s"] = [round(x, 2) for x in baseline(root, args.baseline)]
    cluster = EtcdCluster(root / "etcd").start()
    controller = {**HA_CONTROLLER, "lease_ttl_s": args.ttl}
    trio = start_controllers(root / "ctl", cluster.store_url, 3, controller=controller)
    small = CatalogEntry(model_id=SMOLLM2_MODEL_ID, path=str(smollm2_path()), sha256=SMOLLM2_SHA256)
    gemma = CatalogEntry(
        model_id=GEMMA3_270M_MODEL_ID,
        path=str(gemma3_270m_path(root / "gemma")),
        sha256=GEMMA3_270M_SHA256,
    )
    leader = leader_of(trio)
    node = EngineNode(
        root / "nodes",
        leader,
        "host-a",
        catalog=[small, gemma],
        ports=(39930, 39949),
        llama_server=llama_server_binary(),
    )
    node.config = node.config.model_copy(
        update={"controllers": [c.url for c in trio], "request_timeout_s": 2.0, "capacity_mb": 4096}
    )
    save_config(node.folder, node.config)
    client = Client([], small.model_id)
    try:
        node.start()
        with leader.admin() as admin:
            admin.put_model(small.model_id, profile(small, 1))
            admin.set_mode("automatic")
        wait_for(
            lambda: (
                (r := host_row(leader.status().model_dump(mode="json"), "host-a", small.model_id))
                and r["state"] == "ready"
            ),
            120,
            "SmolLM2 ready",
        )
        client.targets[:] = [c.url for c in trio if c is not leader]
        client.start()
        profiles: list[str] = [small.model_id]
        last_seq: tuple[str, int] = ("", -1)
        for i in range(args.kills):
            leader = leader_of(trio)
            with leader.admin() as admin:
                admin.put_model(f"p{i}", {"memory_mb": 1, "min_replicas": 0})
                admin.put_model(gemma.model_id, profile(gemma, (i + 1) % 2))
            profiles += [f"p{i}"] + ([gemma.model_id] if gemma.model_id not in profiles else [])
            standbys = [c for c in trio if c is not leader]
            client.targets[:] = [c.url for c in standbys]
            time.sleep(rng.uniform(0.0, 2.5))
            streamed: dict[str, Any] = {}
            reader = threading.Thread(
                target=stream, args=(standbys[0].url, small.model_id, streamed)
            )
            reader.start()
            time.sleep(0.2)
            seen = sequence(leader.status().model_dump(mode="json").get("plan_generation"))
            leader.kill()
            killed = time.monotonic()
            successor = leader_of(standbys, timeout_s=args.ttl + 30)
            failover = time.monotonic() - killed
            status = successor.status().model_dump(mode="json")
            names = {p["model_id"] for p in status["profiles"]}
            now_seq = sequence(status.get("plan_generation"))
            lost_generation = bool(now_seq[0] == seen[0] and now_seq[1] < seen[1])
            reader.join(120)
            leader.start(300.0)  # it rejoins as a standby (slow on a loaded machine)
            client.targets[:] = [c.url for c in trio if c is not successor]
            last_seq = max(last_seq, now_seq)
            out["rounds"].append(
                {
                    "failover_s": round(failover, 3),
                    "window": (killed, killed + failover),
                    "profiles_lost": sorted(set(profiles) - names),
                    "generation_lost": lost_generation,
                    "stream_ok": streamed.get("ok", False),
                }
            )
            print(f"round {i}: failover {failover:.2f} s", file=sys.stderr)
        out["stops"] = stops(trio, node, args)
        client.stop.set()
        client.join(30)
        final = leader_of(trio)
        wait_for(lambda: all(r["acknowledged"] for r in receipts(node)), 60, "receipts acked")
        rows = receipts(node)
        history = {r["action_id"]: r for r in final.status()["history"]}
        out["receipts"] = len(rows)
        out["duplicates"] = sum(n - 1 for n in Counter(r["action_id"] for r in rows).values())
        out["receipts_lost"] = sum(
            1
            for r in rows
            if r["action_id"] not in history or not history[r["action_id"]]["finished_at"]
        )
        out["client"] = client_figures(client.results, out["rounds"])
    finally:
        client.stop.set()
        node.cleanup()
        for ctl in trio:
            if ctl.proc is not None and ctl.proc.poll() is None:
                ctl.resume()
            ctl.stop()
        cluster.stop()
    for r in out["rounds"]:
        del r["window"]
    return out


def receipts(node: EngineNode) -> list[dict[str, Any]]:
    state = json.loads((node.folder / "agent.json").read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = state["receipts"]
    return rows


FENCE_CODES = {
    "stale_term",
    "second_controller_in_term",
    "authority_expired",
    "term_jump_too_large",
}


def stops(
    trio: list[HAControllerProcess], node: EngineNode, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """SIGSTOP the leader past its lease, resume it: its role at once, and what reached the
    node from it (a command it sent would be a fence refusal or an unknown receipt)."""
    rows = []
    for _ in range(args.stops):
        leader = leader_of(trio)
        before = len(receipts(node))
        leader.pause()
        try:
            successor = leader_of([c for c in trio if c is not leader], timeout_s=args.ttl + 30)
            time.sleep(1.0)
        finally:
            leader.resume()
        time.sleep(0.3)
        role = (leader.authority() or {}).get("role")
        time.sleep(3.0)
        rows.append(
            {
                "role_after_resume": role,
                "new_leader": successor.url != leader.url,
                "receipts_during": len(receipts(node)) - before,
                "fence_refusals": sum(1 for r in receipts(node) if r.get("code") in FENCE_CODES),
            }
        )
    return rows


def client_figures(
    results: list[tuple[float, int]], rounds: list[dict[str, Any]]
) -> dict[str, Any]:
    bad = [(t, s) for t, s in results if s != 200]
    longest, run_start = 0.0, None
    for t, s in results:
        if s != 200:
            run_start = t if run_start is None else run_start
            longest = max(longest, t - run_start)
        else:
            run_start = None
    inside = sum(
        1 for t, _ in bad if any(a <= t <= b + 0.5 for a, b in (r["window"] for r in rounds))
    )
    return {
        "requests": len(results),
        "not_200": len(bad),
        "not_200_outside_windows": len(bad) - inside,
        "statuses": dict(Counter(s for _, s in bad)),
        "longest_not_200_run_s": round(longest, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--stops", type=int, default=3)
    parser.add_argument("--ttl", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--baseline", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = run(args)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    times = [r["failover_s"] for r in out["rounds"]]
    bound = args.ttl + 2
    print(
        f"failover after SIGKILL ({len(times)} kills, lease TTL {args.ttl:g} s, bound {bound:g} s):"
        f" median {statistics.median(times):.2f} s, max {max(times):.2f} s"
    )
    completed = sum(r["stream_ok"] for r in out["rounds"])
    print(f"  streams through a standby completed: {completed}/{len(times)}")
    print(
        f"  profiles lost: {sum(len(r['profiles_lost']) for r in out['rounds'])}, plan generations "
        f"lost: {sum(r['generation_lost'] for r in out['rounds'])}"
    )
    print(
        f"node receipts: {out['receipts']}, executed twice: {out['duplicates']}, "
        f"lost: {out['receipts_lost']}"
    )
    c = out["client"]
    print(
        f"/v1 client: {c['requests']} requests, {c['not_200']} not 200 {c['statuses']} "
        f"({c['not_200_outside_windows']} outside failover windows), "
        f"longest run {c['longest_not_200_run_s']} s"
    )
    for s in out["stops"]:
        print(
            f"SIGSTOP leader, resumed after expiry: role {s['role_after_resume']}, node fence "
            f"refusals {s['fence_refusals']}, receipts meanwhile {s['receipts_during']}"
        )
    base = out["baseline_restart_s"]
    if base:
        print(
            "baseline (state file, kill + immediate restart by hand): "
            f"median {statistics.median(base):.2f} s, max {max(base):.2f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
