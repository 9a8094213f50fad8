"""Command admission on the node, pure: what the agent accepts from a heartbeat response, and
what it may still start when the command's turn comes.

At receipt (`admit`), in this order:
1. a command without an action id, a known kind or a model id cannot be acknowledged properly
   and is dropped (`malformed_command`, no receipt when there is no action id);
2. a command for another host fails (`wrong_host`);
3. the authority fence (`fence.CommandFence`): not executable, a lower term, a second controller
   in the same term fail; an authority TTL that is already spent (the server's TTL
   less the whole request duration, on the node's monotonic clock) is cancelled;
4. an older plan generation of the same epoch is cancelled (`stale_plan_generation`); a new epoch
   behind a fenced term starts a new order.
Accepting commits the fence (highest term, controller id) and the generation, which the caller
persists before it starts anything.

At start (`start_check`): the authority deadline must not have passed; LOAD and WARM need a local
protection decision that admits new work; every dependency must have succeeded; a WARM needs
local free memory for its declared footprint.

Failures are `failed` receipts (the controller backs off); cancellations mean that nothing
happened and the controller may reissue the work at once under a fresh id.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from grid.fleet.errors import GridError
from grid.node.agent.fence import CommandFence
from grid.node.agent.state import ReceiptStatus
from grid.runtime.controller.generation import PlanGeneration

KINDS = frozenset({"load", "warm", "drain", "unload"})
CONSTRUCTIVE = frozenset({"load", "warm"})

# Fence reasons that mean "nothing happened, reissue freely" rather than a failure.
_CANCELLED_FENCE = frozenset({"authority_expired"})


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    status: ReceiptStatus | None = None  # the receipt to send when refused (None: none)
    code: str = ""
    message: str = ""


ACCEPT = Verdict(True)


def _fail(code: str, message: str) -> Verdict:
    return Verdict(False, ReceiptStatus.FAILED, code, message)


def _cancel(code: str, message: str) -> Verdict:
    return Verdict(False, ReceiptStatus.CANCELLED, code, message)


@dataclass(frozen=True)
class Authority:
    """What the node remembers about who may command it (persisted in the agent state)."""

    highest_term: int = 0
    controller_id: str = ""
    plan_epoch: str = ""
    plan_sequence: int = 0


def malformed(command: Mapping[str, Any]) -> str:
    """Why a command cannot be processed at all ('' when it is well formed)."""
    if not isinstance(command.get("action_id"), str) or not command.get("action_id"):
        return "the command has no action_id"
    if command.get("kind") not in KINDS:
        return f"the command kind {str(command.get('kind'))[:32]!r} is not load/warm/drain/unload"
    if not isinstance(command.get("model_id"), str) or not command.get("model_id"):
        return "the command has no model_id"
    memory = command.get("memory_mb", 0)
    if isinstance(memory, bool) or not isinstance(memory, int) or memory < 0:
        return "the command's memory_mb is not a whole non-negative number"
    deps = command.get("dependencies", [])
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        return "the command's dependencies are not a list of action ids"
    return ""


def admit(
    command: Mapping[str, Any],
    *,
    host_id: str,
    authority: Authority,
    ttl_remaining_s: float,
) -> tuple[Verdict, Authority]:
    """The receipt-time verdict and the authority to remember if it is accepted."""
    problem = malformed(command)
    if problem:
        has_id = isinstance(command.get("action_id"), str) and bool(command.get("action_id"))
        verdict = _fail("malformed_command", problem) if has_id else Verdict(False)
        return verdict, authority
    target = command.get("host_id", command.get("node_id"))
    if target != host_id:
        return _fail("wrong_host", f"the command is for host {str(target)[:64]!r}"), authority
    fence = CommandFence(authority.highest_term, authority.controller_id)
    fenced = fence.admit(dict(command), ttl_remaining_s)
    if not fenced.accepted:
        text = _FENCE_TEXT.get(fenced.reason, fenced.reason)
        if fenced.reason in _CANCELLED_FENCE:
            return _cancel(fenced.reason, text), authority
        return _fail(fenced.reason, text), authority
    raw_generation = command.get("plan_generation")
    try:
        generation = PlanGeneration.parse(str(raw_generation))
    except GridError:
        return _fail("malformed_plan_generation", "the plan generation is unreadable"), authority
    same_epoch = generation.epoch == authority.plan_epoch
    if same_epoch and generation.sequence < authority.plan_sequence:
        return (
            _cancel(
                "stale_plan_generation",
                f"plan generation {generation.sequence} is older than the accepted "
                f"{authority.plan_sequence}",
            ),
            authority,
        )
    sequence = generation.sequence
    if same_epoch:
        sequence = max(sequence, authority.plan_sequence)
    accepted = Authority(
        highest_term=fence.highest_term,
        controller_id=fence.controller_id,
        plan_epoch=generation.epoch,
        plan_sequence=sequence,
    )
    return ACCEPT, accepted


_FENCE_TEXT = {
    "malformed_term": "the controller term is not a whole non-negative number",
    "malformed_controller_id": "the controller id is not text",
    "not_executable": "the command is a recommendation, not an executable command",
    "authority_expired": "the controller's authority had expired by the node's own clock",
    "stale_term": "the command comes from a lower controller term than one already accepted",
    "second_controller_in_term": "another controller already commands this host in that term",
}


def remaining_ttl(server_ttl_s: object, request_duration_s: float) -> float:
    """The authority left on the node's clock: the server's TTL less the whole request time."""
    if isinstance(server_ttl_s, bool) or not isinstance(server_ttl_s, int | float):
        return 0.0
    ttl = float(server_ttl_s)
    if not math.isfinite(ttl):
        return 0.0
    return ttl - max(0.0, request_duration_s)


def start_check(
    command: Mapping[str, Any],
    *,
    now_mono: float,
    deadline_mono: float,
    admits_new_work: bool,
    lifecycle: str,
    dependency_status: Callable[[str], ReceiptStatus | None],
    free_mb: int | None,
) -> Verdict:
    """May the command start now? `free_mb` is the local free memory (for WARM)."""
    kind = command["kind"]
    if now_mono >= deadline_mono:
        return _cancel(
            "authority_expired",
            "the controller's authority expired before the command's turn came",
        )
    if kind in CONSTRUCTIVE and not admits_new_work:
        return _cancel(
            "local_protection",
            f"this host is {lifecycle} by its local protection and takes no new work",
        )
    for dependency in command.get("dependencies", []):
        outcome = dependency_status(dependency)
        if outcome is not ReceiptStatus.SUCCEEDED:
            seen = outcome.value if outcome is not None else "unknown to this node"
            return _cancel(
                "dependency_not_succeeded", f"dependency {dependency} has not succeeded ({seen})"
            )
    if kind == "warm":
        needed = int(command.get("memory_mb", 0))
        if free_mb is None or free_mb < needed:
            shown = "unknown" if free_mb is None else f"{free_mb} MB"
            return _fail(
                "insufficient_local_memory",
                f"the warm needs {needed} MB but local free memory is {shown}",
            )
    return ACCEPT


def local_free_mb(
    *,
    capacity_mb: int,
    reserved_mb: int,
    external_mb: int,
    managed_live_mb: int,
    physical_available_mb: int | None,
) -> int | None:
    """Free memory for a new residency: the declared ledger, capped by what the OS has free.

    Managed residencies are counted once, by their declared footprint (external use already
    excludes this node's children). An unknown physical reading makes the answer unknown.
    """
    if physical_available_mb is None:
        return None
    ledger = capacity_mb - reserved_mb - external_mb - managed_live_mb
    return max(0, min(ledger, physical_available_mb))


def admit_batch(
    commands: list[dict[str, Any]],
    *,
    host_id: str,
    authority: Authority,
    ttl_remaining_s: float,
) -> tuple[list[tuple[dict[str, Any], Verdict]], Authority]:
    """Admit one heartbeat's commands together.

    The controller orders a delivery by service class, not by plan generation, so one batch may
    carry a still-pending command of an older plan after one of a newer plan. Every member is
    therefore compared with the generation accepted before this batch; the newest one accepted
    is remembered afterwards. The term fence applies cumulatively.
    """
    out: list[tuple[dict[str, Any], Verdict]] = []
    running = authority
    for command in commands:
        # The fence so far, the plan generation as it was before the batch.
        probe = replace(
            authority, highest_term=running.highest_term, controller_id=running.controller_id
        )
        verdict, after = admit(
            command, host_id=host_id, authority=probe, ttl_remaining_s=ttl_remaining_s
        )
        out.append((command, verdict))
        if not verdict.accepted:
            continue
        if after.plan_epoch == running.plan_epoch:
            sequence = max(after.plan_sequence, running.plan_sequence)
        else:
            sequence = after.plan_sequence
        running = Authority(after.highest_term, after.controller_id, after.plan_epoch, sequence)
    return out, running


def order_by_dependencies(commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stable order in which every command follows the batch members it depends on."""
    remaining = list(commands)
    ordered: list[dict[str, Any]] = []
    placed: set[str] = set()
    ids = {c["action_id"] for c in commands}
    while remaining:
        for index, command in enumerate(remaining):
            deps = [d for d in command.get("dependencies", []) if d in ids]
            if all(d in placed for d in deps):
                ordered.append(remaining.pop(index))
                placed.add(command["action_id"])
                break
        else:  # a cycle: keep the controller's order for the rest
            ordered.extend(remaining)
            break
    return ordered
