"""Workflow learning from `X-Grid-Affinity-Key`: which workload follows which. Pure, bounded.

Input: one call per completed request of a client that sent an affinity key, with the router's
already-hashed key (grid/router/affinity.py), the request's workload word, its start and
completion times, and `now`. The learner never holds that digest, let alone the raw key: a
workflow is named by sha256("grid-workflow" + HMAC-SHA256(secret, digest)), a hash of a keyed
hash with a per-controller secret, so a stored workflow ID can be matched neither to a header
nor to the router's digest.

Per workflow a cursor remembers the newest-started request (workload, start, completion).
A new request that started at or after the cursor's completion is the next step of the
workflow: when its workload differs, that is one transition source -> target. A request that
overlaps the cursor's (started before it completed: simultaneous work), or that started before
it (an out-of-order completion callback), is aggregate demand only and never establishes
order. A repeat of the same workload is no departure.

An edge source -> target is learned once `min_repeats` (5) such transitions are held; its
confidence is its count over every departure from the source (all targets). Each transition
also records its stage-to-stage lead: the seconds from the source request's completion to the
start of the next stage's request. An edge's `lead_s` is the median of the newest
`max_lead_samples` (32) leads it holds (None without any), so the predictive cache counts only
transfer work that can finish before the predicted demand. The learner holds
at most `max_workflows` (512) cursors and `max_transitions` (4,096) transitions, the least
recently used going first, and forgets both `expiry_s` (one hour) after they were last seen.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import statistics
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from grid.fleet import GridError

from .state import RESTORE_NEXT_COMMAND

STATE_VERSION = 1
MIN_SECRET_BYTES = 16
MAX_WORD_CHARS = 32


def _invalid(message: str, fix: str) -> GridError:
    return GridError("invalid_workflow_config", message, fix=fix, path="workflow")


@dataclass(frozen=True)
class WorkflowConfig:
    min_repeats: int = 5
    max_workflows: int = 512
    max_transitions: int = 4096
    expiry_s: float = 3600.0
    max_lead_samples: int = 32

    def __post_init__(self) -> None:
        for name in ("min_repeats", "max_workflows", "max_transitions", "max_lead_samples"):
            if getattr(self, name) < 1:
                raise _invalid(f"{name} must be at least 1", f"correct {name}")
        if not (math.isfinite(self.expiry_s) and self.expiry_s > 0):
            raise _invalid("expiry_s must be a positive number of seconds", "correct expiry_s")


class Step(StrEnum):
    """What one completed request did to its workflow."""

    IGNORED = "ignored"  # no key, or unusable times or word
    FIRST = "first"  # the workflow's first (remembered) request
    REPEAT = "repeat"  # the same workload again, after the previous one
    TRANSITION = "transition"  # a different workload after the previous one: counted
    UNORDERED = "unordered"  # overlapping or out of order: no order established


@dataclass(frozen=True)
class LearnedEdge:
    source: str
    target: str
    count: int  # transitions source -> target held
    departures: int  # transitions from source to any other workload held
    confidence: float  # count / departures
    lead_s: float | None = None  # median stage-to-stage lead of the newest samples held


@dataclass(frozen=True)
class Transition:
    source: str
    target: str
    at: float  # the learner's clock when it was counted
    lead_s: float | None = None  # seconds from the source's completion to the target's start


@dataclass
class _Cursor:
    workload: str
    started_at: float
    completed_at: float
    seen_at: float


class WorkflowLearner:
    def __init__(self, secret: bytes, config: WorkflowConfig | None = None) -> None:
        if len(secret) < MIN_SECRET_BYTES:
            raise _invalid(
                f"the workflow key secret must have at least {MIN_SECRET_BYTES} bytes",
                "pass secrets.token_bytes(32)",
            )
        self.config = config or WorkflowConfig()
        self._secret = secret
        self._cursors: OrderedDict[str, _Cursor] = OrderedDict()  # least recently seen first
        self._transitions: deque[Transition] = deque()  # oldest first
        self._counts: dict[tuple[str, str], int] = {}
        # The newest held transitions with a lead, per edge (bounded by max_lead_samples).
        self._leads: dict[tuple[str, str], deque[Transition]] = {}
        self._clock = -math.inf  # the newest `now` seen: keeps expiry order monotone

    def workflow_id(self, affinity_digest: str) -> str:
        """The stored name of a workflow: a hash of a keyed hash of the router's digest."""
        inner = hmac.new(self._secret, affinity_digest.encode(), hashlib.sha256).digest()
        return hashlib.sha256(b"grid-workflow\x00" + inner).hexdigest()

    # -------------------------------------------------------------------------- observing

    def observe(
        self,
        affinity_digest: str | None,
        workload: str,
        *,
        started_at: float,
        completed_at: float,
        now: float,
    ) -> Step:
        if not affinity_digest or not workload or len(workload) > MAX_WORD_CHARS:
            return Step.IGNORED
        if not all(math.isfinite(v) for v in (started_at, completed_at, now)):
            return Step.IGNORED
        if completed_at < started_at:
            return Step.IGNORED
        self._expire(now)
        key = self.workflow_id(affinity_digest)
        cursor = self._cursors.get(key)
        new = _Cursor(workload, started_at, completed_at, self._clock)
        if cursor is None:
            self._put(key, new)
            return Step.FIRST
        if started_at <= cursor.started_at:
            return Step.UNORDERED  # it started before the remembered request: a late callback
        self._put(key, new)  # the newest-started request becomes the cursor either way
        if started_at < cursor.completed_at:
            return Step.UNORDERED  # simultaneous work is no sequence
        if workload == cursor.workload:
            return Step.REPEAT
        self._count(cursor.workload, workload, started_at - cursor.completed_at)
        return Step.TRANSITION

    def _put(self, key: str, cursor: _Cursor) -> None:
        self._cursors[key] = cursor
        self._cursors.move_to_end(key)
        while len(self._cursors) > self.config.max_workflows:
            self._cursors.popitem(last=False)

    def _count(self, source: str, target: str, lead_s: float | None = None) -> None:
        self._hold(Transition(source, target, self._clock, lead_s))

    def _hold(self, transition: Transition) -> None:
        self._transitions.append(transition)
        pair = (transition.source, transition.target)
        self._counts[pair] = self._counts.get(pair, 0) + 1
        if transition.lead_s is not None:
            leads = self._leads.setdefault(pair, deque(maxlen=self.config.max_lead_samples))
            leads.append(transition)
        while len(self._transitions) > self.config.max_transitions:
            self._drop_oldest_transition()

    def _drop_oldest_transition(self) -> None:
        gone = self._transitions.popleft()
        pair = (gone.source, gone.target)
        left = self._counts[pair] - 1
        if left:
            self._counts[pair] = left
        else:
            del self._counts[pair]
        leads = self._leads.get(pair)
        if leads and leads[0] is gone:
            leads.popleft()
        if leads is not None and not leads:
            del self._leads[pair]

    def lead_s(self, source: str, target: str) -> float | None:
        """The median lead of the edge's newest held samples (None: no sample)."""
        leads = self._leads.get((source, target))
        if not leads:
            return None
        return float(statistics.median(t.lead_s for t in leads if t.lead_s is not None))

    def _expire(self, now: float) -> None:
        self._clock = max(self._clock, now)
        horizon = self._clock - self.config.expiry_s
        while self._cursors:
            key, oldest = next(iter(self._cursors.items()))
            if oldest.seen_at >= horizon:
                break
            del self._cursors[key]
        while self._transitions and self._transitions[0].at < horizon:
            self._drop_oldest_transition()

    # -------------------------------------------------------------------------- reading

    def next_workload(self, workload: str, now: float) -> LearnedEdge | None:
        """The learned next workload after `workload`, or None while none is established."""
        self._expire(now)
        targets = {t: n for (s, t), n in self._counts.items() if s == workload}
        if not targets:
            return None
        target = max(sorted(targets), key=lambda t: targets[t])
        count = targets[target]
        if count < self.config.min_repeats:
            return None
        departures = sum(targets.values())
        lead = self.lead_s(workload, target)
        return LearnedEdge(workload, target, count, departures, count / departures, lead)

    def edges(self, now: float) -> list[LearnedEdge]:
        """Every established edge, by source."""
        self._expire(now)
        sources = sorted({s for s, _t in self._counts})
        found = (self.next_workload(s, now) for s in sources)
        return [edge for edge in found if edge is not None]

    def transitions(self) -> list[Transition]:
        return list(self._transitions)

    def workflow_ids(self) -> list[str]:
        return list(self._cursors)

    # -------------------------------------------------------------------------- persistence

    def to_state(self) -> dict[str, Any]:
        """The counted transitions (bounded by `max_transitions`); cursors are not kept: their
        names depend on this learner's secret, and a restarted learner has another one."""
        rows: list[list[Any]] = [
            [t.source, t.target, t.at] if t.lead_s is None else [t.source, t.target, t.at, t.lead_s]
            for t in self._transitions
        ]
        return {"version": STATE_VERSION, "transitions": rows}

    def restore(self, state: Mapping[str, Any] | None) -> int:
        """Count the transitions a `to_state` document holds (oldest first, the bounds apply);
        GridError `invalid_workflow_state` for a document of another shape. Returns how many."""
        if not state:
            return 0
        rows = state.get("transitions")
        if state.get("version") != STATE_VERSION or not isinstance(rows, list):
            raise GridError(
                "invalid_workflow_state",
                "the workflow state has an unknown version or shape",
                fix="nothing to undo: the controller drops the workflow state and learns the "
                "workflows again from new requests; `grid allocator status` shows the warning",
                next_command=RESTORE_NEXT_COMMAND,
            )
        valid = sorted(
            (
                Transition(row[0], row[1], float(row[2]), float(row[3]) if len(row) > 3 else None)
                for row in rows
                if _valid_row(row)
            ),
            key=lambda t: t.at,
        )
        for transition in valid:  # oldest first, as they were counted
            self._clock = max(self._clock, transition.at)
            self._hold(transition)
        return len(valid)


def _finite_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _valid_row(row: object) -> bool:
    """[source, target, at] or, with a learned lead, [source, target, at, lead_s]."""
    if not (isinstance(row, list) and len(row) in (3, 4)):
        return False
    if len(row) == 4 and not (_finite_number(row[3]) and row[3] >= 0):
        return False
    source, target, at = row[:3]
    if not (isinstance(source, str) and isinstance(target, str) and source != target):
        return False
    if not (0 < len(source) <= MAX_WORD_CHARS and 0 < len(target) <= MAX_WORD_CHARS):
        return False
    return _finite_number(at)
