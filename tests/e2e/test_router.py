"""A real chat completion through the controller's OpenAI proxy from a real llama-server child,
and the request showing up as demand for its model."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from grid.node.agent.config import CatalogEntry
from tests.e2e.conftest import NodeFactory
from tests.e2e.fleet_helpers import host_row, wait_for
from tests.service.harness import ControllerProcess

pytestmark = pytest.mark.engine


def _proxy_chat(server: ControllerProcess, model: str, **extra: Any) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/chat/completions",
        json={
            "model": model,
            "messages": [{"role": "user", "content": "Reply with OK"}],
            "max_tokens": 8,
            "temperature": 0,
            **extra,
        },
        headers={"Authorization": "Bearer not-the-engine-key", "X-Grid-Affinity-Key": "e2e"},
        timeout=60,
        trust_env=False,
    )


def test_chat_through_grid_reaches_a_real_child_and_becomes_demand(
    controller: ControllerProcess, make_node: NodeFactory, smollm2_entry: CatalogEntry
) -> None:
    node = make_node("host-r", [smollm2_entry])
    node.start()
    model = smollm2_entry.model_id
    with controller.admin() as admin:
        admin.put_model(
            model,
            {
                "memory_mb": 256,
                "min_replicas": 1,
                "max_replicas": 1,
                "artifact_sha256": smollm2_entry.sha256,
            },
        )
        admin.set_mode("automatic")
        admin.tick()
        wait_for(
            lambda: (
                (
                    host_row(admin.status(history=0).model_dump(mode="json"), "host-r", model) or {}
                ).get("state")
                == "ready"
            ),
            120,
            "the baseline replica ready",
        )

    def listed() -> bool:
        data = httpx.get(f"{controller.url}/v1/models", timeout=5, trust_env=False).json()
        return model in [m["id"] for m in data["data"]]

    wait_for(listed, 30, "the model listed by GET /v1/models")
    reply = _proxy_chat(controller, model)
    assert reply.status_code == 200, reply.text
    assert reply.headers["x-grid-served-by"] == "host-r"
    body = reply.json()
    assert body["choices"][0]["message"]["content"].strip()  # real text from the real child
    assert body["usage"]["completion_tokens"] >= 1

    with httpx.Client(timeout=60, trust_env=False) as client, client.stream(
        "POST",
        f"{controller.url}/v1/chat/completions",
        json={"model": model, "messages": [{"role": "user", "content": "Hi"}],
              "max_tokens": 4, "stream": True},
    ) as streamed:  # fmt: skip
        assert streamed.status_code == 200
        events = [line for line in streamed.iter_lines() if line.startswith("data:")]
    assert events[-1] == "data: [DONE]" and len(events) >= 2

    def demand_seen() -> dict[str, Any] | None:
        with controller.admin() as admin:
            status = admin.status(history=0).model_dump(mode="json")
        forecast = status["forecasts"].get(model, {})
        accepted = status["counters"]["observations_accepted"]
        return status if forecast.get("rpm", 0) > 0 and accepted >= 2 else None

    status = wait_for(demand_seen, 10, "the proxied requests as demand", step_s=0.1)
    key = node.engine_key()
    assert key not in json.dumps(status) and key not in reply.text
    assert key not in controller.log_path.read_text()
