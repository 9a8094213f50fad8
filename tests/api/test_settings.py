"""The controller's owner-only config file: load, create, and moving the port."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from grid.api.settings import Settings, load_or_create_settings, load_settings, write_settings

pytestmark = pytest.mark.unit


def test_a_new_port_keeps_the_secrets_host_instance_and_controller_tuning(tmp_path: Path) -> None:
    tuned = Settings(
        operator_token="operator-secret",
        node_signing_key="signing-secret",
        host="127.0.0.2",
        port=22101,
        instance="abc123",
        controller={"engine": "cpsat", "demand": {"bucket_s": 1.0}},
    )
    write_settings(tmp_path, tuned)

    moved = load_or_create_settings(tmp_path, port=23000)

    assert moved.port == 23000
    assert (moved.operator_token, moved.node_signing_key) == ("operator-secret", "signing-secret")
    assert (moved.host, moved.instance) == ("127.0.0.2", "abc123")
    assert moved.controller == {"engine": "cpsat", "demand": {"bucket_s": 1.0}}
    assert load_settings(tmp_path) == moved  # what the server will read at startup


def test_the_same_or_no_port_leaves_the_file_untouched(tmp_path: Path) -> None:
    first = load_or_create_settings(tmp_path, port=24000)
    before = (tmp_path / "config.json").stat().st_mtime_ns
    assert load_or_create_settings(tmp_path) == first
    assert load_or_create_settings(tmp_path, port=24000) == first
    assert (tmp_path / "config.json").stat().st_mtime_ns == before


def test_a_fresh_config_has_new_owner_only_secrets(tmp_path: Path) -> None:
    one = load_or_create_settings(tmp_path / "one")
    two = load_or_create_settings(tmp_path / "two")
    assert one.operator_token != two.operator_token and one.instance != two.instance
    assert one.controller == {}
    mode = stat.S_IMODE((tmp_path / "one" / "config.json").stat().st_mode)
    assert mode == 0o600
