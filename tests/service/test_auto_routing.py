"""`model: "auto"` on a real controller process (uvicorn on loopback) with a fake engine.

The engine is the outside thing (tests/router/fake_engine.py); the controller, its planner and
portfolio, the classifier and the proxy are the real ones.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.router.fake_engine import FakeEngine
from tests.router.test_proxy_service import ENGINE_KEY, register
from tests.service.harness import ControllerProcess

pytestmark = pytest.mark.service

CODING = (
    "Write a Python function that parses a CSV file into a list of dicts, "
    "then add unit tests with pytest for the edge cases."
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ControllerProcess]:
    process = ControllerProcess(tmp_path / "ctl")
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def coder_engine() -> Iterator[FakeEngine]:
    fake = FakeEngine(ENGINE_KEY, "coder-engine").start()
    yield fake
    fake.stop()


def auto_chat(server: ControllerProcess, content: str = CODING, **body: Any) -> httpx.Response:
    doc = {"model": "auto", "messages": [{"role": "user", "content": content}], **body}
    return httpx.post(f"{server.url}/v1/chat/completions", json=doc, timeout=10)


def status(server: ControllerProcess) -> dict[str, Any]:
    with server.admin() as admin:
        doc: dict[str, Any] = admin.status().model_dump(mode="json")
    return doc


def wait_for(server: ControllerProcess, check: Any, timeout_s: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        doc = status(server)
        if check(doc):
            return doc
        if time.monotonic() > deadline:
            raise AssertionError(json.dumps(doc.get("workloads"), indent=1)[:3000])
        time.sleep(0.2)


def models(server: ControllerProcess) -> list[dict[str, Any]]:
    listed = httpx.get(f"{server.url}/v1/models", timeout=5)
    assert listed.status_code == 200, listed.text
    data: list[dict[str, Any]] = listed.json()["data"]
    return data


def mapping(doc: dict[str, Any]) -> dict[str, str]:
    portfolio = (doc.get("plan") or {}).get("portfolio") or {}
    return dict(portfolio.get("mapping") or {})


def test_auto_waits_honestly_then_routes_to_the_mapped_ready_model_as_workload_demand(
    server: ControllerProcess, coder_engine: FakeEngine
) -> None:
    with server.admin() as admin:
        admin.put_model(
            "coder", {"memory_mb": 200, "max_replicas": 2, "workload_scores": {"coding": 1.0}}
        )
    register(server, "host-c", {"coder": coder_engine})

    # No portfolio yet: an honest 503 saying what is being prepared, and no engine call.
    first = auto_chat(server)
    assert first.status_code == 503, first.text
    body = first.json()
    assert body["error"]["code"] == "workload_preparing"
    assert body["preparing"]["workload"] == "coding"
    assert body["preparing"]["state"] and body["preparing"]["reason"]
    assert coder_engine.requests == []

    # Not servable yet, so `auto` is not offered to clients that pick from the model list.
    assert [m["id"] for m in models(server)] == ["coder"]
    unlisted = httpx.get(f"{server.url}/v1/models/auto", timeout=5)
    assert unlisted.status_code == 404
    assert unlisted.json()["error"]["code"] == "model_unavailable"

    # Two more coding requests reach the evidence gate (3 observations): the plan maps coding
    # to the READY coder.
    for _ in range(2):
        assert auto_chat(server).status_code == 503
    doc = wait_for(server, lambda d: mapping(d).get("coding") == "coder")
    rows = {r["workload"]: r for r in doc["plan"]["portfolio"]["admission"]}
    assert rows["coding"]["model_id"] == "coder"
    # Now an automatic request would be served: `auto` is listed, last, saying for which work.
    listed = models(server)
    assert [m["id"] for m in listed] == ["coder", "auto"]
    assert listed[-1]["grid_workloads"] == ["coding"]
    assert httpx.get(f"{server.url}/v1/models/auto", timeout=5).json()["id"] == "auto"

    served = auto_chat(server)
    assert served.status_code == 200, served.text
    assert served.headers["X-Grid-Model"] == "coder"
    assert served.headers["X-Grid-Workload"] == "coding"
    sent = json.loads(coder_engine.requests[-1]["body"])
    assert sent["model"] == "coder"  # the body is bound to the chosen model
    assert sent["messages"][0]["content"] == CODING

    # Counted as workload demand (4 requests) and outcome evidence for coder, never as demand
    # for the model that served it.
    doc = wait_for(
        server,
        lambda d: any(
            o["model_id"] == "coder" and o["requests"] >= 1 for o in d["workloads"]["outcomes"]
        ),
    )
    assert doc["workloads"]["forecasts"]["coding"]["observations"] == 4
    # The proxy's throughput measurement of that revision reaches the planning snapshot: one
    # sample, so 1/8 of the measured rate over the hardware prior (0 for this host).
    (host,) = [h for h in doc["snapshots"] if h["host_id"] == "host-c"]
    assert host["measured_tokens_per_s"]["coder"] > 0
    assert "coder" not in doc["forecasts"] or doc["forecasts"]["coder"]["rpm"] == 0

    # The mapped model loses its route: 503 again, naming the model being prepared.
    register(server, "host-c", {"coder": coder_engine}, residency_state="loading")
    assert "auto" not in [m["id"] for m in models(server)]
    waiting = auto_chat(server)
    assert waiting.status_code == 503, waiting.text
    assert waiting.json()["preparing"]["model_id"] == "coder"
    assert waiting.json()["preparing"]["route_refusal"] == "not_admitted"  # loading, not ready


def test_bad_auto_bodies_are_clear_400s_and_nothing_is_recorded(
    server: ControllerProcess,
) -> None:
    before = status(server)["counters"]
    url = f"{server.url}/v1/chat/completions"
    cases = [
        httpx.post(url, content=b"model=auto&prompt=hi", timeout=5),
        httpx.post(url, content=b'{"model": "auto", "messages": [', timeout=5),
        httpx.post(url, content=b'["auto"]', timeout=5),
        httpx.post(f"{server.url}/v1/completions", content=b"\xff\xfe", timeout=5),
    ]
    for reply in cases:
        assert reply.status_code == 400, reply.text
        error = reply.json()["error"]
        assert error["code"] == "invalid_request"
        assert error["message"] and error["fix"]
    time.sleep(0.5)
    after = status(server)
    assert after["counters"]["observations_accepted"] == before["observations_accepted"]
    assert after["counters"]["observations_ignored"] == before["observations_ignored"]
    assert after["workloads"]["forecasts"] == {}


def test_a_request_without_a_model_is_automatic(server: ControllerProcess) -> None:
    reply = httpx.post(
        f"{server.url}/v1/completions", json={"prompt": "def add(a, b):\n    return"}, timeout=5
    )
    assert reply.status_code == 503, reply.text
    assert reply.json()["preparing"]["workload"] == "coding"
    doc = wait_for(server, lambda d: "coding" in d["workloads"]["forecasts"])
    assert doc["workloads"]["forecasts"]["coding"]["observations"] == 1
