from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.harness import ControllerProcess


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[ControllerProcess]:
    server = ControllerProcess(tmp_path / "ctl")
    server.start()
    try:
        yield server
    finally:
        server.stop()
