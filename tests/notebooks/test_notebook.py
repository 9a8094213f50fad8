"""The what-if notebook runs top to bottom without an error cell and saves its figures.

It is executed with nbclient on the venv's `python3` kernel (ipykernel), from a directory
outside the checkout, so the notebook has to find the repository root on its own.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.service

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "capacity_whatif.ipynb"
FIGURES = {
    "memory_office.png",
    "memory_fleet-64.png",
    "drill.png",
    "demand_growth.png",
    "capacity_gpu_server.png",
}


def _execute(nb: nbformat.NotebookNode, cwd: Path) -> list[str]:
    """Run every cell (errors collected, not raised) and list the error cells."""
    client = NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        allow_errors=True,  # collect every error cell instead of stopping at the first
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    return [
        f"cell {i}: {out.get('ename')}: {out.get('evalue')}"
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]


def test_an_error_cell_is_reported(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell("1 / 0")]
    assert _execute(nb, tmp_path) == ["cell 1: ZeroDivisionError: division by zero"]


def test_notebook_executes_without_error_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = tmp_path / "figures"
    monkeypatch.setenv("GRID_FIGURES_DIR", str(figures))
    monkeypatch.delenv("GRID_REPO_ROOT", raising=False)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert _execute(nb, tmp_path) == []
    produced = {p.name for p in figures.glob("*.png")}
    assert produced == FIGURES
    for name in FIGURES:
        assert (figures / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = "".join(
        out.get("text", "")
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream"
    )
    # One sentence of reading per figure and fleet, and the capacity answers themselves.
    assert text.count("Reading (office)") == 4 and text.count("Reading (fleet-64)") == 4
    assert "'added': {'gpu-server':" in text
    # The flat curves explained from the plans (issue 25): hand-read from the fleet files, the
    # replicas no current host takes are the comfyui image/video models, each already at its
    # max_replicas at 1x, so the unmet curve and the GPU-server answer stay flat.
    flat = {
        line.split(": ", 1)[0]: line for line in text.splitlines() if line.startswith("Why flat (")
    }
    assert set(flat) == {
        "Why flat (office)",
        "Why flat (fleet-64)",
        "Why flat (office, GPU servers)",
        "Why flat (fleet-64, GPU servers)",
    }
    for name, stuck in {
        "office": ["image-sdxl", "video-wan"],
        "fleet-64": ["video-006", "video-012", "video-021"],
    }.items():
        reading = flat[f"Why flat ({name})"]
        assert "unmet curve is flat" in reading and "already wants its `max_replicas`" in reading
        assert all(m in reading for m in stuck), reading
        assert "count stays" in flat[f"Why flat ({name}, GPU servers)"]
