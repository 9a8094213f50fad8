"""The chaos suite's fleet: one controller, three node agents with real llama.cpp children
(`tests/chaos/fleet.py`), ended whatever the test did."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grid.node.agent.config import CatalogEntry
from tests.chaos.fleet import ChaosFleet
from tests.e2e.conftest import llama_server, smollm2_entry  # noqa: F401 (fixtures)


@pytest.fixture
def fleet(
    tmp_path: Path,
    llama_server: Path,  # noqa: F811
    smollm2_entry: CatalogEntry,  # noqa: F811
) -> Iterator[ChaosFleet]:
    made = ChaosFleet(tmp_path, llama_server, smollm2_entry)
    try:
        yield made
    finally:
        made.cleanup()
