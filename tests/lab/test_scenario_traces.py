"""`--workload-trace` validation through the CLI (exit 2, the row number, no traceback) and the
mapping of the two real Azure traces onto a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from grid.lab.scenario import map_curve, parse_rows

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO.parent / "shared" / "data" / "traces"
BASE = ["test", "scenario", "--machines", "2", "--models", "3", "--users", "4", "--duration", "3m"]


def _run(*extra: str) -> object:
    return CliRunner().invoke(app, [*BASE, *extra])


def _bad(tmp_path: Path, text: str) -> tuple[int, str]:
    path = tmp_path / "t.csv"
    path.write_text(text)
    result = _run("--workload-trace", f"coding={path}", "--json")
    return result.exit_code, result.stderr  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "row", "words"),
    [
        ("0,1\n10,2\n10,3\n", 3, "strictly increase"),
        ("0,1\n5,2\n3,1\n", 3, "strictly increase"),
        ("0,1\n10,-2\n", 2, ">= 0"),
        ("0,1\n10,nan\n", 2, "finite"),
        ("0,1\n10,inf\n", 2, "finite"),
        ("0,1\nten,2\n", 2, "not two numbers"),
        ("0,1\n10\n", 2, "fewer than two columns"),
    ],
)
def test_invalid_rows_exit_2_with_the_row_number(
    tmp_path: Path, text: str, row: int, words: str
) -> None:
    code, err = _bad(tmp_path, text)
    assert code == 2, err
    assert "invalid_workload_trace" in err
    assert f"row {row}" in err and words in err
    assert "To fix:" in err and "Traceback" not in err


def test_row_and_size_limits(tmp_path: Path) -> None:
    code, err = _bad(tmp_path, "".join(f"{i},1\n" for i in range(100_001)))
    assert code == 2 and "100000 rows (row 100001)" in err
    big = tmp_path / "big.csv"
    big.write_text("0,1," + "x" * (5 * 1024 * 1024) + "\n")
    result = _run("--workload-trace", f"coding={big}")
    assert result.exit_code == 2 and "5 MiB" in result.stderr  # type: ignore[attr-defined]
    empty = tmp_path / "empty.csv"
    empty.write_text("\n")
    result = _run("--workload-trace", f"coding={empty}")
    assert result.exit_code == 2 and "no rows" in result.stderr  # type: ignore[attr-defined]


def test_bad_option_and_unknown_workload(tmp_path: Path) -> None:
    path = tmp_path / "ok.csv"
    path.write_text("0,1\n")
    for option, words in ((f"{path}", "WORKLOAD=CSV"), (f"cooking={path}", "cooking")):
        result = _run("--workload-trace", option)
        assert result.exit_code == 2 and words in result.stderr  # type: ignore[attr-defined]
    missing = _run("--workload-trace", f"coding={tmp_path / 'nope.csv'}")
    assert missing.exit_code == 2 and "cannot read" in missing.stderr  # type: ignore[attr-defined]


def test_mapping_is_mean_normalised_to_the_builtin_curve() -> None:
    rows = parse_rows("0,0\n100,2\n200,0\n")  # a triangle
    builtin = [1.0, 2.0, 3.0, 2.0]
    curve = map_curve(rows, 4, builtin)
    assert sum(curve) / 4 == pytest.approx(2.0)  # the built-in mean
    # Minutes sample the triangle at 12.5, 37.5, 62.5, 87.5 % of its span: 0.25, 0.75, 0.75,
    # 0.25 × 2, i.e. shape 1:3:3:1, scaled to mean 2 -> 1, 3, 3, 1.
    assert curve == pytest.approx([1.0, 3.0, 3.0, 1.0])


@pytest.mark.skipif(not TRACES.is_dir(), reason="../shared/data/traces/ is not on this machine")
def test_real_azure_traces_drive_a_run() -> None:
    code, conv = TRACES / "azure-llm-2023-code.csv", TRACES / "azure-llm-2023-conv.csv"
    plain = _run("--seed", "3", "--json")
    traced = _run(
        "--seed",
        "3",
        "--json",
        "--workload-trace",
        f"coding={code}",
        "--workload-trace",
        f"general={conv}",
    )
    assert plain.exit_code == 0 and traced.exit_code == 0, traced.output
    a, b = json.loads(plain.stdout), json.loads(traced.stdout)
    assert a["demand_trace_sha256"] != b["demand_trace_sha256"]  # burst timing changed
    assert b["summary"]["requests"] > 0


@pytest.mark.parametrize(
    ("option", "code"),
    [
        (["--strategy", "clever"], "unknown_strategy"),
        (["--duration", "soon"], "invalid_duration"),
        (["--duration", "30s"], "invalid_duration"),
    ],
)
def test_bad_arguments_are_refused_with_a_code(option: list[str], code: str) -> None:
    result = _run(*option)
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert code in result.stderr and "To fix:" in result.stderr  # type: ignore[attr-defined]


def test_timeline_prints_the_workday_events_and_actions() -> None:
    result = CliRunner().invoke(
        app,
        [
            "test",
            "scenario",
            "--machines",
            "2",
            "--models",
            "4",
            "--users",
            "6",
            "--duration",
            "20m",
            "--timeline",
        ],
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "outage: " not in out  # events are printed as kind:host
    assert "events: throttle:mac-01" in out and "events: outage:gpu-01" in out
    assert "actions: warm:" in out  # something was started
    assert "safety violations 0" in out


def test_graduate_json_has_the_contract_keys() -> None:
    result = CliRunner().invoke(
        app,
        [
            "test",
            "graduate",
            "--machines",
            "1,2",
            "--seeds",
            "3",
            "--duration",
            "5m",
            "--users",
            "4",
            "--models",
            "3",
            "--json",
        ],
    )
    assert result.exit_code in (0, 1), result.output  # 1: a gate failed (still one document)
    doc = json.loads(result.stdout)
    assert set(doc) >= {"passed", "gates", "cells"}
    assert doc["passed"] == (result.exit_code == 0)
    assert all(set(g) >= {"name", "passed", "value", "threshold"} for g in doc["gates"])
    assert [(c["machines"], c["seed"]) for c in doc["cells"]] == [(1, 3), (2, 3)]
    bad = CliRunner().invoke(app, ["test", "graduate", "--machines", "2,x"])
    assert bad.exit_code == 2 and "invalid_list" in bad.stderr
