"""Plan generations: `epoch:sequence:digest`, ordered without trusting the wall clock.

The epoch is a random identity created with the controller state (a quarantined or lost state
starts a new epoch); the sequence is a persisted counter that only grows; the digest hashes the
plan's complete inputs. A new generation is minted only when the input digest changes, so an
idle fleet keeps one generation, and two generations of one epoch are ordered by sequence alone,
whatever the clocks did in between. Pure except for the random epoch.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from typing import Any

from grid.fleet.errors import GridError

SEQUENCE_DIGITS = 20
DIGEST_CHARS = 32


@dataclass(frozen=True)
class PlanGeneration:
    epoch: str
    sequence: int
    digest: str

    def __str__(self) -> str:
        return f"{self.epoch}:{self.sequence:0{SEQUENCE_DIGITS}d}:{self.digest}"

    @classmethod
    def parse(cls, text: str) -> PlanGeneration:
        parts = text.split(":")
        if len(parts) != 3 or not parts[0] or not parts[1].isdigit() or not parts[2]:
            raise GridError(
                "invalid_plan_generation",
                f"plan generation {text!r} is not epoch:sequence:digest",
                fix="send the plan_generation exactly as the controller issued it",
            )
        return cls(epoch=parts[0], sequence=int(parts[1]), digest=parts[2])

    def newer_than(self, other: PlanGeneration) -> bool | None:
        """True/False within one epoch; None when the epochs differ (not comparable)."""
        if self.epoch != other.epoch:
            return None
        return self.sequence > other.sequence


def new_epoch() -> str:
    return secrets.token_hex(8)


def input_digest(inputs: Any) -> str:
    """A stable hash of JSON-ready plan inputs (key order does not matter)."""
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


@dataclass
class GenerationCounter:
    epoch: str
    sequence: int = 0
    digest: str = ""

    @classmethod
    def fresh(cls) -> GenerationCounter:
        return cls(epoch=new_epoch())

    def advance(self, digest: str) -> tuple[PlanGeneration, bool]:
        """The generation for a plan with this input digest; True when it is a new one."""
        if self.sequence > 0 and digest == self.digest:
            return PlanGeneration(self.epoch, self.sequence, self.digest), False
        self.sequence += 1
        self.digest = digest
        return PlanGeneration(self.epoch, self.sequence, digest), True

    def to_state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "sequence": self.sequence, "digest": self.digest}

    @classmethod
    def from_state(cls, data: Any) -> GenerationCounter:
        if not isinstance(data, dict):
            return cls.fresh()
        epoch = data.get("epoch")
        sequence = data.get("sequence")
        digest = data.get("digest", "")
        if not isinstance(epoch, str) or not epoch or ":" in epoch:
            return cls.fresh()
        if not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 0:
            return cls.fresh()
        return cls(epoch=epoch, sequence=sequence, digest=digest if isinstance(digest, str) else "")
