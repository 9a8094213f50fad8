"""Issue 15, defect 7 (controller side): a deeply nested state file is quarantined at start
instead of crashing the controller."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grid.api.settings import STATE_NAME
from grid.runtime.controller.store import StateStore
from tests.service.harness import ControllerProcess

pytestmark = pytest.mark.service


def _nested(depth: int) -> str:
    return '{"mode": ' + '{"a": [' * depth + "1" + "]}" * depth + "}"


@pytest.mark.parametrize("depth", [200, 100_000])
def test_a_deeply_nested_state_document_is_quarantined_by_the_store(
    tmp_path: Path, depth: int
) -> None:
    path = tmp_path / STATE_NAME
    path.write_text(_nested(depth), encoding="utf-8")
    loaded = StateStore(path).load()
    assert loaded.document is None
    assert loaded.warning_code == "state_quarantined"
    assert not path.exists()
    assert (tmp_path / f"{STATE_NAME}.corrupt-1").read_text(encoding="utf-8") == _nested(depth)


def test_the_controller_starts_past_a_deeply_nested_state_file(tmp_path: Path) -> None:
    server = ControllerProcess(tmp_path / "ctl")
    (server.state_dir / STATE_NAME).write_text(_nested(100_000), encoding="utf-8")
    server.start()
    try:
        with server.public() as public:
            doc = public.status().model_dump(mode="json")
        codes = json.dumps(doc)
        assert "state_quarantined" in codes
        assert doc["mode"] == "recommend"
    finally:
        server.stop()
    assert (server.state_dir / f"{STATE_NAME}.corrupt-1").exists()
