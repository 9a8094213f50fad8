"""The controller's owner-only config file: load, create, and moving the port."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from grid.api.settings import Settings, load_or_create_settings, load_settings, write_settings
from grid.fleet.errors import GridError

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


@pytest.mark.parametrize(
    ("spoil", "code", "words"),
    [
        ({"tls_cert": "/c.pem"}, "invalid_controller_config", "tls_cert without tls_key"),
        ({"tls_key": "/k.pem"}, "invalid_controller_config", "tls_cert without tls_key"),
        ({"ca_file": 7}, "invalid_controller_config", "non-text path"),
        ({"store": ["etcd://a"]}, "invalid_controller_config", "store or etcd file"),
        ({"etcd_ca_file": 1}, "invalid_controller_config", "store or etcd file"),
        ({"port": 70000}, "invalid_controller_config", "invalid host or port"),
        ({"operator_token": ""}, "invalid_controller_config", "lacks operator_token"),
        ({"breaker": [1]}, "invalid_breaker_config", "`breaker` must be an object"),
    ],
)
def test_a_spoilt_config_field_is_refused_with_its_code(
    tmp_path: Path, spoil: dict[str, object], code: str, words: str
) -> None:
    write_settings(tmp_path, Settings(operator_token="t", node_signing_key="k"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **spoil}))
    with pytest.raises(GridError) as refused:
        load_settings(tmp_path)
    assert refused.value.code == code and words in refused.value.message


def test_a_config_with_both_tls_files_and_a_store_loads(tmp_path: Path) -> None:
    write_settings(tmp_path, Settings(operator_token="t", node_signing_key="k"))
    path = tmp_path / "config.json"
    extra = {"tls_cert": "/c.pem", "tls_key": "/k.pem", "store": "etcd://127.0.0.1:2379"}
    path.write_text(json.dumps({**json.loads(path.read_text()), **extra}))
    loaded = load_settings(tmp_path)
    assert (loaded.tls_cert, loaded.tls_key, loaded.store) == ("/c.pem", "/k.pem", extra["store"])
