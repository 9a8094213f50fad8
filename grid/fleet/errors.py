"""Refusals with a stable machine-readable code, a sentence, and a fix.

Every layer raises `GridError` (or a subclass) for bad input; the CLI prints the sentence,
the fix and the next command, and hides tracebacks unless GRID_DEBUG=1.
"""

from __future__ import annotations

from collections.abc import Iterable
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


def refuse_unknown(code: str, section: str, given: Iterable[str], known: Iterable[str]) -> None:
    """A config section's misspelt names are refused by name, never silently ignored."""
    names = set(known)
    unknown = sorted(set(given) - names)
    if unknown:
        raise GridError(
            code,
            f"unknown {section} setting(s): {', '.join(unknown)}",
            fix=f"remove or correct them; the known ones are {', '.join(sorted(names))}",
        )


class SnapshotError(GridError):
    """A fleet snapshot that cannot be read or does not validate."""
