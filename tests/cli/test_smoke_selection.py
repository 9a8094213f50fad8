"""The smoke selection (issue 14, item 14): registered, every listed file exists, and it
selects a cross-section of unit tests and nothing slow."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import NEVER_SMOKE, SMOKE_FILES

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
COLLECT = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m"]


def _collected(marker: str) -> list[str]:
    """The test ids `pytest --collect-only -m MARKER` lists for the repository."""
    done = subprocess.run(
        [*COLLECT, marker],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_smoke_is_a_registered_marker_and_its_files_exist() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    markers = pyproject["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith("smoke:") for m in markers)
    for name in SMOKE_FILES:
        assert (REPO / name).is_file(), name
    assert "scripts/test.sh -m smoke" in (REPO / "README.md").read_text()


@pytest.mark.service
def test_the_selection_spans_the_layers_and_skips_slow_kinds() -> None:
    ids = _collected("smoke")
    assert len(ids) > 300
    layers = {re.match(r"tests/([a-z_]+)/", i).group(1) for i in ids if i.startswith("tests/")}
    assert {"fleet", "cli", "planner", "runtime", "router", "node", "demand"} <= layers
    listed = _collected("smoke and (" + " or ".join(NEVER_SMOKE) + ")")
    # Only tests that mark themselves smoke may be of a slow kind; none from the listed files.
    assert not [line for line in listed if line.split("::")[0] in SMOKE_FILES]
