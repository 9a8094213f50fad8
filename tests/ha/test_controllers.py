"""Several real controller processes on a real three-member etcd cluster: one leads, standbys
redirect mutations and follow the state; SIGKILL and SIGSTOP of the leader; the loss of one
etcd member and of the quorum (DESIGN.md "High availability")."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.fleet_helpers import wait_for
from tests.ha.cluster import EtcdCluster
from tests.ha.harness import HA_CONTROLLER, HAControllerProcess, leader_of, start_controllers

pytestmark = pytest.mark.service
TTL = float(HA_CONTROLLER["lease_ttl_s"])  # type: ignore[arg-type]
PROFILE = {"memory_mb": 200, "runtimes": ["llama.cpp"], "min_replicas": 0}


@pytest.fixture
def trio(tmp_path: Path, store_url: str) -> Iterator[list[HAControllerProcess]]:
    made = start_controllers(tmp_path, store_url, 3)
    try:
        yield made
    finally:
        for ctl in made:
            if ctl.proc is not None and ctl.proc.poll() is None:
                ctl.resume()
            ctl.stop()


def test_one_leader_two_standbys_that_redirect_mutations(trio: list[HAControllerProcess]) -> None:
    leader = leader_of(trio)
    standbys = [c for c in trio if c is not leader]
    lead = leader.authority()
    assert lead is not None and lead["leader_url"] == leader.url and lead["term"] >= 1
    for standby in standbys:
        seen = wait_for(standby.authority, 5, "standby status")
        assert seen["role"] == "standby"
        assert seen["term"] == lead["term"]
        assert seen["leader_url"] == leader.url
        assert seen["controller_id"] not in (lead["controller_id"], "")
    token = leader.settings.operator_token
    headers = {"X-Grid-Allocator-Token": token}
    reply = httpx.put(f"{standbys[0].url}/allocator/models/m1?x=1", json=PROFILE, headers=headers)
    assert reply.status_code == 307
    assert reply.headers["location"] == f"{leader.url}/allocator/models/m1?x=1"
    assert reply.json()["error"]["code"] == "not_leader"
    # Following the redirect, the leader acts; the standbys then serve the profile as a read.
    followed = httpx.put(
        f"{standbys[0].url}/allocator/models/m1", json=PROFILE, headers=headers,
        follow_redirects=True,
    )  # fmt: skip
    assert followed.status_code == 200
    for standby in standbys:
        wait_for(
            lambda s=standby: [p["model_id"] for p in s.status()["profiles"]] == ["m1"],  # type: ignore[misc]
            5,
            "the standby to follow the profile",
        )
        models = httpx.get(f"{standby.url}/v1/models").json()
        assert models["object"] == "list"


def test_a_standby_leads_within_the_lease_ttl_after_the_leader_is_killed(
    trio: list[HAControllerProcess],
) -> None:
    leader = leader_of(trio)
    with leader.admin() as admin:
        admin.put_model("m1", PROFILE)
        admin.set_mode("automatic")
    before = leader.authority()
    assert before is not None
    leader.kill()
    killed_at = time.monotonic()
    rest = [c for c in trio if c is not leader]
    successor = leader_of(rest, timeout_s=TTL + 5)
    took = time.monotonic() - killed_at
    assert took <= TTL + 2.0, f"failover took {took:.1f} s"
    after = successor.authority()
    assert after is not None and after["term"] > before["term"]
    status = successor.status()
    assert [p["model_id"] for p in status["profiles"]] == ["m1"]
    assert status["mode"] == "automatic"
    other = next(c for c in rest if c is not successor)
    seen = wait_for(
        lambda: (a := other.authority()) and a["leader_url"] == successor.url and a, 5, "follow"
    )
    assert seen["role"] == "standby" and seen["term"] == after["term"]


def test_a_stopped_leader_resumed_after_its_lease_expired_is_fenced(
    trio: list[HAControllerProcess],
) -> None:
    leader = leader_of(trio)
    with leader.admin() as admin:
        admin.set_mode("automatic")
    before = leader.authority()
    assert before is not None
    leader.pause()
    try:
        successor = leader_of([c for c in trio if c is not leader], timeout_s=TTL + 5)
        time.sleep(0.5)
    finally:
        leader.resume()
    # Resumed, it finds its lease gone: it follows the new leader and acts on nothing.
    seen = wait_for(
        lambda: (a := leader.authority()) and a["role"] == "standby" and a, 5, "the old leader"
    )
    assert seen["leader_url"] == successor.url
    assert seen["term"] > before["term"]
    headers = {"X-Grid-Allocator-Token": leader.settings.operator_token}
    refused = httpx.put(f"{leader.url}/allocator/mode", json={"mode": "observe"}, headers=headers)
    assert refused.status_code == 307
    assert successor.status()["mode"] == "automatic"


def test_losing_one_member_changes_nothing_and_losing_quorum_stops_mutations(
    cluster: EtcdCluster, tmp_path: Path, store_url: str
) -> None:
    made = start_controllers(tmp_path, store_url, 2)
    try:
        leader = leader_of(made)
        with leader.admin() as admin:
            admin.set_mode("automatic")
        term = (leader.authority() or {})["term"]
        cluster.kill_member(cluster.members[0])
        try:
            with leader.admin() as admin:
                admin.put_model("m1", PROFILE)
            time.sleep(TTL)
            assert leader_of(made) is leader
            assert (leader.authority() or {})["term"] == term
            cluster.kill_member(cluster.members[1])  # two of three gone: no quorum
            try:
                status = wait_for(
                    lambda: (
                        (s := leader.status())
                        and any(w["code"] == "store_unavailable" for w in s["warnings"])
                        and s
                    ),
                    TTL + 10,
                    "the quorum-loss warning",
                )
                assert status["mode"] == "recommend"
                with leader.admin() as admin, pytest.raises(Exception) as refused:
                    admin.put_model("m2", PROFILE)
                assert getattr(refused.value, "code", "") in {
                    "state_write_failed", "state_fenced", "not_leader", "no_leader",
                    "lease_unavailable",
                }  # fmt: skip
            finally:
                cluster.start_member(cluster.members[1])
            back = leader_of(made, timeout_s=TTL + 15)
            wait_for(
                lambda: back.status()["mode"] == "automatic",
                10,
                "automatic mode back",
            )
            assert [p["model_id"] for p in back.status()["profiles"]] == ["m1"]
        finally:
            cluster.start_member(cluster.members[0])
    finally:
        for ctl in made:
            ctl.stop()
