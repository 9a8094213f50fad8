"""`grid models` and `grid chat` against a real controller process: profiles and served models,
a streamed reply through the router from an engine on its advertised address, and the refusal
for a model nothing serves."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from tests.router.fake_engine import FakeEngine
from tests.service.harness import ControllerProcess
from tests.service.test_addressing import ENGINE_KEY, register

pytestmark = pytest.mark.service

runner = CliRunner()


@pytest.fixture
def engine() -> Iterator[FakeEngine]:
    fake = FakeEngine(ENGINE_KEY, "gamma", host="127.0.0.4").start()
    try:
        yield fake
    finally:
        fake.stop()


def test_models_and_chat(controller: ControllerProcess, engine: FakeEngine) -> None:
    with controller.admin() as admin:
        admin.put_model("idle-model", {"memory_mb": 300, "max_replicas": 1})
    register(controller, "host-g", "gamma", engine.port, "127.0.0.4")
    engine.mode = "sse"

    listed = runner.invoke(app, ["models", "--grid", controller.url, "--json"])
    assert listed.exit_code == 0, listed.output
    doc = json.loads(listed.output)
    assert {p["model_id"] for p in doc["profiles"]} == {"idle-model", "gamma"}
    assert doc["served"] == ["gamma"]
    table = runner.invoke(app, ["models", "--state-dir", str(controller.state_dir)])
    assert table.exit_code == 0 and "idle-model" in table.output and "gamma" in table.output

    reply = runner.invoke(app, ["chat", "-m", "gamma", "hello there", "--grid", controller.url])
    assert reply.exit_code == 0, reply.output
    assert reply.stdout.splitlines()[0] == "OK"  # the fake engine streams "O", "K"
    [seen] = engine.requests
    sent = json.loads(seen["body"])
    assert sent["stream"] is True and sent["messages"][0]["content"] == "hello there"

    refused = runner.invoke(app, ["chat", "-m", "idle-model", "hi", "--grid", controller.url])
    assert refused.exit_code != 0
    # The controller runs in recommend mode: the refusal names the mode and its command.
    assert "recommend mode" in refused.output and "grid allocator mode automatic" in refused.output
