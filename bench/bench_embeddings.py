#!/usr/bin/env python3
"""Embeddings through the router: N requests at concurrency C, errors and latency, against the
same requests sent straight to the engine (the baseline), in one run.

A real controller (`python -m grid.api.server`) and a real node agent with a llama.cpp child
serving SmolLM2 with --embeddings --pooling mean (docs/engines.md), all on loopback in a
temporary folder; everything is stopped at the end.

    .venv/bin/python bench/bench_embeddings.py [--requests 200] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grid.api.settings import load_or_create_settings  # noqa: E402
from grid.fleet.files import atomic_write_text  # noqa: E402
from grid.node.agent.config import CatalogEntry, NodeConfig, save_config  # noqa: E402
from grid.node.agent.process import start_agent, stop_agent  # noqa: E402
from grid.node.agent.status import read_status  # noqa: E402
from grid.node.artifacts import SMOLLM2_SHA256, smollm2_path  # noqa: E402
from grid.node.engines import llama_server_binary  # noqa: E402
from grid.wire import AllocatorClient  # noqa: E402

MODEL = "smol-embed"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(condition: Any, timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with_value = condition()
        if with_value:
            return with_value
        time.sleep(0.3)
    raise SystemExit(f"timed out waiting for {what}")


def _run(url: str, headers: dict[str, str], n: int, concurrency: int) -> dict[str, float]:
    latencies: list[float] = []
    errors = 0
    with httpx.Client(timeout=120, trust_env=False, headers=headers) as client:

        def call(i: int) -> None:
            nonlocal errors
            started = time.perf_counter()
            reply = client.post(url, json={"model": MODEL, "input": f"document number {i}"})
            latencies.append(time.perf_counter() - started)
            ok = reply.status_code == 200 and reply.json()["data"][0]["embedding"]
            errors += 0 if ok else 1

        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(call, range(n)))
        wall = time.perf_counter() - started
    latencies.sort()
    return {
        "errors": errors,
        "rps": n / wall,
        "p50_ms": statistics.median(latencies) * 1000,
        "p95_ms": latencies[max(0, int(0.95 * n) - 1)] * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="grid-bench-embed-"))
    settings = load_or_create_settings(root / "ctl", port=_free_port())
    log = (root / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "grid.api.server", "--state-dir", str(root / "ctl")],
        stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
    )  # fmt: skip
    node_dir = root / "node"
    try:
        admin = AllocatorClient(settings.url, operator_token=settings.operator_token)
        _wait(lambda: server.poll() is None and _healthy(settings.url), 30, "the controller")
        node_dir.mkdir(mode=0o700)
        token = node_dir / "node.token"
        atomic_write_text(token, admin.node_credential("bench-e").token + "\n")
        save_config(
            node_dir,
            NodeConfig(
                grid_url=settings.url, host_id="bench-e", token_file=str(token),
                capacity_mb=2048, external_memory="none", telemetry="logical",
                heartbeat_interval_s=0.5, engine_port_range=(39450, 39459),
                llama_server=str(llama_server_binary()),
                catalog=[CatalogEntry(model_id=MODEL, path=str(smollm2_path()),
                                      sha256=SMOLLM2_SHA256)],
                protection={"debounce_samples": 1, "recovery_cooldown_s": 0.0},
            ),
        )  # fmt: skip
        start_agent(node_dir, token=None)
        admin.put_model(
            MODEL,
            {"memory_mb": 256, "min_replicas": 1, "kind": "embedding", "pooling": "mean",
             "artifact_sha256": SMOLLM2_SHA256},
        )  # fmt: skip
        admin.set_mode("automatic")
        admin.tick()
        port = _wait(lambda: _engine_port(node_dir), 120, "the embedding engine READY")
        _wait(lambda: _listed(settings.url), 30, "the model routable")
        key = (node_dir / "engines" / "engine.keys").read_text().strip()
        rows = {
            "direct (engine)": _run(
                f"http://127.0.0.1:{port}/v1/embeddings",
                {"Authorization": f"Bearer {key}"},
                args.requests,
                args.concurrency,
            ),
            "router (Grid)": _run(
                f"{settings.url}/v1/embeddings", {}, args.requests, args.concurrency
            ),
        }
        print(f"embeddings, {args.requests} requests at concurrency {args.concurrency}")
        print(f"{'path':<18} {'errors':>6} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8}")
        for name, r in rows.items():
            print(
                f"{name:<18} {r['errors']:>6.0f} {r['rps']:>7.1f} "
                f"{r['p50_ms']:>8.0f} {r['p95_ms']:>8.0f}"
            )
        return 0 if rows["router (Grid)"]["errors"] == 0 else 1
    finally:
        stop_agent(node_dir, force=True)
        server.terminate()
        server.wait(15)
        log.close()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def _listed(url: str) -> bool:
    data = httpx.get(f"{url}/v1/models", timeout=5, trust_env=False).json()
    return MODEL in [m["id"] for m in data["data"]]


def _engine_port(node_dir: Path) -> int | None:
    """The READY child's port from the node's own status file."""
    status = read_status(node_dir)
    rows = status.residencies if status is not None else []
    return next((r.port for r in rows if r.model_id == MODEL and r.state == "ready"), None)


if __name__ == "__main__":
    raise SystemExit(main())
