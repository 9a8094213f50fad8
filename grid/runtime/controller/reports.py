"""What the controller reports: tick results, node replies, deliveries and counters."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from grid.fleet.actions import Mode
from grid.runtime.controller.commands import AckOutcome

TICK_SAMPLES = 256


@dataclass
class TickReport:
    ok: bool
    at: float
    revision: int
    duration_ms: float = 0.0
    generation: str = ""
    new_generation: bool = False
    engine: str = ""
    solver_status: str = ""
    reused_plan: bool = False  # inputs unchanged since the last solve: its plan was kept
    # reused | solved (in this tick) | adopted (a background plan) | carried (the plan in use,
    # still valid, while the background solves the new inputs): see plan_worker.py
    plan_source: str = ""
    plan_age_s: float = 0.0  # seconds since the snapshot the plan acted on was solved for
    issued: list[str] = field(default_factory=list)
    withdrawn: list[str] = field(default_factory=list)
    error: str = ""


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
