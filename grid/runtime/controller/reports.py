"""What the controller reports: tick results, node replies, deliveries and counters."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from grid.fleet import Mode
from grid.fleet.operator import TickSummary
from grid.runtime.controller.commands import AckOutcome

TICK_SAMPLES = 256


# One tick's result, filled in as the tick runs; status shows the last one as `last_tick`.
TickReport = TickSummary


@dataclass
class NodeReply:
    host_id: str
    revision: int
    acknowledgements: list[AckOutcome]


@dataclass
class Delivery:
    commands: list[dict[str, Any]]
    mode: Mode
    lease_ttl_s: float
    held: list[str] = field(default_factory=list)


@dataclass
class Counters:
    ticks: int = 0
    tick_failures: int = 0
    issued: int = 0
    delivered: int = 0
    acks: dict[str, int] = field(default_factory=dict)
    observations_accepted: int = 0
    observations_ignored: int = 0
    tick_ms: deque[float] = field(default_factory=lambda: deque(maxlen=TICK_SAMPLES))
