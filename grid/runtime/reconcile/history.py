"""The action history, indexed once per tick: open work, attempts, backoff, receipt fences.

Everything is keyed by (kind, host, model): failure backoff is tracked per key so that a broken
artifact neither loops fleet-wide nor blocks healthy targets elsewhere, and a retry after a
terminal record gets the next attempt number, hence a new action id, while an identical open
record keeps its id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from grid.fleet import (
    CONSTRUCTIVE_KINDS,
    DESTRUCTIVE_KINDS,
    ActionKind,
    ActionRecord,
    Host,
    Policy,
    RecordStatus,
    action_id,
)

ActionKey = tuple[ActionKind, str, str]  # (kind, host_id, model_id)


def key_of(record: ActionRecord) -> ActionKey:
    return (record.kind, record.host_id, record.model_id)


def backoff_delay(policy: Policy, failures: int) -> float:
    """Exponential delay after `failures` consecutive failures (1 → base), capped."""
    if failures <= 0:
        return 0.0
    exponent = min(failures - 1, 60)  # 2**60 seconds is beyond any cap
    return float(min(policy.retry_backoff_cap_s, policy.retry_backoff_base_s * 2**exponent))


def dangling_destructive(records: Iterable[ActionRecord]) -> list[ActionRecord]:
    """Destructive records withdrawn after delivery and still without a terminal receipt."""
    return [
        r
        for r in records
        if r.kind in DESTRUCTIVE_KINDS
        and r.status is RecordStatus.WITHDRAWN
        and r.was_delivered
        and r.finished_at is None
    ]


def start_failures(
    records: Iterable[ActionRecord], now: float, policy: Policy
) -> dict[str, dict[str, int]]:
    """host -> model -> failed LOADs and WARMs in a row on that pair (the planner's bounded
    placement penalty, `Host.start_failures`): counted back from the newest record, stopping
    at the pair's last successful WARM (it served since) or at a failure older than
    `policy.start_failure_window_s` (the penalty expires, so the host is tried again)."""
    pairs: dict[tuple[str, str], list[ActionRecord]] = {}
    for r in records:
        if r.kind in (ActionKind.LOAD, ActionKind.WARM):
            pairs.setdefault((r.host_id, r.model_id), []).append(r)
    out: dict[str, dict[str, int]] = {}
    for (host_id, model_id), rows in sorted(pairs.items()):
        count = 0
        for r in sorted(rows, key=lambda r: (r.created_at, r.attempt, r.action_id), reverse=True):
            if r.status is RecordStatus.SUCCEEDED and r.kind is ActionKind.WARM:
                break
            if r.status is not RecordStatus.FAILED:
                continue
            failed_at = r.finished_at if r.finished_at is not None else r.created_at
            if now - failed_at > policy.start_failure_window_s:
                break
            count += 1
        if count:
            out.setdefault(host_id, {})[model_id] = count
    return out


def with_failures(
    hosts: Iterable[Host], records: Iterable[ActionRecord], now: float, policy: Policy
) -> list[Host]:
    """The hosts, each carrying its `start_failures` (the snapshot the planner scores)."""
    failed = start_failures(records, now, policy)
    return [
        h.model_copy(update={"start_failures": failed[h.host_id]}) if h.host_id in failed else h
        for h in hosts
    ]


@dataclass
class HistoryIndex:
    records: list[ActionRecord]
    by_key: dict[ActionKey, list[ActionRecord]] = field(default_factory=dict)
    by_id: dict[str, ActionRecord] = field(default_factory=dict)
    # Constructive records per (model_id, host_id): every stage asks about one residency.
    constructive: dict[tuple[str, str], list[ActionRecord]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ordered = sorted(self.records, key=lambda r: (r.created_at, r.attempt, r.action_id))
        for record in ordered:
            self.by_key.setdefault(key_of(record), []).append(record)
            self.by_id.setdefault(record.action_id, record)
        for record in self.by_id.values():
            if record.kind in CONSTRUCTIVE_KINDS:
                residency = (record.model_id, record.host_id)
                self.constructive.setdefault(residency, []).append(record)

    # -- identity ------------------------------------------------------------------------
    def open_record(self, key: ActionKey) -> ActionRecord | None:
        return next((r for r in self.by_key.get(key, []) if r.is_open), None)

    def next_attempt(self, key: ActionKey) -> int:
        """The attempt number for new work on this key (an open record keeps its own)."""
        open_record = self.open_record(key)
        if open_record is not None:
            return open_record.attempt
        return max((r.attempt for r in self.by_key.get(key, [])), default=0) + 1

    def next_id(self, key: ActionKey) -> tuple[str, int]:
        attempt = self.next_attempt(key)
        kind, host_id, model_id = key
        return action_id(kind, host_id, model_id, attempt), attempt

    # -- retries -------------------------------------------------------------------------
    def consecutive_failures(self, key: ActionKey) -> int:
        count = 0
        for record in reversed(self.by_key.get(key, [])):
            if record.status is RecordStatus.FAILED:
                count += 1
            elif record.status is RecordStatus.SUCCEEDED:
                break
        return count

    def retry_at(self, key: ActionKey, policy: Policy) -> float | None:
        """When the key may be tried again after its latest failure (None: no failure holds)."""
        terminal = [
            r
            for r in self.by_key.get(key, [])
            if r.status in {RecordStatus.FAILED, RecordStatus.SUCCEEDED}
        ]
        if not terminal or terminal[-1].status is not RecordStatus.FAILED:
            return None
        last = terminal[-1]
        failed_at = last.finished_at if last.finished_at is not None else last.created_at
        return failed_at + backoff_delay(policy, self.consecutive_failures(key))

    def awaiting_observation(
        self, key: ActionKey, heartbeat: float, now: float, policy: Policy
    ) -> ActionRecord | None:
        """A success newer than the host's heartbeat: the snapshot cannot show it yet.

        A heartbeat older than a successful action cannot trigger a duplicate of it; a
        genuinely newer heartbeat that still shows the old state may start a new lifecycle.
        """
        for record in reversed(self.by_key.get(key, [])):
            if record.status is not RecordStatus.SUCCEEDED or record.finished_at is None:
                continue
            if record.finished_at >= heartbeat and now - record.finished_at < (
                policy.observation_timeout_s
            ):
                return record
            return None
        return None

    def preemption_drain(self, model_id: str, host_id: str) -> ActionRecord | None:
        """The preemption drain this residency's DRAINING state comes from: its newest drain,
        when that one succeeded as a planner-staged preemption and no load or warm of the
        residency came after it (None otherwise)."""
        drains = self.by_key.get((ActionKind.DRAIN, host_id, model_id), [])
        if not drains or drains[-1].status is not RecordStatus.SUCCEEDED:
            return None
        drain = drains[-1]
        if not drain.preemption:
            return None
        later = [
            r
            for r in self.constructive.get((model_id, host_id), [])
            if r.created_at > drain.created_at
        ]
        return None if later else drain

    # -- governors -------------------------------------------------------------------------
    def slot_holders(self) -> list[ActionRecord]:
        return [r for r in self.by_id.values() if r.holds_slot]

    def open_records(self) -> list[ActionRecord]:
        return [r for r in self.by_id.values() if r.is_open]

    def open_constructive(self, model_id: str, host_id: str) -> list[ActionRecord]:
        return [r for r in self.constructive.get((model_id, host_id), []) if r.is_open]

    def running_constructive(self, model_id: str, host_id: str) -> list[ActionRecord]:
        """Delivered loads and warms of this residency that may still be running."""
        return [
            r
            for r in self.constructive.get((model_id, host_id), [])
            if r.holds_slot and r.was_delivered
        ]

    def dangling_destructive(self) -> list[ActionRecord]:
        """Destructive records withdrawn after delivery and still without a terminal receipt."""
        return dangling_destructive(self.by_id.values())
