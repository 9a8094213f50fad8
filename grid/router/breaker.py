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
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

RATE_LIMIT_COOLDOWN_S = 1.0
FAILURES_TO_OPEN = 2
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 30.0
PROBE_TIMEOUT_S = 60.0  # a probe whose outcome never came back stops blocking the route
MAX_TRACKED = 4096

BreakerKey = tuple[str, str]  # (engine_id, model_id)


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
    failures: int = 0
    open_until: float = 0.0
    backoff_s: float = FIRST_BACKOFF_S
    tripped: bool = False  # has been opened: when it expires, it is half-open
    probe_since: float | None = None


class CircuitBreakers:
    def __init__(self) -> None:
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
        probing = circuit.probe_since is not None and now - circuit.probe_since < PROBE_TIMEOUT_S
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
            circuit = self._circuits[key] = _Circuit()
        circuit.probe_since = None
        if outcome is BreakerOutcome.RATE_LIMITED:
            circuit.open_until = max(circuit.open_until, now + RATE_LIMIT_COOLDOWN_S)
            circuit.tripped = True
            return
        circuit.failures += 1
        if circuit.failures >= FAILURES_TO_OPEN:
            circuit.open_until = now + circuit.backoff_s
            circuit.backoff_s = min(MAX_BACKOFF_S, circuit.backoff_s * 2)
            circuit.tripped = True

    def _make_room(self) -> None:
        # Memory stays bounded whatever the clients do: forget the circuits closest to closing.
        # Room is made before the new circuit is added, which would otherwise be the one evicted.
        while len(self._circuits) >= MAX_TRACKED:
            oldest = min(self._circuits, key=lambda k: self._circuits[k].open_until)
            del self._circuits[oldest]
