"""Refusals with a stable machine-readable code, a sentence, and a fix.

Every layer raises `GridError` (or a subclass) for bad input; the CLI prints the sentence,
the fix and the next command, and hides tracebacks unless GRID_DEBUG=1.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GridError(Exception):
    """A refusal: `code` is stable, `message` is one human sentence, `fix` says what to do."""

    code: str
    message: str
    fix: str = ""
    path: str = ""
    next_command: str = ""
    details: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        where = f" at {self.path}" if self.path else ""
        return f"[{self.code}]{where}: {self.message}"

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"code": self.code, "message": self.message}
        if self.path:
            out["path"] = self.path
        if self.fix:
            out["fix"] = self.fix
        if self.next_command:
            out["next_command"] = self.next_command
        return out


class SnapshotError(GridError):
    """A fleet snapshot that cannot be read or does not validate."""
