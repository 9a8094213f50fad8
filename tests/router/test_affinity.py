from __future__ import annotations

import pytest

from grid.fleet.errors import GridError
from grid.router import hash_affinity_key, rendezvous_order

pytestmark = pytest.mark.unit


def test_key_is_hashed_and_the_raw_value_is_not_kept() -> None:
    key = hash_affinity_key("user-42/session-9")
    assert key is not None
    assert "session-9" not in key.digest and "session-9" not in repr(key)
    assert key == hash_affinity_key("user-42/session-9")
    assert key != hash_affinity_key("user-42/session-10")


@pytest.mark.parametrize("raw", ["x" * 257, "é" * 129, "line\nbreak", "tab\tkey", "\x00"])
def test_bad_keys_are_refused_with_a_stable_code(raw: str) -> None:
    with pytest.raises(GridError) as err:
        hash_affinity_key(raw)
    assert err.value.code == "invalid_affinity_key"
    assert raw not in err.value.message


def test_limits_are_in_utf8_bytes() -> None:
    assert hash_affinity_key("x" * 256) is not None
    assert hash_affinity_key("é" * 128) is not None  # 256 bytes
    assert hash_affinity_key(None) is None and hash_affinity_key("") is None


def test_rendezvous_moves_only_the_sessions_of_a_removed_engine() -> None:
    engines = [f"e{i}" for i in range(5)]
    keys = [hash_affinity_key(f"s{n}") for n in range(200)]
    before = {k: rendezvous_order(k, engines)[0] for k in keys if k}
    survivors = [e for e in engines if e != "e2"]
    after = {k: rendezvous_order(k, survivors)[0] for k in before}
    moved = [k for k in before if before[k] != after[k]]
    assert moved and all(before[k] == "e2" for k in moved)
