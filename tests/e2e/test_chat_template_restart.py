"""A changed chat template restarts the running engine (issue 25): gemma's GGUF carries no chat
template, so a profile names one; `grid allocator model set --chat-template gemma` on a running
fleet restarts the real llama-server child with the new `--chat-template`, and the router's
answers come back clean (no template markup)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import httpx
import pytest

from grid.cli.demo_personas import answer_problem
from grid.node.agent.config import CatalogEntry
from grid.node.engines import read_argv
from tests.e2e.conftest import NodeFactory
from tests.e2e.fleet_helpers import host_row, wait_for
from tests.service.harness import REPO, ControllerProcess

pytestmark = pytest.mark.engine


def _template(pid: int) -> str:
    argv = read_argv(pid) or ()
    return argv[argv.index("--chat-template") + 1] if "--chat-template" in argv else ""


def _model_set(server: ControllerProcess, model: str, entry: CatalogEntry, template: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_")}
    done = subprocess.run(
        [sys.executable, "-m", "grid", "allocator", "model", "set", model, "--memory-mb", "512",
         "--min-replicas", "1", "--max-replicas", "1", "--artifact-sha256", entry.sha256,
         "--chat-template", template, "--state-dir", str(server.state_dir)],
        capture_output=True, text=True, env=env, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def _ask(server: ControllerProcess, model: str) -> tuple[int, str]:
    body = {"model": model, "max_tokens": 24, "temperature": 0,
            "messages": [{"role": "user", "content": "Name one colour."}]}  # fmt: skip
    reply = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=120, trust_env=False)
    if reply.status_code != 200:
        return reply.status_code, reply.text
    return 200, str(reply.json()["choices"][0]["message"]["content"] or "")


def test_a_changed_chat_template_restarts_the_running_engine(
    controller: ControllerProcess, make_node: NodeFactory, gemma_entry: CatalogEntry
) -> None:
    node = make_node("host-t", [gemma_entry])
    node.start()
    model = gemma_entry.model_id
    _model_set(controller, model, gemma_entry, "chatml")  # the wrong template for gemma
    with controller.admin() as admin:
        admin.set_mode("automatic")
        admin.tick()
        wait_for(
            lambda: (
                (
                    host_row(admin.status(history=0).model_dump(mode="json"), "host-t", model) or {}
                ).get("state")
                == "ready"
            ),
            180,
            f"{model} ready",
        )
    first = node.ready_residency(model)
    assert _template(first["pid"]) == "chatml"

    _model_set(controller, model, gemma_entry, "gemma")

    def restarted() -> dict[str, Any] | None:
        row = node.residency(model)
        ok = row and row["state"] == "ready" and row["pid"] and row["pid"] != first["pid"]
        return row if ok else None

    row = wait_for(restarted, 120, "the engine restarted with the new chat template")
    assert _template(row["pid"]) == "gemma"
    _status, text = wait_for(
        lambda: (answer := _ask(controller, model))[0] == 200 and answer, 60, "an answer"
    )
    assert answer_problem(text) == "", text
