"""Relay overhead benchmark: router -> tunnel -> engine against a direct call to the engine.

    .venv/bin/python bench/bench_relay.py [--machines 1] [--requests 40] [--rounds 3]
                                          [--concurrency 1,8] [--max-tokens 16] [--json]

It starts a logical fleet with `--distinct-addresses` (`grid test start`: the controller on TLS
at 127.0.0.1 with a generated CA, each machine's engines on its own loopback address, each node
agent reaching the controller over its relay tunnel), issues a client key, and sends the same
chat completion with the openai SDK (httpx when the SDK is not installed) two ways, in the same
run, against the same real llama-server child:

- direct: straight to the engine (`http://127.0.0.x:PORT/v1`, with the node's engine key), the
  baseline;
- relay: to the controller's /v1 (TLS, client key), which routes it down the node's tunnel.

Per concurrency level C it sends waves of C simultaneous requests (C client threads), one path
per wave, the paths alternating wave by wave (`--requests` / C waves per path per round, times
`--rounds`), so drift on a shared machine hits both alike. It prints p50 and p95 latency per
path, the overhead (relay - direct) in ms and as a percentage of the direct figure, and the
median of the paired differences of back-to-back waves (`paired`), and the CPU the controller
and node agent spend per relayed request (`cpu ms`: their CPU during the relay waves less
during the direct waves, per relayed request), the part of the overhead no load changes.
Prints figures only; asserts nothing. The goal it is read against: overhead <= 5% of direct
at concurrency 8 (p50 and p95) and <= 10 ms p50 at concurrency 1.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
MODEL = "smollm2-135m"
PROMPT = "Name one colour."


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _grid(env: dict[str, str], *args: str, timeout: float = 400) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "grid", *args],
        capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"grid {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def _sender(base_url: str, key: str, verify: ssl.SSLContext | bool, threads: int) -> Any:
    """One chat completion per call, through the openai SDK when it is installed."""
    http = httpx.Client(
        verify=verify,
        trust_env=False,
        timeout=120,
        limits=httpx.Limits(max_connections=threads + 2, max_keepalive_connections=threads + 2),
    )
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": ARGS.max_tokens,
        "temperature": 0,
        "seed": 7,
    }
    try:
        import openai
    except ImportError:

        def send_httpx() -> None:
            reply = http.post(
                f"{base_url}/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
            )
            reply.raise_for_status()

        return send_httpx, "httpx"
    client = openai.OpenAI(base_url=base_url, api_key=key, http_client=http, max_retries=0)

    def send_sdk() -> None:
        client.chat.completions.create(**body)

    return send_sdk, f"openai {openai.__version__}"


def _cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds the processes used so far (the controller and node agents)."""
    import psutil

    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


def _run(send: Callable[[], None], requests: int, threads: int) -> list[float]:
    def one(_index: int) -> float:
        started = time.perf_counter()
        send()
        return (time.perf_counter() - started) * 1000.0

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(requests)))


