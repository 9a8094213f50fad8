"""The node-side authority fence for controller commands (pure; the node agent persists the
fence's term and controller id in its own state, `grid.node.agent.admission.Authority`).

A managed node remembers the highest controller term it has accepted and the one controller
identity allowed in that term. It refuses a command from a lower term (even after a restart,
once the state is restored), from a second controller claiming the same term, a command whose
lease TTL (converted by the node to its own monotonic clock) has run out, and anything not
marked executable. Once a fenced command was seen, the legacy term-zero namespace is closed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from grid.fleet import WireCommand

# How far one reply may move the term fence. Controllers add 1 per takeover, so a legitimate
# jump is small; a reply claiming 10^12 is an impostor's (or a corrupt one's) and would lock the
# real controller out. A refused jump leaves the fence as it was. The bound holds per reply, not
# per command: every command of one reply is measured from the fence the reply found
# (`ceiling`), so three commands cannot add up to three steps.
MAX_TERM_STEP = 10_000


@dataclass(frozen=True)
class FenceVerdict:
    accepted: bool
    reason: str = ""


@dataclass
class CommandFence:
    highest_term: int = 0
    controller_id: str = ""
    # The highest term this reply may reach (None: the current fence plus MAX_TERM_STEP).
    ceiling: int | None = None

    def admit(
        self, command: WireCommand | Mapping[str, Any], ttl_remaining_s: float
    ) -> FenceVerdict:
        """Admit a typed command, or a raw one as it came off the wire (checked here)."""
        fields = command.model_dump() if isinstance(command, WireCommand) else command
        term = fields.get("controller_term", 0)
        who = fields.get("controller_id", "")
        if not isinstance(term, int) or isinstance(term, bool) or term < 0:
            return FenceVerdict(False, "malformed_term")
        if not isinstance(who, str):
            return FenceVerdict(False, "malformed_controller_id")
        if fields.get("executable") is not True:
            return FenceVerdict(False, "not_executable")
        if not math.isfinite(ttl_remaining_s) or ttl_remaining_s <= 0:
            return FenceVerdict(False, "authority_expired")
        if term < self.highest_term:
            return FenceVerdict(False, "stale_term")
        limit = self.ceiling if self.ceiling is not None else self.highest_term + MAX_TERM_STEP
        if term > limit:
            return FenceVerdict(False, "term_jump_too_large")
        if term == self.highest_term and self.controller_id and who != self.controller_id:
            return FenceVerdict(False, "second_controller_in_term")
        self.highest_term = term
        self.controller_id = who
        return FenceVerdict(True)
