"""Where the controller's commands enter the node: admission, the durable queue, deadlines.

`accept` reads one heartbeat's commands (raw JSON off the wire) through the pure admission,
persists the accepted ones in dependency order together with the term fence and the plan
generation, and remembers each command's authority deadline on the node's monotonic clock.
Refusals become receipts in the same durable write. `cancel_queued` ends queued work that may no
longer start (local protection, a stopping agent) with `cancelled` receipts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grid.fleet import ReceiptStatus, WireCommand
from grid.node.agent.admission import Authority, admit_batch, order_by_dependencies
from grid.node.agent.state import AgentState, Keeper, QueuedCommand, receipt_for

log = logging.getLogger("grid.node")


MAX_GRANTS = 256


def keep_attestations(state: AgentState, accepted: Sequence[WireCommand]) -> None:
    """Keep what the controller attested with the accepted commands: the proof of the fence's
    term (from a command at exactly that term and controller) and each WARM's route grant."""
    for command in accepted:
        fenced = (command.controller_term, command.controller_id) == (
            state.highest_term,
            state.controller_id,
        )
        if fenced and command.term_proof:
            state.term_proof = command.term_proof
        if command.kind == "warm" and command.grant:
            state.grants[command.model_id] = command.grant
    if len(state.grants) > MAX_GRANTS:  # keep the grants of residencies this host holds
        state.grants = {m: g for m, g in state.grants.items() if m in state.residencies}


class CommandInbox:
    def __init__(
        self,
        keeper: Keeper,
        host_id: str,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keeper = keeper
        self.host_id = host_id
        self.clock = clock
        self.monotonic = monotonic
        self._deadlines: dict[str, float] = {}

    def take_deadline(self, action_id: str) -> float:
        """The authority deadline of an accepted command (-inf when unknown: never starts)."""
        return self._deadlines.pop(action_id, float("-inf"))

    def accept(
        self, commands: Sequence[Mapping[str, Any]], ttl_remaining_s: float
    ) -> list[WireCommand]:
        """Admit, persist and queue; returns what was queued ([] when nothing could persist)."""
        deadline = self.monotonic() + ttl_remaining_s
        now = self.clock()
        accepted: list[WireCommand] = []

        def change(state: AgentState) -> None:
            accepted.clear()
            fresh: list[Mapping[str, Any]] = []
            batch_ids: set[str] = set()
            for command in commands:
                action_id = command.get("action_id")
                if isinstance(action_id, str):
                    if action_id in batch_ids:
                        continue  # listed twice in one response: run it once
                    batch_ids.add(action_id)
                    known = state.receipt(action_id)
                    epoch = str(command.get("plan_generation") or "").split(":", 1)[0]
                    if known is not None and known.plan_epoch != epoch[:64]:
                        # Another controller epoch reused the id: never its old receipt.
                        log.warning("%s of another controller epoch: new work", action_id)
                    elif state.knows_action(action_id):
                        if known is not None and known.acknowledged:  # say it again: harmless
                            state.add_receipt(known.model_copy(update={"acknowledged": False}))
                        continue
                fresh.append(command)
            verdicts, authority = admit_batch(
                fresh,
                host_id=self.host_id,
                authority=Authority(
                    state.highest_term, state.controller_id, state.plan_epoch, state.plan_sequence
                ),
                ttl_remaining_s=ttl_remaining_s,
            )
            for raw, verdict in verdicts:
                if verdict.accepted and verdict.command is not None:
                    accepted.append(verdict.command)
                elif verdict.status is not None:
                    state.add_receipt(
                        receipt_for(raw, verdict.status, verdict.code, verdict.message, now)
                    )
                    log.warning(
                        "refused %s: %s (%s)", raw.get("action_id"), verdict.code, verdict.message
                    )
            if (authority.highest_term, authority.controller_id) != (
                state.highest_term,
                state.controller_id,
            ):
                state.term_proof = ""  # a new fence: only its own command's proof stands for it
            state.highest_term = authority.highest_term
            state.controller_id = authority.controller_id
            keep_attestations(state, accepted)
            state.plan_epoch = authority.plan_epoch
            state.plan_sequence = authority.plan_sequence
            # The deadline is known before the worker can see the command in the queue.
            for typed in accepted:
                self._deadlines[typed.action_id] = deadline
            state.queue.extend(
                QueuedCommand(command=c, received_at=now) for c in order_by_dependencies(accepted)
            )

        try:
            self.keeper.update(change)
        except OSError as exc:
            # Nothing may start without a durable fence. The commands stay delivered at the
            # controller and keep their mutation slots: conservative, never unrecorded work.
            log.error("cannot persist accepted commands; none will run: %s", exc)
            for typed in accepted:
                self._deadlines.pop(typed.action_id, None)
            return []
        for typed in accepted:
            log.info("accepted %s %s %s", typed.action_id, typed.kind, typed.model_id)
        return list(accepted)

    def cancel_queued(self, which: Callable[[WireCommand], bool], code: str, message: str) -> None:
        """End the queued commands `which` selects with cancelled receipts (nothing started)."""
        state = self.keeper.read()
        if not any(which(q.command) for q in state.queue):
            return
        now = self.clock()

        def change(draft: AgentState) -> None:
            kept: list[QueuedCommand] = []
            for queued in draft.queue:
                if which(queued.command):
                    draft.add_receipt(
                        receipt_for(queued.command, ReceiptStatus.CANCELLED, code, message, now)
                    )
                else:
                    kept.append(queued)
            draft.queue = kept

        self.keeper.update(change)
