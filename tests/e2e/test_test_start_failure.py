"""`grid test start` with a model llama.cpp cannot load (issue 14, item 1): it stops waiting at
the engine's failure, exits non-zero with the engine's code and reason, and `grid test status`
and `grid test watch` show them. Real controller, node agent and llama-server (`engine`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.grid_process import clean_env, grid
from tests.service.harness import free_port

pytestmark = pytest.mark.engine


def test_an_engine_that_cannot_load_fails_the_start_with_its_reason(
    tmp_path: Path, llama_server: Path
) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOTAGGUF" * (1 << 17))  # no GGUF magic: llama.cpp refuses it
    env = clean_env(tmp_path, GRID_TEST_DIR=str(tmp_path / "run"))
    args = ["--machines", "1", "--model", str(bad), "--memory-mb", "100", "--wait-seconds", "240"]
    ports = ["--port", str(free_port()), "--engine-port-base", "39760"]
    try:
        started = grid(env, "test", "start", *args, *ports)
        assert started.returncode == 2, started.stdout + started.stderr
        assert "is not READY yet" not in started.stdout  # it did not wait out the timeout
        assert "Error [engine_exited]: bad.gguf failed to start: warm bad.gguf@logical-01" in (
            started.stderr
        )
        # The engine's own words (the last error line of its log tail the node kept).
        assert any(w in started.stderr for w in ("invalid magic", "failed to load model"))
        assert "Next: grid test stop" in started.stderr
        assert "logical-01: " in started.stdout  # the node's state was shown while waiting

        status = grid(env, "test", "status")
        assert status.returncode == 0
        assert "mode None" not in status.stdout
        assert "failed: warm bad.gguf@logical-01: engine_exited:" in status.stdout
        assert any(w in status.stdout for w in ("invalid magic", "failed to load model"))

        watch = grid(env, "test", "watch", "--for-seconds", "1")
        assert "warm bad.gguf@logical-01: failed (engine_exited: " in watch.stdout
    finally:
        stopped = grid(env, "test", "stop")
    assert "no process is left" in stopped.stdout
