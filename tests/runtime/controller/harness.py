"""Drive a Controller with fake nodes on a fake clock (no HTTP, no threads)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.core import Controller
from grid.runtime.controller.lease import LeaseFile
from grid.runtime.controller.reports import Delivery
from grid.runtime.controller.store import StateStore
from grid.runtime.controller.trust import Attestor
from grid.runtime.controller.wire import NodeUpdate
from tests.support.fake_node import FakeNode

T0 = 1_785_300_000.0
FAST = ControllerConfig(engine="heuristic", plan_budget_s=1.0, membership_grace_s=20.0)


def profile(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"memory_mb": 4096, "min_residency_s": 0.0}
    body.update(fields)
    return body


class Fleet:
    def __init__(
        self,
        folder: Path,
        nodes: list[FakeNode],
        *,
        config: ControllerConfig = FAST,
        now: float = T0,
        controller_id: str = "ctl-a",
    ) -> None:
        self.folder = folder
        self.nodes = {n.host_id: n for n in nodes}
        self.config = config
        self.now = now
        self.acks: dict[str, list[dict[str, Any]]] = {n.host_id: [] for n in nodes}
        self.delivered: list[dict[str, Any]] = []
        # One attestation key across restarts, as controllers sharing a config.json have.
        self.attestor = Attestor.ephemeral()
        self.ctl = self.start(controller_id)

    def start(self, controller_id: str) -> Controller:
        path = self.folder / "state.json"
        lease = LeaseFile(path.with_name("state.json.lease"), controller_id=controller_id)
        self.ctl = Controller(
            StateStore(path), now=self.now, config=self.config, lease=lease, attestor=self.attestor
        )
        return self.ctl

    def register_all(self) -> None:
        for node in self.nodes.values():
            self.update(node, node.registration())

    def update(self, node: FakeNode, body: dict[str, Any]) -> int:
        reply = self.ctl.node_update(
            node.node_id, node.host_id, NodeUpdate.model_validate(body), self.now
        )
        return reply.revision

    def poll(self, node: FakeNode) -> Delivery:
        """One control heartbeat: send acks, wait for a tick at its revision, take commands."""
        revision = self.update(node, node.heartbeat(self.acks[node.host_id]))
        self.acks[node.host_id] = []
        if self.ctl.success_revision < revision:
            self.ctl.tick(self.now)
        return self.ctl.poll_commands(node.host_id, revision, self.now)

    def step(self, seconds: float = 5.0, *, execute: bool = True) -> list[dict[str, Any]]:
        """Advance the clock, then every node polls once and runs what it received."""
        self.now += seconds
        got: list[dict[str, Any]] = []
        for host_id in sorted(self.nodes):
            node = self.nodes[host_id]
            delivery = self.poll(node)
            got += delivery.commands
            if not execute:
                continue
            for command in delivery.commands:
                ack = node.execute(command, now=self.now, ttl_s=delivery.lease_ttl_s)
                if ack is not None:
                    self.acks[host_id].append(ack)
        self.delivered += got
        return got

    def settle(self, steps: int = 6) -> None:
        for _ in range(steps):
            self.step()

    def ready_hosts(self, model_id: str) -> list[str]:
        return sorted(
            h
            for h, n in self.nodes.items()
            if n.residencies.get(model_id, {}).get("state") == "ready"
        )
