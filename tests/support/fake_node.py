"""A fake node agent (a test double, never shipped) for controller tests: it speaks the wire
contract and obeys commands.

It stands in for `grid/node` (an outside thing for the controller): LOAD puts weights in its
cache, WARM makes a ready residency, DRAIN marks it draining, UNLOAD removes it. With
`evict_actuator` it also keeps predictive provenance like a managed node (a `predictive` LOAD
that downloads records the artifact, a WARM marks it used) and runs EVICT of exactly that SHA,
refusing anything else; `disk_free_mb` is what it reports as free disk. It keeps the
node-side authority fence (highest controller term seen) so tests can show that a stale command
is refused, and like a real node it keeps the controller's attestations (the proof of the
fence's term, each WARM's route grant) and echoes the grants with its routes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grid.fleet.wire import (
    NodeUpdate,
    WireAck,
    WireAllocator,
    WireLoad,
    WirePredictiveEntry,
    WireResidency,
    WireResources,
    WireRoute,
)
from grid.node.agent.fence import CommandFence


@dataclass
class FakeNode:
    host_id: str
    capacity_mb: int = 16384
    failure_domain: str | None = None
    node_id: str = ""
    residencies: dict[str, dict[str, Any]] = field(default_factory=dict)
    cached: set[str] = field(default_factory=set)
    fence: CommandFence = field(default_factory=CommandFence)
    executed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    state: str = "accepting"
    unrouted: set[str] = field(default_factory=set)  # READY rows whose child route is gone
    # An older node's heartbeat: no allocator envelope, so it renews the control lease only.
    lean: bool = False
    engine_key: str | None = None  # sent beside the routes when set (the proxy needs it)
    term_proof: str = ""  # the controller's proof of the fence's term (from a command)
    grants: dict[str, str] = field(default_factory=dict)  # model -> route grant (from WARM)
    disk_free_mb: int | None = None
    evict_actuator: bool = False
    # model -> {"sha256", "size_mb", "fetched_at", "warmed"}: downloads a prediction asked for
    predictive: dict[str, dict[str, Any]] = field(default_factory=dict)
    clock: float = 0.0  # the node's idea of now (for the provenance ages it reports)

    def __post_init__(self) -> None:
        self.node_id = self.node_id or f"node-{self.host_id}"

    def envelope(self) -> WireAllocator:
        block = self._envelope()
        if self.engine_key and block.routes:
            block.engine_key = self.engine_key
        return block

    def _envelope(self) -> WireAllocator:
        return WireAllocator(
            schema_version=1,
            state=self.state,
            cached_models=sorted(self.cached),
            residencies=[
                WireResidency.model_validate(r) for _m, r in sorted(self.residencies.items())
            ],
            actuator_capabilities=["load", "warm", "drain", "unload"]
            + (["evict"] if self.evict_actuator else []),
            disk_free_mb=self.disk_free_mb,
            predictive_cache=[
                WirePredictiveEntry(
                    model_id=m,
                    sha256=e["sha256"],
                    size_mb=e["size_mb"],
                    cached_age_s=max(0.0, self.clock - e["fetched_at"]),
                    warmed=e["warmed"],
                )
                for m, e in sorted(self.predictive.items())
            ],
            # Like a real node: a live child route beside each READY row (invariant 4).
            routes=[
                WireRoute(model_id=m, port=39100 + i, grant=self.grants.get(m))
                for i, (m, r) in enumerate(sorted(self.residencies.items()))
                if r["state"] == "ready" and m not in self.unrouted
            ],
        )

    def registration(self) -> NodeUpdate:
        return NodeUpdate(
            role="allocator",
            models=[m for m, r in self.residencies.items() if r["state"] == "ready"],
            host_id=self.host_id,
            resources=WireResources(
                capacity_mb=self.capacity_mb,
                reserved_mb=0,
                runtimes=["llama.cpp"],
                failure_domain=self.failure_domain,
                disk_free_mb=self.disk_free_mb,
            ),
            allocator=self.envelope(),
            # Like a real node's early lease heartbeat: registry truth only, no commands.
            request_commands=False,
        )

    def heartbeat(
        self, acks: list[dict[str, Any]] | None = None, *, request_commands: bool = True
    ) -> NodeUpdate:
        return NodeUpdate(
            node_id=self.node_id,
            load=WireLoad(active_tasks=0, queue_depth=0),
            allocator=None if self.lean else self.envelope(),
            request_commands=request_commands,
            acknowledgements=[WireAck.model_validate(a) for a in acks or []],
        )

    def execute(
        self, command: dict[str, Any], *, now: float, ttl_s: float = 10.0
    ) -> dict[str, Any] | None:
        """Run one command; None when the authority fence refuses it (no acknowledgement)."""
        verdict = self.fence.admit(command, ttl_s)
        if not verdict.accepted:
            self.refused.append(command["action_id"])
            return None
        kind, model = command["kind"], command["model_id"]
        if command.get("controller_term") == self.fence.highest_term and command.get("term_proof"):
            self.term_proof = str(command["term_proof"])
        if kind == "warm" and command.get("grant"):
            self.grants[model] = str(command["grant"])
        self.clock = max(self.clock, now)
        if kind == "evict":
            return self._evict(command)
        if kind == "load":
            if command.get("predictive") and model not in self.cached and self.evict_actuator:
                self.predictive[model] = {
                    "sha256": command["artifact_sha256"],
                    "size_mb": command["artifact_size_mb"],
                    "fetched_at": now,
                    "warmed": False,
                }
            if model not in self.cached and self.disk_free_mb is not None:
                self.disk_free_mb -= int(command.get("artifact_size_mb") or 0)
            self.cached.add(model)
        elif kind == "warm":
            if model in self.predictive:
                self.predictive[model]["warmed"] = True
            self.residencies[model] = {
                "model_id": model,
                "memory_mb": command["memory_mb"],
                "state": "ready",
                "managed": True,
                "loaded_at": now,
                "last_used_at": now,
                "active_requests": 0,
            }
        elif kind == "drain" and model in self.residencies:
            self.residencies[model]["state"] = "draining"
        elif kind == "unload":
            self.residencies.pop(model, None)
        self.executed.append(command["action_id"])
        return {
            "action_id": command["action_id"],
            "status": "succeeded",
            "message": kind,
            "duration_seconds": 1.5,
            "artifact_fetched": kind == "load",
        }

    def _evict(self, command: dict[str, Any]) -> dict[str, Any]:
        model, entry = command["model_id"], self.predictive.get(command["model_id"])
        code = ""
        if entry is None or entry["sha256"] != command.get("artifact_sha256"):
            code = "evict_not_held"
        elif entry["warmed"]:
            code = "evict_used"
        elif model in self.residencies:
            code = "evict_active"
        if not code:
            del self.predictive[model]
            self.cached.discard(model)
            if self.disk_free_mb is not None:
                self.disk_free_mb += int(entry["size_mb"]) if entry else 0
        self.executed.append(command["action_id"])
        return {
            "action_id": command["action_id"],
            "status": "failed" if code else "succeeded",
            "message": code or "evicted",
            "duration_seconds": 0.1,
            "artifact_fetched": False,
        }
