"""Fixtures for tests with real llama-server children and the real SmolLM2 weights."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from grid.fleet.errors import GridError
from grid.node.artifacts import SMOLLM2_MODEL_ID, smollm2_path
from grid.node.engines import LlamaCppConfig, LlamaCppSupervisor
from grid.node.engines.binary import llama_server_binary
from grid.node.engines.proc import is_alive, read_argv
from grid.node.engines.state import EngineStateStore
from tests.node.processes import process_gone, wait_until

MODEL = SMOLLM2_MODEL_ID
ENGINE_PORTS = (39600, 39699)

SupervisorFactory = Callable[..., LlamaCppSupervisor]


@pytest.fixture(scope="session")
def llama_server() -> Path:
    try:
        return llama_server_binary()
    except GridError as exc:
        if os.environ.get("CI"):
            raise  # CI installs the engine: a missing binary is a failure there, not a skip
        pytest.skip(f"{exc.message} {exc.fix}")


@pytest.fixture(scope="session")
def smollm2() -> Path:
    try:
        return smollm2_path()
    except GridError as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"{exc.message} {exc.fix}")


def kill_recorded_children(state_dir: Path) -> None:
    """Teardown: SIGKILL every recorded child that is still the exact recorded process."""
    if not (state_dir / "engines.json").exists():
        return
    with contextlib.suppress(GridError):
        doc = EngineStateStore(state_dir).load_or_init()
        for record in doc.engines.values():
            if is_alive(record.pid) and read_argv(record.pid) == tuple(record.argv):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(record.pid, signal.SIGKILL)
                wait_until(functools.partial(process_gone, record.pid), timeout_s=10)


@pytest.fixture
def make_supervisor(tmp_path: Path, llama_server: Path) -> Iterator[SupervisorFactory]:
    created: list[LlamaCppSupervisor] = []
    state_dirs: set[Path] = set()

    def make(state_dir: Path | None = None, **overrides: Any) -> LlamaCppSupervisor:
        folder = state_dir or tmp_path / "state"
        settings: dict[str, Any] = {
            "binary": llama_server,
            "port_range": ENGINE_PORTS,
            "ready_timeout_s": 90.0,
            "stop_grace_s": 10.0,
        }
        settings.update(overrides)
        store = settings.pop("store", None)
        supervisor = LlamaCppSupervisor(LlamaCppConfig(state_dir=folder, **settings), store=store)
        created.append(supervisor)
        state_dirs.add(folder.absolute())
        return supervisor

    try:
        yield make
    finally:
        for folder in state_dirs:
            kill_recorded_children(folder)
        for supervisor in created:
            supervisor.close()


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def chat(base_url: str, key: str, model: str, prompt: str, max_tokens: int = 8) -> httpx.Response:
    return httpx.post(
        f"{base_url}/v1/chat/completions",
        headers=bearer(key),
        json={
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0,
        },
        timeout=60,
        trust_env=False,
    )
