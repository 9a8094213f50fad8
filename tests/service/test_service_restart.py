"""SIGKILL mid-flight and restart: state restored, no command lost or delivered twice, grace,
stale terms refused; a corrupt state file quarantined with the warning in status."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.service.harness import ControllerProcess, HttpNode, converge, mint
from tests.support.fake_node import FakeNode

pytestmark = pytest.mark.service


def nodes_for(server: ControllerProcess, fakes: list[FakeNode]) -> list[HttpNode]:
    out = [HttpNode(f, server.url, mint(server, f.host_id)) for f in fakes]
    for node in out:
        node.register()
    return out


def reconnect(server: ControllerProcess, nodes: list[HttpNode]) -> list[HttpNode]:
    """Same fake node state (and fence), new credentials and connections after a restart."""
    for node in nodes:
        node.close()
    fresh = [HttpNode(n.fake, server.url, mint(server, n.fake.host_id)) for n in nodes]
    for new, old in zip(fresh, nodes, strict=True):
        new.acks = old.acks
        new.register()
    return fresh


def test_sigkill_mid_flight_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    server = ControllerProcess(tmp_path / "ctl")
    server.start()
    try:
        h1, h2 = nodes_for(server, [FakeNode("h1"), FakeNode("h2")])
        with server.admin() as admin:
            admin.put_model("m", {"memory_mb": 4096, "min_replicas": 2, "max_replicas": 2})
            admin.set_mode("automatic")
        taken = h1.poll(execute=False)  # delivered, but the node has not run them yet
        assert [c["kind"] for c in taken] == ["load", "warm"]
        assert {c["controller_term"] for c in taken} == {1}
        server.kill()  # h2's commands were issued but never delivered

        server.start()
        with server.public() as public:
            restored = public.status().model_dump(mode="json")
        assert restored["mode"] == "automatic" and restored["grace"]["active"]
        assert [p["model_id"] for p in restored["profiles"]] == ["m"]
        by_host = {(c["host_id"], c["status"]) for c in restored["pending_commands"]}
        assert by_host == {("h1", "delivered"), ("h2", "pending")}
        h1, h2 = reconnect(server, [h1, h2])
        assert h1.poll() == []  # delivered before the crash: never delivered again
        second = h2.poll()
        assert [c["kind"] for c in second] == ["load", "warm"]
        assert {c["controller_term"] for c in second} == {2}  # new lease term after takeover

        # h1 finally runs its term-1 commands (it never saw term 2) and reports them.
        for command in taken:
            ack = h1.fake.execute(command, now=time.time(), ttl_s=5.0)
            assert ack is not None
            h1.acks.append(ack)
        converge([h1, h2], rounds=3)
        assert h1.fake.residencies["m"]["state"] == h2.fake.residencies["m"]["state"] == "ready"
        # A copy of a term-1 command is refused by h2, which has accepted term 2.
        stale = {**taken[1], "action_id": "replayed", "node_id": "h2"}
        assert h2.fake.execute(stale, now=time.time(), ttl_s=5.0) is None
        assert h2.fake.refused == ["replayed"]
        with server.public() as public:
            final = public.status().model_dump(mode="json")
        assert final["pending_commands"] == [] and final["lease"]["term"] == 2
        received = [c["action_id"] for c in taken + h1.received + h2.received]
        assert len(received) == len(set(received)) == 4
        for node in (h1, h2):
            node.close()
    finally:
        server.stop()


def test_membership_grace_holds_destructive_work_after_restart(tmp_path: Path) -> None:
    server = ControllerProcess(tmp_path / "ctl")
    server.start()
    try:
        nodes = nodes_for(server, [FakeNode("h1"), FakeNode("h2")])
        scale = {"memory_mb": 4096, "min_residency_s": 0, "scale_down_cooldown_s": 0}
        with server.admin() as admin:
            admin.put_model("m", {**scale, "min_replicas": 2, "max_replicas": 2})
            admin.set_mode("automatic")
        converge(nodes, rounds=3)
        assert all(n.fake.residencies["m"]["state"] == "ready" for n in nodes)
        server.kill()
        server.start()
        nodes = reconnect(server, nodes)
        with server.admin() as admin:
            admin.put_model("m", {**scale, "min_replicas": 1, "max_replicas": 1})
            admin.tick()
            during = admin.status().model_dump(mode="json")
        assert during["grace"]["active"]
        deferred = {d["code"] for d in during["reconciliation"]["deferred"]}
        assert "membership_grace" in deferred
        assert [c for n in nodes for c in n.poll()] == []
        time.sleep(3.2)  # the configured grace (3 s) has passed
        kinds: list[str] = []
        for _ in range(4):
            kinds += [c["kind"] for n in nodes for c in n.poll()]
        assert kinds == ["drain", "unload"]
        assert sum("m" in n.fake.residencies for n in nodes) == 1
        for node in nodes:
            node.close()
    finally:
        server.stop()


def test_corrupt_state_is_quarantined_and_reported(tmp_path: Path) -> None:
    state_dir = tmp_path / "ctl"
    server = ControllerProcess(state_dir)
    (state_dir / "state.json").write_text('{"schema_version": 1, "mode": "autom')
    server.start()
    try:
        with server.public() as public:
            status = public.status().model_dump(mode="json")
        assert status["mode"] == "recommend"
        codes = [w["code"] for w in status["warnings"]]
        assert codes == ["state_quarantined"]
        assert "state.json.corrupt-1" in status["warnings"][0]["message"]
        assert (state_dir / "state.json.corrupt-1").read_text().endswith('"autom')
        with server.admin() as admin:
            admin.set_mode("automatic")  # the clean state file is durable again
    finally:
        server.stop()
