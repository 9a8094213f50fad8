"""What a standby needs to serve reads and `/v1` traffic: the leader's live membership and plan.

Membership is not durable (hosts re-register after a restart), but a standby must route
requests while nodes heartbeat to the leader only. The leader therefore publishes, under its
fence, each host's last update as received (`P/live/hosts/<host_id>`: the registration facts,
routes, advertised address and engine key, with the time it was received; acknowledgements
are never copied) whenever what routing and safety read changed, and at least every
`republish_s`; and its current plan (`P/live/plan`, chunked) whenever its generation changes.
A standby reads only what changed since its last read (`min_mod_revision`) and folds the
updates into its own registry with the leader's receipt times, so route leases age exactly as
on the leader. A new leader starts from this view too, still under the membership grace.

Anyone who can read etcd can read these records (engine keys included), as they can read the
cluster's credentials: etcd is the cluster's trust boundary (docs/high-availability.md).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from grid.fleet import GridError, Plan, PlanGeneration
from grid.runtime.controller.core import Controller
from grid.runtime.controller.etcd.client import (
    EtcdClient,
    b64,
    op_delete,
    op_put,
    prefix_end,
    unb64,
)
from grid.runtime.controller.etcd.store import CHUNK_BYTES, TXN_OPS
from grid.runtime.controller.registry import HostEntry
from grid.runtime.controller.wire import NodeUpdate, safety_signature

DEFAULT_REPUBLISH_S = 15.0


def entry_update(entry: HostEntry) -> NodeUpdate:
    """The update that rebuilds `entry` in another registry (no acknowledgements, no poll)."""
    allocator = entry.allocator
    if allocator is not None:
        allocator = allocator.model_copy(
            update={"engine_key": entry.engine_key, "routes": list(entry.routes)}
        )
    return NodeUpdate(
        host_id=entry.host_id,
        role=entry.role,
        resources=entry.resources,
        allocator=allocator,
        load=entry.load,
        request_commands=False,
    )


def entry_digest(entry: HostEntry, unreachable: list[str]) -> str:
    """What routing and destructive safety read of a host, hashed (timestamps left out)."""
    facts = (
        repr(safety_signature(entry.host)),
        [r.model_dump(mode="json") for r in entry.routes],
        entry.address,
        hashlib.sha256((entry.engine_key or "").encode()).hexdigest(),
        entry.host.state.value,
        sorted(entry.node_ids),
        list(entry.problems),
        unreachable,
        entry.fence_term,
        entry.fence_controller,
    )
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class Published:
    digest: str
    received_at: float


@dataclass
class Mirror:
    client: EtcdClient
    prefix: str
    republish_s: float = DEFAULT_REPUBLISH_S
    published: dict[str, Published] = field(default_factory=dict)
    plan_generation: str = ""
    seen_revision: int = 0  # the highest mod revision of a host record folded in here
    seen_plan: str = ""

    @property
    def hosts_prefix(self) -> str:
        return f"{self.prefix}/live/hosts/"

    @property
    def plan_key(self) -> str:
        return f"{self.prefix}/live/plan"

    # ------------------------------------------------------------------ leader side
    def publish(self, ctl: Controller, compare: list[dict[str, Any]], now: float) -> int:
        """Write what changed (fenced by `compare`); returns the number of records written."""
        ops: list[dict[str, Any]] = []
        with ctl.lock:
            registry = ctl.registry
            for host_id in sorted(registry.hosts):
                entry = registry.hosts[host_id]
                unreachable = list(registry.unreachable.get(host_id, []))
                digest = entry_digest(entry, unreachable)
                last = self.published.get(host_id)
                if (
                    last is not None
                    and last.digest == digest
                    and entry.received_at - last.received_at < self.republish_s
                ):
                    continue
                record = {
                    "node_ids": sorted(entry.node_ids),
                    "received_at": entry.received_at,
                    "routes_received_at": entry.routes_received_at,
                    "unreachable": unreachable,
                    "update": entry_update(entry).model_dump(mode="json", exclude_none=True),
                }
                ops.append(op_put(self.hosts_prefix + host_id, json.dumps(record)))
                self.published[host_id] = Published(digest, entry.received_at)
            for host_id in sorted(set(self.published) - set(registry.hosts)):
                ops.append(op_delete(self.hosts_prefix + host_id))
                del self.published[host_id]
            generation = ctl.last_generation
            plan = ctl.last_plan
            plan_ops: list[dict[str, Any]] = []
            fresh = generation is not None and str(generation) != self.plan_generation
            if plan is not None and generation is not None and fresh:
                plan_ops = self._plan_ops(
                    plan, str(generation), ctl.last_plan_digest, ctl.last_solved_at
                )
                self.plan_generation = str(generation)
        written = 0
        for start in range(0, len(ops), TXN_OPS):
            batch = ops[start : start + TXN_OPS]
            if not self.client.txn(compare, batch).succeeded:
                self.published.clear()
                raise _fenced()
            written += len(batch)
        for start in range(0, len(plan_ops), 4):  # up to 4 chunks (1 MiB) per transaction
            if not self.client.txn(compare, plan_ops[start : start + 4]).succeeded:
                self.plan_generation = ""
                raise _fenced()
            written += 1
        return written

    def _plan_ops(
        self, plan: Plan, generation: str, digest: str, solved_at: float
    ) -> list[dict[str, Any]]:
        text = plan.model_dump_json().encode()
        chunks = [text[i : i + CHUNK_BYTES] for i in range(0, len(text), CHUNK_BYTES)]
        meta = {
            "generation": generation,
            "digest": digest,
            "solved_at": solved_at,
            "chunks": len(chunks),
            "sha256": hashlib.sha256(text).hexdigest(),
        }
        ops = [op_put(f"{self.plan_key}/{i}", c) for i, c in enumerate(chunks)]
        return [*ops, op_put(self.plan_key, json.dumps(meta))]  # the meta last: it commits

    def forget(self) -> None:
        """After a change of leader: publish everything again."""
        self.published.clear()
        self.plan_generation = ""

    # ------------------------------------------------------------------ standby side
    def follow(self, ctl: Controller) -> int:
        """Fold the host records changed since the last call into `ctl`; returns how many."""
        body = {
            "key": b64(self.hosts_prefix),
            "range_end": b64(prefix_end(self.hosts_prefix)),
            "min_mod_revision": str(self.seen_revision + 1),
        }
        data = self.client.call("/v3/kv/range", body)
        folded = 0
        for raw in data.get("kvs") or []:
            self.seen_revision = max(self.seen_revision, int(raw.get("mod_revision", 0)))
            host_id = unb64(raw.get("key")).decode("utf-8", "replace")[len(self.hosts_prefix) :]
            try:
                record = json.loads(unb64(raw.get("value")))
                update = NodeUpdate.model_validate(record["update"])
                received_at = float(record["received_at"])
                node_ids = [str(n) for n in record["node_ids"]]
            except (ValueError, KeyError, TypeError, ValidationError):
                continue  # a record that does not decode is skipped; the next one replaces it
            with ctl.lock:
                entry = ctl.registry.hosts.get(host_id)
                if entry is not None and entry.received_at >= received_at:
                    continue
                ctl.registry.unreachable[host_id] = list(record.get("unreachable") or [])
                if not ctl.registry.unreachable[host_id]:
                    del ctl.registry.unreachable[host_id]
                # The routes are judged as the leader judged them (trust.py): the grants and
                # term proofs verify under the node-signing key the controllers share.
                judge = ctl.gate.judge(host_id, ctl.book.history(), ctl.profiles)
                try:
                    for node_id in node_ids or [f"{host_id}.allocator"]:
                        ctl.registry.apply(node_id, host_id, update, received_at, judge)
                except GridError:
                    continue
                routes_at = record.get("routes_received_at")
                if isinstance(routes_at, int | float):
                    ctl.registry.hosts[host_id].routes_received_at = float(routes_at)
                folded += 1
        try:
            self._follow_plan(ctl)
        finally:
            ctl.publish_views()  # a standby's readers see what it follows (views.py)
        return folded

    def _follow_plan(self, ctl: Controller) -> None:
        found = self.client.get(self.plan_key)
        if found is None or found.value.decode("utf-8", "replace") == self.seen_plan:
            return
        try:
            meta = json.loads(found.value)
            chunks = []
            for i in range(int(meta["chunks"])):
                part = self.client.get(f"{self.plan_key}/{i}")
                if part is None:
                    return  # a newer plan is being written; the next call reads it
                chunks.append(part.value)
            text = b"".join(chunks)
            if hashlib.sha256(text).hexdigest() != meta["sha256"]:
                return
            plan = Plan.model_validate_json(text)
            generation = PlanGeneration.parse(str(meta["generation"]))
        except (ValueError, KeyError, TypeError, ValidationError, GridError):
            return
        with ctl.lock:
            last = ctl.state.last
            last.plan, last.generation = plan, generation
            last.plan_digest = str(meta.get("digest") or "")
            last.solved_at = float(meta.get("solved_at") or 0.0)
        self.seen_plan = found.value.decode("utf-8", "replace")

    def reset_follow(self) -> None:
        self.seen_revision = 0
        self.seen_plan = ""


def _fenced() -> GridError:
    return GridError(
        "state_fenced",
        "the live view was not published: another controller took the mutation lease",
        fix="nothing to do: this controller now follows the leader",
        next_command="grid allocator status",
    )
