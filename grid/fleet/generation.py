"""Plan generations, `epoch:sequence:digest`: the identity a command carries from controller to
node (vocabulary shared by the controller, which mints them, and the node, which fences on them).

The epoch is a random identity created with the controller state; the sequence only grows; the
digest hashes the plan's complete inputs. Two generations of one epoch are ordered by sequence
alone, whatever the clocks did in between; generations of different epochs are not comparable.
"""

from __future__ import annotations

from dataclasses import dataclass

from grid.fleet.errors import GridError

SEQUENCE_DIGITS = 20


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
