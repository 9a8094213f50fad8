"""The shipped real weights: located, verified by SHA-256 (hashlib here), served by llama.cpp."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from grid.node.artifacts import (
    GEMMA3_270M_MODEL_ID,
    GEMMA3_270M_SHA256,
    SMOLLM2_SHA256,
    gemma3_270m_path,
)
from grid.node.engines import EngineState
from tests.node.engine_fixtures import SupervisorFactory, chat

pytestmark = pytest.mark.engine


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def test_smollm2_file_in_the_package_has_the_pinned_digest(smollm2: Path) -> None:
    assert smollm2.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert _sha256(smollm2) == SMOLLM2_SHA256


def test_gemma_is_assembled_once_verified_and_serves_a_completion(
    tmp_path: Path, make_supervisor: SupervisorFactory
) -> None:
    cache = tmp_path / "weights"
    path = gemma3_270m_path(cache)
    assert _sha256(path) == GEMMA3_270M_SHA256
    assert [p.name for p in cache.iterdir()] == [path.name]  # no staging file left behind
    before = path.stat()
    assert gemma3_270m_path(cache) == path
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not redone

    supervisor = make_supervisor()
    status = supervisor.warm(GEMMA3_270M_MODEL_ID, path)
    assert status.state is EngineState.READY and status.base_url is not None
    response = chat(status.base_url, supervisor.engine_key, GEMMA3_270M_MODEL_ID, "Hello")
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["completion_tokens"] >= 1
    assert supervisor.stop(GEMMA3_270M_MODEL_ID).stopped
