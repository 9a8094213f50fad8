"""The first hour of a new operator (issue 25, part 4), on a real controller process where a
controller is needed: the current-controller setting, the mode said wherever nothing happens
because of it, the candidates' chat template, the demo's answer check and the join line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grid.cli.context import write_context
from grid.cli.demo_personas import answer_problem
from grid.cli.main import app
from grid.lab.logical_fleet import candidate_profile
from grid.lab.logical_fleet_settings import CandidateModel, FleetModel, FleetSettings
from tests.service.harness import ControllerProcess

runner = CliRunner()


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[ControllerProcess]:
    server = ControllerProcess(tmp_path / "ctl")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.unit
def test_candidates_keep_their_chat_template() -> None:
    gemma = FleetModel(model_id="gemma-3-270m", path="/w/g.gguf", sha256="a" * 64, memory_mb=512,
                       chat_template="gemma")  # fmt: skip
    smol = FleetModel(model_id="smollm2-135m", path="/w/s.gguf", sha256="b" * 64, memory_mb=256)
    settings = FleetSettings(
        machines=1,
        model=smol,
        capacities_mb=[1024],
        candidates=[CandidateModel(**gemma.model_dump(), workload_scores={"coding": 1.0})],
    )
    assert candidate_profile(settings, settings.candidates[0])["chat_template"] == "gemma"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("def add(a, b):\n    return a + b", False),
        ("Hello there, nice to meet you!", False),
        ("<|im_end|>\n<|im_start|>assistant<|im_end|>", True),  # template-less gemma
        ("Sure<end_of_turn>\n<start_of_turn>model", True),
        ("   ", True),
    ],
)
def test_the_demo_checks_the_answer_not_only_the_status(text: str, bad: bool) -> None:
    assert bool(answer_problem(text)) is bad


@pytest.mark.service
def test_grid_url_and_the_context_file_pick_the_controller(
    controller: ControllerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRID_STATE_DIR", str(tmp_path / "no-controller-here"))
    monkeypatch.delenv("GRID_ALLOCATOR_CONTROL_TOKEN", raising=False)
    nothing = runner.invoke(app, ["allocator", "status", "--json"])
    assert nothing.exit_code == 2 and "grid up" in nothing.output
    # The context file `grid test start` / `grid up` write: URL and the config.json path.
    write_context(controller.url, controller.state_dir / "config.json", None, "test")
    status = runner.invoke(app, ["allocator", "status", "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.output)["mode"] == "recommend"
    admin = runner.invoke(app, ["allocator", "mode", "automatic"])  # the token from the file
    assert admin.exit_code == 0, admin.output
    with controller.public() as public:
        assert public.status().model_dump(mode="json")["mode"] == "automatic"
    # $GRID_URL wins over the file; an admin command then needs a token from elsewhere.
    monkeypatch.setenv("GRID_URL", "http://127.0.0.1:9")
    moved = runner.invoke(app, ["allocator", "status", "--json"])
    assert moved.exit_code == 2 and "127.0.0.1:9" in moved.output


@pytest.mark.service
def test_recommend_mode_is_said_where_nothing_happens_because_of_it(
    controller: ControllerProcess,
) -> None:
    token = str(controller.state_dir / "config.json")
    base = ["--grid", controller.url, "--token-file", token]
    saved = runner.invoke(
        app, ["allocator", "model", "set", "tiny", "--memory-mb", "256", "--chat-template",
              "gemma", *base],
    )  # fmt: skip
    assert saved.exit_code == 0, saved.output
    assert "chat template gemma" in saved.output
    assert "recommend mode" in saved.output and "grid allocator mode automatic" in saved.output
    chat = runner.invoke(app, ["chat", "-m", "tiny", "hello", "--grid", controller.url])
    assert chat.exit_code == 2
    assert "recommend mode" in chat.output and "grid allocator mode automatic" in chat.output
    with controller.public() as public:
        profile = next(
            p
            for p in public.status().model_dump(mode="json")["profiles"]
            if p["model_id"] == "tiny"
        )
    assert profile["chat_template"] == "gemma"


@pytest.mark.service
def test_enroll_prints_the_exact_join_line(controller: ControllerProcess, tmp_path: Path) -> None:
    out = tmp_path / "worker-01.enroll"
    result = runner.invoke(
        app, ["allocator", "enroll", "--host-id", "worker-01", "-o", str(out), "--grid",
              controller.url, "--token-file", str(controller.state_dir / "config.json")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    line = f"grid allocator join {controller.url} --enrollment-token worker-01.enroll"
    assert f"  {line}\n" in result.output
    assert out.read_text().strip() not in result.output  # the token itself is not printed