def measure(fleet: dict[str, Any], key: str, concurrency: int) -> dict[str, Any]:
    engine_url = f"http://{fleet['engine_address']}:{fleet['engine_port']}/v1"
    router_url = f"{fleet['controller_url']}/v1"
    ca = ssl.create_default_context(cafile=fleet["ca_file"])
    direct, client_name = _sender(engine_url, fleet["engine_key"], False, concurrency)
    relay, _ = _sender(router_url, key, ca, concurrency)
    samples: dict[str, list[float]] = {"direct": [], "relay": []}
    paired: list[float] = []  # relay - direct of back-to-back waves (drift cancels out)
    cpu = {"direct": 0.0, "relay": 0.0}  # Grid's processes' CPU during each path's waves
    _run(direct, concurrency, concurrency)  # warm both paths' connections
    _run(relay, concurrency, concurrency)
    waves = max(1, ARGS.requests // concurrency) * ARGS.rounds
    for wave in range(waves):
        order = ["direct", "relay"] if wave % 2 == 0 else ["relay", "direct"]
        medians: dict[str, float] = {}
        for path in order:
            before = _cpu_s(fleet["pids"])
            values = _run(direct if path == "direct" else relay, concurrency, concurrency)
            cpu[path] += _cpu_s(fleet["pids"]) - before
            samples[path] += values
            medians[path] = statistics.median(values)
        paired.append(medians["relay"] - medians["direct"])
    row: dict[str, Any] = {"concurrency": concurrency, "client": client_name, "waves": waves}
    for path, values in samples.items():
        row[path] = {
            "n": len(values),
            "p50_ms": round(statistics.median(values), 2),
            "p95_ms": round(_percentile(values, 0.95), 2),
        }
    for q in ("p50_ms", "p95_ms"):
        base, via = row["direct"][q], row["relay"][q]
        row[f"overhead_{q}"] = round(via - base, 2)
        row[f"overhead_{q[:3]}_pct"] = round(100.0 * (via - base) / base, 2) if base else None
    row["paired_overhead_ms"] = round(statistics.median(paired), 2)
    # The relay's own cost, whatever the machine's load: CPU the controller and node agent
    # spent per relayed request, less what they spend anyway (during the direct waves).
    count = len(samples["relay"])
    row["grid_cpu_ms_per_request"] = round(1000.0 * (cpu["relay"] - cpu["direct"]) / count, 2)
    return row


def start_fleet(env: dict[str, str]) -> dict[str, Any]:
    port, engines = _free_port(), 39500 + (os.getpid() % 40) * 10
    start = ["test", "start", "--distinct-addresses", "--machines", str(ARGS.machines)]
    start += ["--port", str(port), "--engine-port-base", str(engines), "--wait-seconds", "240"]
    _grid(env, *start)
    doc = json.loads(_grid(env, "test", "status", "--json"))
    node = next(n for n in doc["nodes"] if any(r["state"] == "ready" for r in n["residencies"]))
    [engine_port] = [r["port"] for r in node["residencies"] if r["state"] == "ready"]
    addresses = {h["host_id"]: h["address"] for h in doc["hosts"]}
    run_dir = Path(doc["run_dir"])
    key_file = run_dir / "nodes" / node["host_id"] / "engines" / "engine.keys"
    pid_files = [run_dir / "controller" / "server.pid"]
    pid_files += [run_dir / "nodes" / n["host_id"] / "agent.pid" for n in doc["nodes"]]
    return {
        "pids": [int(json.loads(p.read_text())["pid"]) for p in pid_files],
        "controller_url": doc["controller_url"],
        "ca_file": doc["ca_file"],
        "run_dir": str(run_dir),
        "host_id": node["host_id"],
        "engine_address": addresses[node["host_id"]],
        "engine_port": engine_port,
        "engine_key": key_file.read_text().strip(),
    }


def client_key(fleet: dict[str, Any], env: dict[str, str]) -> str:
    config = Path(fleet["run_dir"]) / "controller"
    where = ["--grid", fleet["controller_url"], "--token-file", str(config / "config.json")]
    out = _grid(env, "allocator", "key", "create", f"bench-{os.getpid()}", "--json", *where)
    return str(json.loads(out)["key"])


def main() -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_")}
    env["GRID_CA_FILE"] = ""
    with tempfile.TemporaryDirectory(prefix="grid-bench-relay-") as folder:
        env["GRID_TEST_DIR"] = str(Path(folder) / "fleet")
        try:
            fleet = start_fleet(env)
            env["GRID_CA_FILE"] = fleet["ca_file"]
            key = client_key(fleet, env)
            rows = [measure(fleet, key, c) for c in ARGS.concurrency]
        finally:
            subprocess.run([sys.executable, "-m", "grid", "test", "stop"], env=env,
                           capture_output=True, timeout=180, cwd=ROOT)  # fmt: skip
    report = {
        "bench": "relay",
        "machines": ARGS.machines,
        "max_tokens": ARGS.max_tokens,
        "rounds": ARGS.rounds,
        "requests_per_round": ARGS.requests,
        "load_average": os.getloadavg(),
        "rows": rows,
    }
    if ARGS.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"relay overhead, {ARGS.machines} logical machine(s) with distinct addresses, "
          f"max_tokens {ARGS.max_tokens}, load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"client: {rows[0]['client'] if rows else '-'}")
    head = f"{'conc':>4} {'direct p50':>10} {'relay p50':>10} {'+ms':>7} {'+%':>6}"
    head += f" {'direct p95':>10} {'relay p95':>10} {'+ms':>7} {'+%':>6} {'paired':>7}"
    head += f" {'cpu ms':>7}"
    print(head)
    for row in rows:
        d, r = row["direct"], row["relay"]
        print(
            f"{row['concurrency']:>4} {d['p50_ms']:>10.1f} {r['p50_ms']:>10.1f} "
            f"{row['overhead_p50_ms']:>7.1f} {row['overhead_p50_pct']:>6.1f} "
            f"{d['p95_ms']:>10.1f} {r['p95_ms']:>10.1f} "
            f"{row['overhead_p95_ms']:>7.1f} {row['overhead_p95_pct']:>6.1f} "
            f"{row['paired_overhead_ms']:>7.1f} {row['grid_cpu_ms_per_request']:>7.2f}"
        )
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=1)
    parser.add_argument("--requests", type=int, default=40, help="per path per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=lambda t: [int(x) for x in t.split(",")],
                        default=[1, 8])  # fmt: skip
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--json", action="store_true")
    ARGS = parser.parse_args()
    raise SystemExit(main())
