"""Both shipped models answer chat in plain text through Grid (issue 14, item 8).

gemma-3-270m's GGUF carries no chat template; without one llama-server formats the chat as
ChatML and the model echoes `<|im_end|>` garbage. Its shipped profile names the gemma template
(`chat_template = "gemma"`, llama-server `--chat-template gemma`), which the controller sends
with every command and the node passes to the engine. Real controller, node agent, llama.cpp.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import httpx
import pytest

from tests.cli.grid_process import REPO, clean_env, grid
from tests.service.harness import free_port

pytestmark = pytest.mark.engine

MARKUP = ("<|im_end|>", "<|im_start|>", "<start_of_turn>", "<end_of_turn>", "<eos>", "<|")


def test_the_shipped_gemma_profile_names_the_gemma_template() -> None:
    catalog = tomllib.loads((REPO / "models" / "catalog.toml").read_text())["models"]
    gemma = next(m for m in catalog if m["model_id"] == "gemma-3-270m")
    assert gemma["chat_template"] == "gemma"


@pytest.mark.parametrize(("model", "engines"), [("gemma-3-270m", 39780), ("smollm2-135m", 39790)])
def test_shipped_models_answer_in_plain_text(
    tmp_path: Path, llama_server: Path, model: str, engines: int
) -> None:
    env = clean_env(tmp_path, GRID_TEST_DIR=str(tmp_path / "run"))
    port = free_port()
    args = ["--machines", "1", "--model", model, "--wait-seconds", "300"]
    try:
        started = grid(
            env, "test", "start", *args, "--port", str(port), "--engine-port-base", str(engines)
        )
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"{model} is READY on logical-01" in started.stdout
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={
                "model": model,
                "messages": [{"role": "user", "content": "Say hello in one short sentence."}],
                "max_tokens": 24,
                "temperature": 0,
            },
            timeout=120,
            trust_env=False,
        )
        assert reply.status_code == 200, reply.text
        text = reply.json()["choices"][0]["message"]["content"]
        assert text.strip(), reply.text
        assert not any(mark in text for mark in MARKUP), text
        # The engine was launched with the profile's template (and only gemma names one).
        launched = [
            engine.get("argv", [])
            for path in (tmp_path / "run" / "nodes").rglob("*.json")
            for engine in (json.loads(path.read_text()).get("engines") or {}).values()
        ]
        assert launched, "no engine record with its argv"
        flags = [a[a.index("--chat-template") + 1] for a in launched if "--chat-template" in a]
        assert flags == (["gemma"] if model == "gemma-3-270m" else [])
    finally:
        stopped = grid(env, "test", "stop")
    assert "no process is left" in stopped.stdout
