"""The snapshot schema ships in the repository and errors point there (issue 14, item 5)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from grid.fleet.schema import render_doc, schema_text

pytestmark = [pytest.mark.unit, pytest.mark.smoke]

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "schemas" / "snapshot.schema.json"
runner = CliRunner()


def test_committed_schema_and_doc_tables_are_current() -> None:
    # Stale after a model change: run scripts/gen_schema.py and commit both files.
    assert SCHEMA.read_text("utf-8") == schema_text()
    doc = (REPO / "docs" / "snapshot.md").read_text("utf-8")
    assert render_doc(doc) == doc
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_schema.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout


def _load(path: Path) -> Any:
    raw = path.read_bytes()
    return tomllib.loads(raw.decode()) if path.suffix == ".toml" else json.loads(raw)


@pytest.mark.parametrize(
    "name", ["fleets/office.json", "fleets/tiny.toml", "fleets/fleet-64.json", "catalog.toml"]
)
def test_shipped_files_satisfy_the_json_schema(name: str) -> None:
    schema = json.loads(SCHEMA.read_text("utf-8"))
    jsonschema.Draft202012Validator(schema).validate(_load(REPO / "models" / name))


def test_the_json_schema_refuses_what_grid_refuses() -> None:
    schema = json.loads(SCHEMA.read_text("utf-8"))
    bad = {"schema_version": 1, "hosts": [{"host_id": "a", "capacty_mb": 5}]}
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(bad))
    assert errors  # capacity_mb missing and capacty_mb unknown


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("doc", "path", "suggestion"),
    [
        (
            {"schema_version": 1, "hosts": [{"host_id": "a", "capacty_mb": 5}]},
            "hosts[0].capacty_mb",
            "hosts[0].capacity_mb",
        ),
        (
            {
                "schema_version": 1,
                "hosts": [{"host_id": "a", "capacity_mb": 5}],
                "models": [{"model_id": "m", "memory_mb": 1, "max_replica": 2}],
            },
            "models[0].max_replica",
            "models[0].max_replicas",
        ),
        (
            {
                "schema_version": 1,
                "hosts": [{"host_id": "a", "capacity_mb": 5}],
                "models": [{"model_id": "m", "memory_mb": 1}],
                "demand": {"m": {"rmp": 3}},
            },
            "demand.m.rmp",
            "demand.m.rpm",
        ),
        (
            {"schema_version": 1, "hosts": [{"host_id": "a", "capacity_mb": 5}], "modles": []},
            "modles",
            "models",
        ),
    ],
)
def test_unknown_field_names_the_closest_and_the_shipped_schema(
    tmp_path: Path, doc: dict[str, Any], path: str, suggestion: str
) -> None:
    result = runner.invoke(app, ["validate", str(_write(tmp_path, doc))])
    assert result.exit_code == 2
    assert f"Error [unknown_field] at {path}:" in result.stderr
    assert f"did you mean `{suggestion}`?" in result.stderr
    assert "docs/snapshot.md" in result.stderr
    assert "DESIGN.md" not in result.stderr and "Traceback" not in result.stderr


def test_unknown_field_far_from_any_name_gets_no_guess(tmp_path: Path) -> None:
    doc = {"schema_version": 1, "hosts": [{"host_id": "a", "capacity_mb": 5, "zzz": 1}]}
    result = runner.invoke(app, ["validate", str(_write(tmp_path, doc))])
    assert result.exit_code == 2
    assert "did you mean" not in result.stderr
    assert "remove `hosts[0].zzz`" in result.stderr


def test_docs_page_names_every_host_and_profile_field() -> None:
    doc = (REPO / "docs" / "snapshot.md").read_text("utf-8")
    schema = json.loads(SCHEMA.read_text("utf-8"))
    for obj in ("Host", "ModelProfile", "Residency", "DemandEntry"):
        for field in schema["$defs"][obj]["properties"]:
            assert f"| `{field}` |" in doc, (obj, field)
