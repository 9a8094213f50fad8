"""The controller's public state attributes, kept by name: each is a descriptor for a value
that lives in the state object (live_state.py) or a collaborator (`Grace`, `Outbox`), so
callers read and set `controller.mode` while the values stay where the steps act on them."""

from __future__ import annotations

from typing import Any

from grid.demand import DemandTracker
from grid.fleet import (
    Action,
    Deferral,
    Mode,
    ModelProfile,
    Plan,
    PlanGeneration,
    Policy,
    ReconcileResult,
    Tombstone,
)
from grid.runtime.controller.commands import CommandBook
from grid.runtime.controller.evidence_store import RequestSignals
from grid.runtime.controller.generation import GenerationCounter
from grid.runtime.controller.live_state import StateField, Warnings
from grid.runtime.controller.reports import Counters, TickReport
from grid.runtime.controller.timings import TimingTable


class ControllerFields:
    # The public attributes, kept by name; each lives in the state object or a collaborator.
    mode = StateField[Mode]("state", "mode")
    policy = StateField[Policy]("state", "policy")
    profiles = StateField[dict[str, ModelProfile]]("state", "profiles")
    tombstones = StateField[dict[str, Tombstone]]("state", "tombstones")
    generation = StateField[GenerationCounter]("state", "generation")
    max_term = StateField[int]("state", "max_term")
    book = StateField[CommandBook]("state", "book")
    timings = StateField[TimingTable]("state", "timings")
    model_last_used_at = StateField[dict[str, float]]("state", "model_last_used_at")
    tracker = StateField[DemandTracker]("state", "tracker")
    signals = StateField[RequestSignals]("state", "signals")
    restored = StateField[bool]("state", "restored")
    warnings = StateField[Warnings]("state", "warnings")
    counters = StateField[Counters]("state", "counters")
    dirty_revision = StateField[int]("state", "revisions", "dirty")
    safety_revision = StateField[int]("state", "revisions", "safety")
    processed_revision = StateField[int]("state", "revisions", "processed")
    success_revision = StateField[int]("state", "revisions", "success")
    success_safety_revision = StateField[int]("state", "revisions", "success_safety")
    last_plan = StateField[Plan | None]("state", "last", "plan")
    last_result = StateField[ReconcileResult | None]("state", "last", "result")
    last_generation = StateField[PlanGeneration | None]("state", "last", "generation")
    last_plan_digest = StateField[str]("state", "last", "plan_digest")
    last_solved_at = StateField[float]("state", "last", "solved_at")
    last_tick = StateField[TickReport | None]("state", "last", "report")
    last_success_at = StateField[float | None]("state", "last", "success_at")
    last_deferred = StateField[list[Deferral]]("state", "last", "deferred")
    proposed = StateField[list[Action]]("state", "last", "proposed")
    grace_anchor = StateField[float | None]("grace", "anchor")
    delivery_safety_error = StateField[dict[str, Any] | None]("outbox", "safety_error")
