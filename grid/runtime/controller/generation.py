"""Minting plan generations (`PlanGeneration`, in grid/fleet/generation.py, is the vocabulary).

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

from grid.fleet import PlanGeneration  # the vocabulary; re-exported here

DIGEST_CHARS = 32

__all__ = ["GenerationCounter", "PlanGeneration", "input_digest", "new_epoch"]


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
