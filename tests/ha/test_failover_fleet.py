"""The failover suite with real parts: a real three-member etcd cluster, three controller
processes, a real node agent that lists all three, and a real llama-server child (SmolLM2).

One model is warmed once (its weights are in the node's catalog); then, in turn: the leader is
SIGKILLed while a chat streams through a standby (the stream is not cut, a standby leads within
the lease TTL + 2 s, the node follows it); the next leader is SIGSTOPped and resumed after its
lease expired (it is fenced and issues nothing); one etcd member is killed (nothing changes);
the quorum is lost (mutations stop, recommend mode with a warning, routing goes on).
Throughout, the node executes every command once: one WARM receipt, one engine process, no
receipt lost.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from grid.node.agent.config import CatalogEntry, save_config
from tests.e2e.fleet_helpers import EngineNode, chat, host_row, wait_for
from tests.ha.cluster import EtcdCluster
from tests.ha.harness import HA_CONTROLLER, HAControllerProcess, leader_of, start_controllers

pytestmark = pytest.mark.engine
TTL = float(HA_CONTROLLER["lease_ttl_s"])  # type: ignore[arg-type]


def receipts(node: EngineNode) -> list[dict[str, Any]]:
    state = json.loads((node.folder / "agent.json").read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = state["receipts"]
    return rows


def _doc(controller: HAControllerProcess) -> dict[str, Any]:
    """The status document as JSON, as `grid allocator status --json` prints it."""
    return controller.status()


def heartbeat_age(ctl: HAControllerProcess) -> float:
    hosts = [h for h in ctl.status()["hosts"] if h["host_id"] == "host-a"]
    return float(hosts[0]["heartbeat_age_s"]) if hosts else 1e9


def port_of(ctl: HAControllerProcess) -> int:
    return ctl.settings.port


def stream_chat(url: str, model: str, out: dict[str, Any]) -> None:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Count from one to fifty in words."}],
        "max_tokens": 160,
        "temperature": 0,
        "stream": True,
    }
    try:
        with (
            httpx.Client(timeout=120, trust_env=False) as client,
            client.stream("POST", f"{url}/v1/chat/completions", json=body) as streamed,
        ):
            out["status"] = streamed.status_code
            out["events"] = [x for x in streamed.iter_lines() if x.startswith("data:")]
    except httpx.HTTPError as exc:
        out["error"] = repr(exc)


@pytest.fixture
def trio(tmp_path: Path, store_url: str) -> Iterator[list[HAControllerProcess]]:
    made = start_controllers(tmp_path / "ctl", store_url, 3)
    try:
        yield made
    finally:
        for ctl in made:
            if ctl.proc is not None and ctl.proc.poll() is None:
                ctl.resume()
            ctl.stop()


def test_kill_stop_member_loss_and_quorum_loss_with_a_real_node(
    tmp_path: Path,
    cluster: EtcdCluster,
    trio: list[HAControllerProcess],
    llama_server: Path,
    smollm2_entry: CatalogEntry,
) -> None:
    leader = leader_of(trio)
    node = EngineNode(
        tmp_path / "nodes", leader, "host-a", catalog=[smollm2_entry], ports=(39960, 39969),
        llama_server=llama_server,
    )  # fmt: skip
    node.config = node.config.model_copy(
        update={"controllers": [c.url for c in trio], "request_timeout_s": 2.0}
    )
    save_config(node.folder, node.config)
    model = smollm2_entry.model_id
    try:
        node.start()
        with leader.admin() as admin:
            admin.put_model(model, {
                "memory_mb": 256, "min_replicas": 1, "max_replicas": 1,
                "artifact_sha256": smollm2_entry.sha256,
            })  # fmt: skip
            admin.set_mode("automatic")
        wait_for(
            lambda: (row := host_row(_doc(leader), "host-a", model)) and row["state"] == "ready",
            90, "the model ready on the leader",
        )  # fmt: skip
        engine_pid = node.ready_residency(model)["pid"]
        standbys = [c for c in trio if c is not leader]
        # A standby serves /v1 from the routes it follows.
        wait_for(lambda: chat(port_of(standbys[0]), None, model).status_code == 200, 10, "chat")

        # 1. SIGKILL the leader while a chat streams through a standby.
        streamed: dict[str, Any] = {}
        reader = threading.Thread(target=stream_chat, args=(standbys[0].url, model, streamed))
        reader.start()
        time.sleep(0.3)
        before = leader.authority() or {}
        leader.kill()
        killed = time.monotonic()
        second = leader_of(standbys, timeout_s=TTL + 5)
        assert time.monotonic() - killed <= TTL + 2.0
        assert (second.authority() or {})["term"] > before["term"]
        reader.join(120)
        assert streamed.get("status") == 200, streamed
        assert streamed["events"][-1] == "data: [DONE]"  # the stream was not cut
        # The node follows the new leader within a heartbeat or two.
        wait_for(lambda: heartbeat_age(second) < 1.5, TTL + 10, "the node to follow the leader")
        assert chat(port_of(second), None, model).status_code == 200

        # 2. SIGSTOP the new leader; resumed after its lease expired, it is fenced.
        third_pool = [c for c in standbys if c is not second]
        second_term = (second.authority() or {})["term"]
        second.pause()
        try:
            third = leader_of(third_pool, timeout_s=TTL + 5)
            time.sleep(1.0)
        finally:
            second.resume()
        resumed = wait_for(
            lambda: (
                (a := second.authority())
                and a["role"] == "standby"
                and a["term"] > second_term
                and a
            ),
            5,
            "fenced and following the newer term",
        )
        assert resumed["term"] > second_term and resumed["leader_url"] == third.url
        wait_for(lambda: chat(port_of(third), None, model).status_code == 200, 15, "chat")

        # 3. One etcd member lost: nothing changes.
        term = (third.authority() or {})["term"]
        cluster.kill_member(cluster.members[2])
        time.sleep(TTL)
        assert leader_of(trio[1:] if trio[0] is leader else trio) is third
        assert (third.authority() or {})["term"] == term
        assert chat(port_of(third), None, model).status_code == 200

        # 4. Quorum lost: recommend mode with a warning, routing goes on.
        cluster.kill_member(cluster.members[1])
        try:
            wait_for(
                lambda: (s := third.status())["mode"] == "recommend"
                and any(w["code"] == "store_unavailable" for w in s["warnings"]),
                TTL + 10, "recommend mode on quorum loss",
            )  # fmt: skip
            assert chat(port_of(third), None, model).status_code == 200
        finally:
            cluster.start_member(cluster.members[1])
            cluster.start_member(cluster.members[2])
        back = leader_of([c for c in trio if c is not leader], timeout_s=TTL + 15)
        wait_for(
            lambda: back.status()["mode"] == "automatic",
            15,
            "automatic again",
        )

        # Every command ran once: one LOAD, one WARM, the same engine process throughout.
        rows = receipts(node)
        ids = Counter(r["action_id"] for r in rows)
        assert all(n == 1 for n in ids.values()), ids
        # The weights are in the node's catalog, so the one command is a WARM.
        assert Counter(r["kind"] for r in rows if r["model_id"] == model) == {"warm": 1}
        assert node.ready_residency(model)["pid"] == engine_pid
        wait_for(lambda: all(r["acknowledged"] for r in receipts(node)), 15, "receipts acked")
        history = back.status()["history"]
        assert [r["kind"] for r in history if r["status"] == "succeeded"] == ["warm"]
    finally:
        node.cleanup()
