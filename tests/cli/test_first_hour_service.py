"""The first hour against a real controller (`grid up` on loopback): the operator credential,
declarative profiles, hints that keep the state folder (issue 14, items 2, 4, 7)."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from tests.cli.grid_process import clean_env, grid
from tests.service.harness import free_port

pytestmark = pytest.mark.service

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "models" / "catalog.toml"
runner = CliRunner()


@pytest.fixture(scope="module")
def controller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    home = tmp_path_factory.mktemp("home")
    state = tmp_path_factory.mktemp("ctl") / "allocator"
    port = free_port()
    up = grid(clean_env(home), "up", "--state-dir", str(state), "--port", str(port))
    assert up.returncode == 0, up.stderr
    try:
        yield {"home": home, "state": state, "url": f"http://127.0.0.1:{port}", "up": up.stdout}
    finally:
        grid(clean_env(home), "down", "--state-dir", str(state))


def _cli(ctl: dict[str, Any], args: list[str], **env: str) -> Any:
    clean = {k: None for k in os.environ if k.startswith("GRID_")}
    return runner.invoke(
        app, args, env={**clean, "HOME": str(ctl["home"]), "COLUMNS": "200", **env}
    )


# ----------------------------------------------------------------------------- item 4


def test_missing_operator_token_names_the_credential_and_where_it_was_looked_for(
    controller: dict[str, Any],
) -> None:
    result = _cli(controller, ["allocator", "tick", "--grid", controller["url"]])
    assert result.exit_code == 2
    err = result.stderr
    assert "Error [no_operator_token]" in err and "no_controller_config" not in err
    assert "operator capability" in err and controller["url"] in err
    default_config = controller["home"] / ".grid" / "allocator" / "config.json"
    for place in ("--token-file (not given)", "$GRID_ALLOCATOR_CONTROL_TOKEN (not set)"):
        assert place in err
    assert f"{default_config} (no such file)" in err
    assert "Next: grid allocator tick --grid " in err and "--token-file" in err


def test_the_token_from_each_documented_place_works(controller: dict[str, Any]) -> None:
    config = controller["state"] / "config.json"
    by_file = _cli(
        controller, ["allocator", "tick", "--grid", controller["url"], "--token-file", str(config)]
    )
    assert by_file.exit_code == 0 and by_file.stdout.startswith("Tick ok"), by_file.output
    token = json.loads(config.read_text())["operator_token"]
    by_env = _cli(
        controller,
        ["allocator", "tick", "--grid", controller["url"]],
        GRID_ALLOCATOR_CONTROL_TOKEN=token,
    )
    assert by_env.exit_code == 0 and token not in by_env.output
    by_state = _cli(controller, ["allocator", "tick", "--state-dir", str(controller["state"])])
    assert by_state.exit_code == 0


# ----------------------------------------------------------------------------- item 2


def test_hints_keep_the_state_folder(controller: dict[str, Any]) -> None:
    state = controller["state"]
    assert f"Next: grid allocator status --state-dir {state}" in controller["up"]
    result = _cli(
        controller,
        ["allocator", "model", "set", "hint-model", "--memory-mb", "64", "--state-dir", str(state)],
    )
    assert result.exit_code == 0, result.output
    assert f"grid allocator tick --state-dir {state}" in result.stdout
    assert f"grid allocator status --state-dir {state}" in result.stdout
    _cli(controller, ["allocator", "model", "remove", "hint-model", "--state-dir", str(state)])


# ----------------------------------------------------------------------------- item 7


def _profiles(ctl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    listed = _cli(ctl, ["allocator", "model", "list", "--state-dir", str(ctl["state"]), "--json"])
    assert listed.exit_code == 0, listed.output
    return {p["model_id"]: p for p in json.loads(listed.stdout)["profiles"]}


def _apply(ctl: dict[str, Any], path: Path, *extra: str) -> Any:
    args = ["allocator", "apply", str(path), "--state-dir", str(ctl["state"]), *extra]
    return _cli(ctl, args)


def test_apply_catalog_is_declarative_and_shows_what_changes(
    controller: dict[str, Any], tmp_path: Path
) -> None:
    wanted = tomllib.loads(CATALOG.read_text())["models"]
    before = set(_profiles(controller))
    dry = _apply(controller, CATALOG, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    changes = {c["model_id"]: c["change"] for c in json.loads(dry.stdout)["changes"]}
    assert all(changes[m["model_id"]] == "new" for m in wanted)
    assert set(_profiles(controller)) == before  # a dry run sends nothing

    applied = _apply(controller, CATALOG)
    assert applied.exit_code == 0, applied.output
    assert f"Applied {len(wanted)} changes." in applied.stdout
    saved = _profiles(controller)
    for entry in wanted:  # every field the file sets is what the controller holds
        for key, value in entry.items():
            assert saved[entry["model_id"]][key] == value, (entry["model_id"], key)

    again = _apply(controller, CATALOG)
    assert "Applied 0 changes." in again.stdout and "unchanged" in again.stdout

    edited = [dict(m) for m in wanted if m["model_id"] != "video-wan"]
    smol = next(m for m in edited if m["model_id"] == "smollm2-135m")
    smol["memory_mb"] = 200
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"schema_version": 1, "models": edited}))
    plan = _apply(controller, path, "--dry-run")
    assert plan.exit_code == 0
    assert "memory_mb: 180 -> 200" in plan.stdout
    assert "not in the file: kept" in plan.stdout  # video-wan
    assert "Dry run: 1 change would be applied; nothing was sent." in plan.stdout
    pruned = _apply(controller, path, "--prune", "--json")
    doc = json.loads(pruned.stdout)
    rows = {c["model_id"]: c["change"] for c in doc["changes"]}
    assert rows["smollm2-135m"] == "changed" and rows["video-wan"] == "retire"
    assert doc["applied"] == 2
    after = _profiles(controller)
    assert "video-wan" not in after and after["smollm2-135m"]["memory_mb"] == 200


def test_apply_refuses_a_bad_catalog_with_the_field_path(
    controller: dict[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        'schema_version = 1\n[[models]]\nmodel_id = "x"\nmemory_mb = 10\nmax_replica = 2\n'
    )
    result = _apply(controller, path, "--dry-run")
    assert result.exit_code == 2
    assert "Error [unknown_field] at models[0].max_replica" in result.stderr
    assert "did you mean `models[0].max_replicas`?" in result.stderr


def test_model_list_is_a_table_with_planned_and_ready(controller: dict[str, Any]) -> None:
    _apply(controller, CATALOG)
    result = _cli(
        controller, ["allocator", "model", "list", "--state-dir", str(controller["state"])]
    )
    assert result.exit_code == 0
    head = result.stdout.splitlines()[0]
    assert head.startswith("Model profiles (")
    for column in ("model", "memory MB", "replicas", "placement", "planned", "ready"):
        assert column in result.stdout
    assert "gemma-3-270m" in result.stdout and "370" in result.stdout


# ----------------------------------------------------------------------------- item 12


def test_status_of_a_fleet_without_hosts_prints_no_empty_box(controller: dict[str, Any]) -> None:
    result = _cli(controller, ["allocator", "status", "--state-dir", str(controller["state"])])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Hosts: none registered yet. Next: grid allocator node start" in out
    assert "┃ host" not in out  # no empty Hosts table
    assert "assignment(s)" not in out and "mode None" not in out


def test_status_shows_deferrals_as_retry_in_and_failures_as_local_time(
    controller: dict[str, Any],
) -> None:
    from rich.console import Console

    from grid.cli.allocator_cmd import render_status
    from grid.fleet.operator import AllocatorStatus, DesiredReason

    listed = _cli(
        controller, ["allocator", "status", "--json", "--state-dir", str(controller["state"])]
    )
    doc = json.loads(listed.stdout)
    now = doc["now"]
    doc["reconciliation"] = {
        **(doc.get("reconciliation") or {}),
        "deferred": [
            {
                "kind": "load",
                "host_id": "h1",
                "model_id": "m1",
                "code": "retry_backoff",
                "message": "the last load failed",
                "retry_at": now + 10,
            }
        ],
    }
    doc["history"] = [
        {
            "action_id": "load-1",
            "kind": "load",
            "host_id": "h1",
            "model_id": "m1",
            "status": "failed",
            "finished_at": now - 12,
            "outcome": "engine_exited: boom",
        }
    ]
    console = Console(width=200, record=True, highlight=False)
    reasons = {m: DesiredReason(**r) for m, r in doc.pop("desired_reasons").items()}
    console.print(render_status(AllocatorStatus.model_validate(doc), reasons))
    text = console.export_text()
    assert "retry_backoff" in text and "in 10 s" in text
    assert "(12 s ago)" in text and "engine_exited: boom" in text
    assert str(int(now)) not in text  # no raw Unix time
