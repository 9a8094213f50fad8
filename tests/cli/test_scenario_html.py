"""`grid test scenario --html` and `grid test graduate --html`: the report as pictures.

Oracles: the JSON report's own per-workload totals (report.py, computed from the run's stats),
the run's per-minute READY set (metrics.serving) read directly, and hand-made gate results.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from grid.lab.report_html import graduate_html, scenario_html
from grid.lab.scenario import STRATEGIES, ScenarioConfig, document, run_scenario

pytestmark = pytest.mark.unit

CFG = ScenarioConfig(machines=3, models=4, users=20, duration_s=20 * 60, seed=1, strategy="smart")


class Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}))


def _parse(text: str) -> list[tuple[str, dict[str, str]]]:
    parser = Elements()
    parser.feed(text)
    return parser.found


@pytest.fixture(scope="module")
def report() -> tuple[str, dict, object]:
    runs = {name: run_scenario(ScenarioConfig(**{**CFG.__dict__, "strategy": name}))
            for name in STRATEGIES}  # fmt: skip
    docs = {name: document(run) for name, run in runs.items()}
    return scenario_html("smart", docs, runs), docs, runs["smart"]


def test_every_workload_has_its_chart_with_the_reports_totals(report) -> None:
    text, docs, _run = report
    for word, w in docs["smart"]["workloads"].items():
        if w["demand"] <= 0:
            continue
        caption = re.search(
            rf'data-workload="{word}">.*?<figcaption>{word}: served ([0-9.]+)% of ([0-9.]+) units',
            text,
            re.S,
        )
        assert caption is not None, word
        assert float(caption.group(2)) == pytest.approx(w["demand"], abs=0.06)
        assert float(caption.group(1)) / 100 == pytest.approx(w["served_fraction"], abs=0.001)


def test_timeline_bars_cover_exactly_the_ready_minutes(report) -> None:
    text, _docs, run = report
    expected: dict[tuple[str, str], int] = {}
    for minute in run.metrics.serving:
        for pair in minute:
            expected[pair] = expected.get(pair, 0) + 1
    drawn: dict[tuple[str, str], int] = {}
    for tag, attrs in _parse(text):
        if tag == "rect" and "data-from" in attrs:
            key = (attrs["data-host"], attrs["data-model"])
            drawn[key] = drawn.get(key, 0) + int(attrs["data-to"]) - int(attrs["data-from"])
    assert drawn == expected and expected


def test_the_comparison_names_every_strategy_and_nothing_is_fetched(report) -> None:
    text, _docs, _run = report
    rows = {a["data-strategy"] for t, a in _parse(text) if t == "tr" and "data-strategy" in a}
    assert rows == set(STRATEGIES)
    assert "<script" not in text
    assert not re.search(r'(src|href)="https?://', text)


def test_graduate_marks_every_failed_gate() -> None:
    cell = {"served_fraction": 0.5, "score": 50.0, "churn": 2}
    result = {
        "passed": False,
        "cells": [{"machines": 2, "seed": 42, "strategies": {n: cell for n in STRATEGIES}}],
        "gates": [
            {"name": "smart_serves_most", "passed": True, "value": 0.9, "threshold": 0.8,
             "comparison": ">="},
            {"name": "no_safety_violations", "passed": False, "value": 3, "threshold": 0,
             "comparison": "=="},
        ],
    }  # fmt: skip
    text = graduate_html(result)
    rows = {a["data-gate"]: a.get("class", "") for t, a in _parse(text) if "data-gate" in a}
    assert rows == {"smart_serves_most": "", "no_safety_violations": "fail"}
    assert "not graduated: no_safety_violations failed" in text


def test_the_command_writes_the_file_and_the_dashboards_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    last = tmp_path / "last.html"
    monkeypatch.setenv("GRID_SCENARIO_REPORT", str(last))
    out = tmp_path / "out" / "report.html"
    args = ["test", "scenario", "--machines", "2", "--models", "3", "--users", "10",
            "--duration", "10m", "--seed", "3", "--html", str(out)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert out.read_text() == last.read_text() and "Residencies per machine" in out.read_text()
    assert f"Wrote {out}" in result.output
