"""The repository's docs and `--help` stand on their own: DESIGN.md is not in the repository,
so no page or help text may send a reader to it; the getting-started page covers the path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_help_everywhere import _commands

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def test_no_doc_page_cites_a_file_outside_the_repository() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    citing = [p.name for p in pages if "DESIGN.md" in p.read_text(encoding="utf-8")]
    assert citing == []


def test_no_help_text_cites_design_md() -> None:
    citing = []
    for path, command in _commands():
        texts = [command.help or "", command.short_help or ""]
        texts += [getattr(p, "help", "") or "" for p in command.params]
        if any("DESIGN.md" in t for t in texts):
            citing.append(" ".join(path))
    assert citing == []


def test_getting_started_covers_controller_nodes_models_and_clients() -> None:
    text = (REPO / "docs" / "getting-started.md").read_text(encoding="utf-8")
    for step in ("grid up", "grid allocator enroll", "grid allocator join",
                 "grid allocator model set", "grid allocator mode automatic", "grid chat",
                 "/ui"):  # fmt: skip
        assert step in text, step
    assert "getting-started.md" in (REPO / "README.md").read_text(encoding="utf-8")
