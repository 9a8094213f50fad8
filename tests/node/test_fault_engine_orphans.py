"""Issue 15, defect 5: a node starting with unreadable engine state finds its own running
children (run folder, command line, birth marker) instead of leaving an untracked llama-server
answering, and the logical fleet's stop never reports "no process is left" while one runs.

Real llama-server children with the real SmolLM2 weights (see engine_fixtures)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from grid.fleet.errors import GridError
from grid.lab.logical_fleet import recorded_children
from grid.node.engines import EngineState
from grid.node.engines.discover import find_own_children
from grid.node.engines.proc import is_alive
from tests.node.engine_fixtures import MODEL, SupervisorFactory, chat
from tests.node.processes import wait_until

pytestmark = pytest.mark.engine


def test_a_child_survives_a_lost_engine_state_and_is_found_again(
    make_supervisor: SupervisorFactory, smollm2: Path, tmp_path: Path
) -> None:
    state_dir = tmp_path / "state"
    first = make_supervisor(state_dir)
    pid = first.warm(MODEL, smollm2).pid
    assert pid is not None
    first.close()
    state_file = state_dir / "engines.json"
    state_file.write_text("{not json", encoding="utf-8")
    # The refusal says an engine of this node still runs (not "move it aside" blindly).
    with pytest.raises(GridError) as refused:
        make_supervisor(state_dir)
    assert refused.value.code == "engine_state_corrupt"
    assert str(pid) in refused.value.message
    # ... and what the stop of a logical fleet sees: the child, provably ours.
    assert recorded_children(state_dir) == [(pid, True)]
    # Following the advice: the file is moved aside; the next start finds the child again.
    state_file.rename(state_dir / "engines.json.corrupt")
    second = make_supervisor(state_dir)
    status = second.status(MODEL)
    assert status is not None and status.pid == pid
    assert (status.state, status.proven) == (EngineState.READY, True)
    assert status.base_url is not None
    assert chat(status.base_url, second.engine_key, MODEL, "Hi").status_code == 200
    assert second.warm(MODEL, smollm2).pid == pid  # joined, never a duplicate
    assert second.stop(MODEL).stopped
    assert wait_until(lambda: not is_alive(pid), timeout_s=10)


def test_a_stranger_with_a_similar_command_line_is_never_ours(tmp_path: Path) -> None:
    run_dir = tmp_path / "engines"
    run_dir.mkdir()
    key = run_dir / "engine.keys"
    argv = [sys.executable, "-c", "import time; time.sleep(60)", "--alias", "m", "--port", "1",
            "-m", "x.gguf", "--api-key-file", str(key)]  # fmt: skip
    elsewhere = subprocess.Popen(argv, cwd=tmp_path)  # right argv, wrong run folder
    other_key = subprocess.Popen([*argv[:-1], str(tmp_path / "k")], cwd=run_dir)  # wrong key
    ours = subprocess.Popen(argv, cwd=run_dir)
    try:
        assert wait_until(lambda: len(find_own_children(run_dir, key)) == 1, timeout_s=10)
        (found,) = find_own_children(run_dir, key)
        assert (found.identity.pid, found.model_id, found.port) == (ours.pid, "m", 1)
    finally:
        for proc in (elsewhere, other_key, ours):
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
