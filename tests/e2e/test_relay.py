"""The relay with a real node agent and a real llama-server child (one machine, loopback).

The node's engine binds loopback only and the agent reaches the controller through its tunnel:
the openai SDK's chat through the router is served over it; a capture of the controller's port
shows the prompt crossing (the capture works) and never the engine key, which does appear on
the engine's own port (the node adds it there); a streaming client that leaves stops the real
engine's generation within seconds instead of its hundreds of tokens."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from grid.node.agent.config import CatalogEntry
from tests.e2e import capture
from tests.e2e.conftest import NodeFactory
from tests.e2e.fleet_helpers import EngineNode, host_row, wait_for
from tests.service.harness import ControllerProcess

pytestmark = pytest.mark.engine

PROMPT = "relay-probe-7f3c: say one word"


def _listening(port: int) -> list[str]:
    """The local addresses listening on `port` (from /proc/net/tcp, state 0A = LISTEN)."""
    found = []
    with open("/proc/net/tcp", encoding="ascii") as table:
        lines = table.read().splitlines()[1:]
    for line in lines:
        local, state = line.split()[1], line.split()[3]
        address, hexport = local.split(":")
        if state == "0A" and int(hexport, 16) == port:
            raw = bytes.fromhex(address)[::-1]
            found.append(".".join(str(b) for b in raw))
    return found


def _ready_node(
    controller: ControllerProcess, make_node: NodeFactory, entry: CatalogEntry
) -> tuple[EngineNode, dict[str, Any]]:
    node = make_node("host-relay", [entry])
    node.start()
    with controller.admin() as admin:
        admin.put_model(
            entry.model_id,
            {"memory_mb": 256, "min_replicas": 1, "max_replicas": 1,
             "artifact_sha256": entry.sha256},
        )  # fmt: skip
        admin.set_mode("automatic")
        wait_for(
            lambda: (
                (
                    host_row(
                        admin.status(history=0).model_dump(mode="json"),
                        "host-relay",
                        entry.model_id,
                    )
                    or {}
                ).get("state")
                == "ready"
            ),
            120,
            "the replica ready",
        )
    row = node.ready_residency(entry.model_id)
    with controller.public() as client:
        wait_for(
            lambda: any(
                r["host_id"] == "host-relay"
                for r in client.status(history=0).model_dump(mode="json")["relay"]
            ),
            30,
            "the node's tunnel",
        )
    return node, row


def test_the_router_reaches_a_real_engine_only_over_the_tunnel(
    controller: ControllerProcess, make_node: NodeFactory, smollm2_entry: CatalogEntry
) -> None:
    why = capture.available()
    node, row = _ready_node(controller, make_node, smollm2_entry)
    port = row["port"]
    assert _listening(port) == ["127.0.0.1"]  # the engine is private to its host
    assert (node.status().get("relay") or {}).get("connected") is True
    openai = pytest.importorskip("openai")
    recorder = capture.Capture("lo") if why is None else None
    try:
        sdk = openai.OpenAI(base_url=f"{controller.url}/v1", api_key="unused", max_retries=0)
        answer = sdk.chat.completions.with_raw_response.create(
            model=smollm2_entry.model_id,
            messages=[{"role": "user", "content": PROMPT}],
            max_tokens=8,
            temperature=0,
        )
        assert answer.headers["x-grid-served-by"] == "host-relay"
        assert answer.parse().choices[0].message.content.strip()
        time.sleep(2 * node.config.heartbeat_interval_s)  # heartbeats cross the capture too
    finally:
        if recorder is not None:
            recorder.stop()
    with controller.public() as client:
        [tunnel] = [
            r
            for r in client.status(history=0).model_dump(mode="json")["relay"]
            if r["host_id"] == "host-relay"
        ]
    assert tunnel["requests"] >= 1
    if recorder is None:
        pytest.skip(f"served over the tunnel; the capture part needs root: {why}")
    key = node.engine_key().encode()
    ctl_port = int(controller.url.rsplit(":", 1)[1])
    # The client's request and the tunnel's frame both carry the prompt on the controller's
    # port: the capture sees that traffic. The engine key is never on it (heartbeats included),
    # and it is on the engine's port, where the node itself adds it.
    assert recorder.count(PROMPT.encode(), ctl_port) >= 2, recorder.ports()
    assert recorder.count(key, ctl_port) == 0
    assert recorder.count(key, port) >= 1


def _processing(port: int, key: str) -> bool:
    slots = httpx.get(
        f"http://127.0.0.1:{port}/slots",
        headers={"Authorization": f"Bearer {key}"},
        timeout=5,
        trust_env=False,
    ).json()
    return any(s.get("is_processing") for s in slots)


def test_a_client_that_leaves_stops_the_real_engine(
    controller: ControllerProcess, make_node: NodeFactory, smollm2_entry: CatalogEntry
) -> None:
    node, row = _ready_node(controller, make_node, smollm2_entry)
    port, key = row["port"], node.engine_key()
    body = {
        "model": smollm2_entry.model_id,
        "messages": [{"role": "user", "content": "Count from one to one thousand."}],
        "max_tokens": 1500,
        "ignore_eos": True,  # llama.cpp: generate all of them unless stopped
        "stream": True,
    }
    with httpx.Client(timeout=60, trust_env=False) as client, client.stream(
        "POST", f"{controller.url}/v1/chat/completions", json=body
    ) as streamed:  # fmt: skip
        assert streamed.status_code == 200
        chunks = streamed.iter_raw()
        for _ in range(3):
            next(chunks)
        assert _processing(port, key)  # generating
        left_at = time.monotonic()
    # The client is gone: router -> CANCEL -> node closes the engine connection -> it stops.
    wait_for(lambda: not _processing(port, key), 15, "the engine to stop generating", 0.1)
    stopped_after = time.monotonic() - left_at
    print(f"engine stopped {stopped_after:.2f} s after the client left")
    with controller.public() as client:
        assert (
            client.status(history=0).model_dump(mode="json")["route_failures"] == []
        )  # a cancel is not the engine's failure
