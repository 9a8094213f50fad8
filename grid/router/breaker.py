"""Per-engine, per-model circuit breakers for outcomes the proxy observed (pure, in memory).

- a 429 opens a one-second cooldown at once;
- two consecutive transport or 5xx failures open the circuit, with exponential backoff
  (1 s, 2 s, 4 s, ... capped at 30 s);
- when the open period has passed, one half-open probe is admitted; its 2xx closes the circuit
  and resets the streak, its failure reopens it with the next backoff;
- a caller-caused 4xx neither counts nor resets (it says nothing about the engine's health).

Breakers only redirect later requests: the proxy never replays a failed POST. They are keyed by
(engine, model) so one broken model on a multi-model engine does not hide its healthy ones, and
they are never persisted (a restart starts every route closed).

Every number above is a default of `BreakerPolicy`; the controller reads overrides from the
`breaker` section of its config file (docs/openai.md, "Circuit breakers").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from grid.fleet import GridError, refuse_unknown

RATE_LIMIT_COOLDOWN_S = 1.0
FAILURES_TO_OPEN = 2
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
PROBE_TIMEOUT_S = 60.0  # a probe whose outcome never came back stops blocking the route
MAX_TRACKED = 4096

BreakerKey = tuple[str, str]  # (engine_id, model_id)


@dataclass(frozen=True)
class BreakerPolicy:
    """The breaker's numbers (spec defaults); validated on construction."""

    rate_limit_cooldown_s: float = RATE_LIMIT_COOLDOWN_S  # a 429 closes the route this long
    failures_to_open: int = FAILURES_TO_OPEN  # consecutive transport/5xx failures that open it
    first_backoff_s: float = FIRST_BACKOFF_S  # the first open period; doubled on each reopen
    max_backoff_s: float = MAX_BACKOFF_S  # the open period's cap
    probe_timeout_s: float = PROBE_TIMEOUT_S  # a lost half-open probe stops blocking after this
    max_tracked: int = MAX_TRACKED  # circuits kept in memory at most

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            integral = spec.name in ("failures_to_open", "max_tracked")
            ok = (
                isinstance(value, int) and not isinstance(value, bool) and value >= 1
                if integral
                else isinstance(value, int | float)
                and not isinstance(value, bool)
                and math.isfinite(value)
                and value > 0
            )
            if not ok:
                kind = (
                    "a whole number of at least 1" if integral else "a positive number of seconds"
                )
                raise GridError(
                    "invalid_breaker_config",
                    f"breaker setting {spec.name} must be {kind} (got {value!r})",
                    fix=f"correct `breaker.{spec.name}` in the controller's config.json",
                )
        if self.max_backoff_s < self.first_backoff_s:
            raise GridError(
                "invalid_breaker_config",
                "breaker setting max_backoff_s is below first_backoff_s",
                fix="raise `breaker.max_backoff_s` or lower `breaker.first_backoff_s`",
            )

    @classmethod
    def from_overrides(cls, overrides: dict[str, Any]) -> BreakerPolicy:
        """A policy from a config section: unknown names are refused, not ignored."""
        known = [spec.name for spec in fields(cls)]
        refuse_unknown("invalid_breaker_config", "breaker", overrides, known)
        return cls(**overrides)


class BreakerOutcome(StrEnum):
    SUCCESS = "success"  # 2xx
    RATE_LIMITED = "rate_limited"  # 429
    FAILURE = "failure"  # transport error or 5xx
    CALLER_ERROR = "caller_error"  # other 4xx (and anything not an engine verdict)


def classify_status(status: int | None) -> BreakerOutcome:
    """The breaker's reading of one upstream answer; None means no answer (transport)."""
    if status is None or status >= 500:
        return BreakerOutcome.FAILURE
    if status == 429:
        return BreakerOutcome.RATE_LIMITED
    if 200 <= status < 300:
        return BreakerOutcome.SUCCESS
    return BreakerOutcome.CALLER_ERROR


@dataclass
class _Circuit:
    backoff_s: float  # the next open period
    failures: int = 0
    open_until: float = 0.0
    tripped: bool = False  # has been opened: when it expires, it is half-open
    probe_since: float | None = None


class CircuitBreakers:
    def __init__(self, policy: BreakerPolicy | None = None) -> None:
        self.policy = policy or BreakerPolicy()
        self._circuits: dict[BreakerKey, _Circuit] = {}

    def __len__(self) -> int:
        return len(self._circuits)

    def available(self, key: BreakerKey, now: float) -> bool:
        """Whether a new request may go to this route now (reads, never claims)."""
        circuit = self._circuits.get(key)
        if circuit is None:
            return True
        if now < circuit.open_until:
            return False
        probing = (
            circuit.probe_since is not None
            and now - circuit.probe_since < self.policy.probe_timeout_s
        )
        return not (circuit.tripped and probing)

    def state(self, key: BreakerKey, now: float) -> str:
        circuit = self._circuits.get(key)
        if circuit is None:
            return "closed"
        if now < circuit.open_until:
            return "open"
        return "half_open" if circuit.tripped else "closed"

    def begin(self, key: BreakerKey, now: float) -> None:
        """A request is being sent: an expired circuit's single probe is now in flight."""
        circuit = self._circuits.get(key)
        if circuit is not None and circuit.tripped and now >= circuit.open_until:
            circuit.probe_since = now

    def record(self, key: BreakerKey, outcome: BreakerOutcome, now: float) -> None:
        if outcome is BreakerOutcome.SUCCESS:
            self._circuits.pop(key, None)
            return
        circuit = self._circuits.get(key)
        if outcome is BreakerOutcome.CALLER_ERROR:
            if circuit is not None:
                circuit.probe_since = None  # the engine answered: the next probe may go
            return
        if circuit is None:
            self._make_room()
            circuit = self._circuits[key] = _Circuit(backoff_s=self.policy.first_backoff_s)
        circuit.probe_since = None
        if outcome is BreakerOutcome.RATE_LIMITED:
            circuit.open_until = max(circuit.open_until, now + self.policy.rate_limit_cooldown_s)
            circuit.tripped = True
            return
        circuit.failures += 1
        if circuit.failures >= self.policy.failures_to_open:
            circuit.open_until = now + circuit.backoff_s
            circuit.backoff_s = min(self.policy.max_backoff_s, circuit.backoff_s * 2)
            circuit.tripped = True

    def _make_room(self) -> None:
        # Memory stays bounded whatever the clients do: forget the circuits closest to closing.
        # Room is made before the new circuit is added, which would otherwise be the one evicted.
        while len(self._circuits) >= self.policy.max_tracked:
            oldest = min(self._circuits, key=lambda k: self._circuits[k].open_until)
            del self._circuits[oldest]
