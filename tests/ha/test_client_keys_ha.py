"""Client keys of /v1 follow the controller's store: on a real three-member etcd cluster, a key
the leader issued is accepted by the standbys and, after the leader is SIGKILLed, by the new
leader; a revocation on the new leader reaches the others (grid/api/client_keys.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from grid.api.auth import new_secret
from grid.api.settings import write_settings
from tests.e2e.fleet_helpers import wait_for
from tests.ha.harness import HA_CONTROLLER, HAControllerProcess, leader_of

pytestmark = pytest.mark.service
TTL = float(HA_CONTROLLER["lease_ttl_s"])  # type: ignore[arg-type]


@pytest.fixture
def keyed_trio(tmp_path: Path, store_url: str) -> Iterator[list[HAControllerProcess]]:
    """Three controllers on one store, /v1 closed to requests without a client key."""
    shared = (new_secret(), new_secret())
    made = [HAControllerProcess(tmp_path / f"ctl{i}", store_url, shared) for i in range(3)]
    for ctl in made:
        ctl.settings = replace(ctl.settings, open_access=False)
        write_settings(ctl.state_dir, ctl.settings)
    threads = [threading.Thread(target=ctl.start, args=(60.0,)) for ctl in made]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        yield made
    finally:
        for ctl in made:
            ctl.stop()


def models(ctl: HAControllerProcess, key: str) -> int:
    """The status of GET /v1/models with `key` (0 when the controller does not answer)."""
    try:
        reply = httpx.get(
            f"{ctl.url}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=3.0
        )
    except httpx.HTTPError:
        return 0
    return reply.status_code


def test_a_key_issued_by_the_leader_works_on_the_next_leader(
    keyed_trio: list[HAControllerProcess],
) -> None:
    leader = leader_of(keyed_trio)
    operator = {"X-Grid-Allocator-Token": leader.settings.operator_token}
    made = httpx.post(f"{leader.url}/allocator/keys", json={"name": "team-a"}, headers=operator)
    assert made.status_code == 201, made.text
    key = made.json()["key"]
    assert models(leader, key) == 200
    assert models(leader, "gk1_" + "x" * 43) == 401
    standbys = [c for c in keyed_trio if c is not leader]
    for standby in standbys:  # they follow the state the leader wrote to etcd
        wait_for(lambda s=standby: models(s, key) == 200, 10, "a standby to accept the key")  # type: ignore[misc]
        assert models(standby, "gk1_" + "x" * 43) == 401
    # Nothing of the key is left on the leader's disk: it lives in etcd.
    assert not (leader.state_dir / "client_keys.json").exists()

    leader.kill()
    successor = leader_of(standbys, timeout_s=TTL + 5)
    assert models(successor, key) == 200
    listed = httpx.get(f"{successor.url}/allocator/keys", headers=operator).json()
    assert [r["name"] for r in listed["keys"]] == ["team-a"] and key not in str(listed)

    revoked = httpx.delete(f"{successor.url}/allocator/keys/team-a", headers=operator)
    assert revoked.status_code == 200, revoked.text
    assert models(successor, key) == 401
    other = next(c for c in standbys if c is not successor)
    wait_for(lambda: models(other, key) == 401, 10, "the standby to follow the revocation")
