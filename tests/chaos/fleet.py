"""The chaos suites' fleet: one controller process, three node agents with real llama.cpp
children serving SmolLM2 (min_replicas 2), each agent with its own credential and reply key."""

from __future__ import annotations

import collections
import contextlib
import json
import re
from pathlib import Path
from typing import Any

import httpx

from grid.fleet.errors import GridError
from grid.fleet.wire import reply_key_path
from grid.node.agent.config import CatalogEntry
from grid.node.engines.state import atomic_write_text
from tests.chaos.oracle import children
from tests.e2e.fleet_helpers import EngineNode
from tests.service.harness import FAST_CONTROLLER, ControllerProcess

REPLICAS = 2
NODE_TTL_S = 5.0
CHAOS_CONTROLLER = {**FAST_CONTROLLER, "node_ttl_s": NODE_TTL_S, "destructive_margin_s": 2.0}
ACCEPTED = re.compile(r"accepted (\S+) (\S+) (\S+)")


class ChaosFleet:
    def __init__(self, tmp_path: Path, llama: Path, entry: CatalogEntry) -> None:
        self.root = (tmp_path / "nodes").absolute()
        self.entry = entry
        self.controller = ControllerProcess(tmp_path / "ctl", dict(CHAOS_CONTROLLER))
        self.controller.start()
        self.nodes: list[EngineNode] = []
        for index in range(3):
            low = 39800 + 10 * index
            node = EngineNode(
                self.root,
                self.controller,
                f"chaos-0{index + 1}",
                catalog=[entry],
                ports=(low, low + 9),
                llama_server=llama,
            )
            with self.controller.admin() as admin:  # the credential with its reply key
                minted = admin.node_credential(node.host_id)
            token_file = Path(node.config.token_file or "")
            atomic_write_text(token_file, f"{minted.token}\n")
            atomic_write_text(reply_key_path(token_file), f"{minted.reply_key}\n")
            node.start()
            self.nodes.append(node)
        self.configure()

    def configure(self) -> None:
        """What the operator (or `grid test start`) applies: the profile, automatic mode."""
        profile = {
            "memory_mb": 256,
            "min_replicas": REPLICAS,
            "max_replicas": REPLICAS,
            "artifact_sha256": self.entry.sha256,
            "min_residency_s": 0,
            "scale_down_cooldown_s": 0,
        }
        with self.controller.admin() as admin:
            admin.put_model(self.entry.model_id, profile)
            admin.set_mode("automatic")

    def status(self) -> dict[str, Any] | None:
        try:
            with self.controller.public() as public:
                doc: dict[str, Any] = public.status(history=0).model_dump(mode="json")
                return doc
        except GridError:
            return None

    def ready_hosts(self, doc: dict[str, Any]) -> set[str]:
        return {
            h["host_id"]
            for h in doc.get("hosts", [])
            for r in h.get("residencies", [])
            if r["model_id"] == self.entry.model_id and r["state"] == "ready"
        }

    def converged(self, http: httpx.Client) -> bool:
        doc = self.status()
        if doc is None or doc.get("mode") != "automatic":
            return False
        kids = children(self.root, http)
        oracle = {c.host_id for c in kids if c.ready}
        return len(kids) == REPLICAS and self.ready_hosts(doc) == oracle and len(oracle) == REPLICAS

    def diagnose(self, http: httpx.Client) -> str:
        doc = self.status() or {}
        rows = {h["host_id"]: h.get("residencies") for h in doc.get("hosts", [])}
        logs = {n.host_id: n.log()[-1500:] for n in self.nodes}
        return json.dumps(
            {
                "mode": doc.get("mode"),
                "warnings": doc.get("warnings"),
                "hosts": rows,
                "children": [c.__dict__ for c in children(self.root, http)],
                "node_logs": logs,
                "controller_log": self.controller.log_path.read_text()[-2000:],
            },
            indent=1,
            default=str,
        )

    def accepted_ids(self) -> collections.Counter[str]:
        counts: collections.Counter[str] = collections.Counter()
        for node in self.nodes:
            with contextlib.suppress(OSError):
                text = (node.folder / "agent.log").read_text(encoding="utf-8", errors="replace")
                counts.update(m.group(1) for m in ACCEPTED.finditer(text))
        return counts

    def cleanup(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.cleanup()
        self.controller.stop()
