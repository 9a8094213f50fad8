"""Command admission on the node, pure: what the agent accepts from a heartbeat response, and
what it may still start when the command's turn comes.

At receipt (`admit`), in this order:
1. a command that does not read as a `WireCommand` (no action id, an unknown kind, no model id,
   a field of the wrong type) fails (`malformed_command`; no receipt without an action id);
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from grid.fleet import CONSTRUCTIVE_KINDS, GridError, PlanGeneration, ReceiptStatus, WireCommand
from grid.node.agent.fence import MAX_TERM_STEP, CommandFence

# Fence reasons that mean "nothing happened, reissue freely" rather than a failure.
_CANCELLED_FENCE = frozenset({"authority_expired"})


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    status: ReceiptStatus | None = None  # the receipt to send when refused (None: none)
    code: str = ""
    message: str = ""
    command: WireCommand | None = None  # the typed command, once it was read


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


def parse_command(raw: Mapping[str, Any]) -> tuple[WireCommand | None, str, str]:
    """The typed command, or None with the code and sentence of why it cannot be processed
    (`artifact_spec_invalid` for malformed artifact facts, else `malformed_command`)."""
    try:
        return WireCommand.model_validate(dict(raw)), "", ""
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        code = "artifact_spec_invalid" if where.startswith("artifact_") else "malformed_command"
        return None, code, f"the command's {where[:64]} is invalid: {first['msg'][:120]}"


def admit(
    raw: Mapping[str, Any],
    *,
    host_id: str,
    authority: Authority,
    ttl_remaining_s: float,
    term_ceiling: int | None = None,
) -> tuple[Verdict, Authority]:
    """The receipt-time verdict and the authority to remember if it is accepted
    (`term_ceiling`: the highest term the reply may reach, `fence.MAX_TERM_STEP`)."""
    command, code, problem = parse_command(raw)
    if command is None:
        has_id = isinstance(raw.get("action_id"), str) and bool(raw.get("action_id"))
        verdict = _fail(code, problem) if has_id else Verdict(False)
        return verdict, authority
    target = command.target_host
    if target != host_id:
        return _fail("wrong_host", f"the command is for host {str(target)[:64]!r}"), authority
    fence = CommandFence(authority.highest_term, authority.controller_id, term_ceiling)
    fenced = fence.admit(command, ttl_remaining_s)
    if not fenced.accepted:
        text = _FENCE_TEXT.get(fenced.reason, fenced.reason)
        if fenced.reason in _CANCELLED_FENCE:
            return _cancel(fenced.reason, text), authority
        return _fail(fenced.reason, text), authority
    try:
        generation = PlanGeneration.parse(command.plan_generation)
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
    return Verdict(True, command=command), accepted


_FENCE_TEXT = {
    "malformed_term": "the controller term is not a whole non-negative number",
    "malformed_controller_id": "the controller id is not text",
    "not_executable": "the command is a recommendation, not an executable command",
    "term_jump_too_large": "the controller term jumps further past the accepted one than any "
    "controller takeover can (an impostor or a corrupt reply)",
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
    command: WireCommand,
    *,
    now_mono: float,
    deadline_mono: float,
    admits_new_work: bool,
    lifecycle: str,
    dependency_status: Callable[[str], ReceiptStatus | None],
    free_mb: int | None,
) -> Verdict:
    """May the command start now? `free_mb` is the local free memory (for WARM)."""
    kind = command.kind
    if now_mono >= deadline_mono:
        return _cancel(
            "authority_expired",
            "the controller's authority expired before the command's turn came",
        )
    if kind in CONSTRUCTIVE_KINDS and not admits_new_work:
        return _cancel(
            "local_protection",
            f"this host is {lifecycle} by its local protection and takes no new work",
        )
    for dependency in command.dependencies:
        outcome = dependency_status(dependency)
        if outcome is not ReceiptStatus.SUCCEEDED:
            seen = outcome.value if outcome is not None else "unknown to this node"
            return _cancel(
                "dependency_not_succeeded", f"dependency {dependency} has not succeeded ({seen})"
            )
    if kind == "warm":
        needed = command.memory_mb
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
    commands: Sequence[Mapping[str, Any]],
    *,
    host_id: str,
    authority: Authority,
    ttl_remaining_s: float,
) -> tuple[list[tuple[Mapping[str, Any], Verdict]], Authority]:
    """Admit one heartbeat's commands together.

    The controller orders a delivery by service class, not by plan generation, so one batch may
    carry a still-pending command of an older plan after one of a newer plan. Every member is
    therefore compared with the generation accepted before this batch; the newest one accepted
    is remembered afterwards. The term fence applies cumulatively, and the whole batch (one
    reply) may move it by at most `MAX_TERM_STEP` from where it was before.
    """
    out: list[tuple[Mapping[str, Any], Verdict]] = []
    running = authority
    ceiling = authority.highest_term + MAX_TERM_STEP
    for command in commands:
        # The fence so far, the plan generation as it was before the batch.
        probe = replace(
            authority, highest_term=running.highest_term, controller_id=running.controller_id
        )
        verdict, after = admit(
            command,
            host_id=host_id,
            authority=probe,
            ttl_remaining_s=ttl_remaining_s,
            term_ceiling=ceiling,
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


def order_by_dependencies(commands: list[WireCommand]) -> list[WireCommand]:
    """Stable order in which every command follows the batch members it depends on."""
    remaining = list(commands)
    ordered: list[WireCommand] = []
    placed: set[str] = set()
    ids = {c.action_id for c in commands}
    while remaining:
        for index, command in enumerate(remaining):
            deps = [d for d in command.dependencies if d in ids]
            if all(d in placed for d in deps):
                ordered.append(remaining.pop(index))
                placed.add(command.action_id)
                break
        else:  # a cycle: keep the controller's order for the rest
            ordered.extend(remaining)
            break
    return ordered
