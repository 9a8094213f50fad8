"""Issue 15, defect 7 (node side): a corrupt engine state file never echoes its engine key into
the agent's log (the daemon's stderr) or into a refusal the CLI prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grid.fleet.errors import GridError
from grid.node.agent.config import NodeConfig, save_config
from grid.node.agent.main import main
from grid.node.engines.state import EngineStateStore

pytestmark = pytest.mark.unit

KEY = "SeCrEtEnGiNeKeY-0123456789abcdef"
CORRUPT = [
    {"schema_version": 1, "engine_key": KEY[:10]},  # too short: the value is the input
    {"schema_version": 1, "engine_key": KEY, "engines": {"m": {"pid": "x"}}},
    {"schema_version": 1, "engine_key": KEY, "surprise": True},
    {"schema_version": 1, "engine_key": [KEY], "engines": []},
    [{"engine_key": KEY}],
]


def _texts(err: GridError) -> str:
    return " ".join([err.message, err.fix, err.next_command or "", json.dumps(err.details)])


@pytest.mark.parametrize("document", CORRUPT)
def test_a_corrupt_engine_state_refusal_never_carries_the_key(
    tmp_path: Path, document: object
) -> None:
    (tmp_path / "engines.json").write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(GridError) as refusal:
        EngineStateStore(tmp_path).read()
    assert refusal.value.code == "engine_state_corrupt"
    assert KEY[:10] not in _texts(refusal.value)
    assert "engine_key" in refusal.value.message or "engines.json" in refusal.value.message
    if refusal.value.__cause__ is not None:
        assert KEY[:10] not in str(refusal.value.__cause__)


def test_the_daemon_log_never_carries_a_corrupt_engine_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "node.token"
    token.write_text("gan1.x.y\nreply-key k\n", encoding="utf-8")
    save_config(
        tmp_path,
        NodeConfig(host_id="h1", grid_url="http://127.0.0.1:1", token_file=str(token)),
    )
    engines = tmp_path / "engines"
    engines.mkdir()
    (engines / "engines.json").write_text(json.dumps(CORRUPT[0]), encoding="utf-8")
    assert main(["--state-dir", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert "engine_state_corrupt" in captured.err
    assert KEY[:10] not in captured.err + captured.out
