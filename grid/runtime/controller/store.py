"""Durable controller state: one JSON document written atomically, a corrupt file quarantined.

The store knows nothing about what the document means; `state.py` gives it a schema. Writes go
to a temporary file in the same folder, are fsynced, renamed over the old file and the folder is
fsynced, so a crash leaves either the old or the new document, never a torn one.

A file that cannot be decoded at startup is renamed to `<name>.corrupt-<n>` (never deleted: an
operator may want it back) and the controller starts clean with a warning. If the quarantine
rename fails, the store is not durable: the controller refuses automatic mode rather than
overwrite evidence or run mutations with non-durable intent. A store without a path (`MemoryStore`)
is never durable either.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from grid.fleet import MAX_JSON_DEPTH, GridError, atomic_write_text, fsync_dir, json_depth

MAX_QUARANTINED = 1000  # `<name>.corrupt-<n>` suffixes tried before giving up
MAX_DEPTH = MAX_JSON_DEPTH  # the depth every Grid state file is checked against (files.py)


@dataclass(frozen=True)
class LoadResult:
    """What startup found: a decoded document (or None) and an operator-visible warning."""

    document: dict[str, Any] | None
    warning_code: str = ""
    warning: str = ""


class Store(Protocol):
    @property
    def durable(self) -> bool: ...

    @property
    def location(self) -> str: ...

    def load(self) -> LoadResult: ...

    def quarantine(self, why: str) -> LoadResult: ...

    def save(self, document: dict[str, Any]) -> None: ...


class StateStore:
    """A JSON document at `path`, written atomically."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._durable = True

    @property
    def durable(self) -> bool:
        return self._durable

    @property
    def location(self) -> str:
        return str(self.path)

    def load(self) -> LoadResult:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return LoadResult(document=None)
        except OSError as exc:
            self._durable = False
            return LoadResult(
                document=None,
                warning_code="state_unreadable",
                warning=f"the controller state file cannot be read ({exc.strerror}); automatic "
                "mode is refused until it can",
            )
        try:
            text = raw.decode("utf-8")
            if json_depth(text) > MAX_DEPTH:
                return self.quarantine(f"it nests deeper than {MAX_DEPTH} levels")
            document = json.loads(text)
            if not isinstance(document, dict):
                raise ValueError("the document is not a JSON object")
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            return self.quarantine(f"it is not valid JSON ({type(exc).__name__})")
        return LoadResult(document=document)

    def quarantine(self, why: str) -> LoadResult:
        """Move an unusable state file aside so that a clean controller can start."""
        target = self._free_quarantine_name()
        try:
            if target is None:
                raise OSError("no free quarantine name")
            os.replace(self.path, target)
            fsync_dir(self.path.parent)
        except OSError:
            self._durable = False
            return LoadResult(
                document=None,
                warning_code="state_quarantine_failed",
                warning=f"the controller state file was unusable because {why}, and it could "
                "not be moved aside; the controller runs without durable state and refuses "
                "automatic mode",
            )
        return LoadResult(
            document=None,
            warning_code="state_quarantined",
            warning=f"the controller state file was unusable because {why}; it was moved to "
            f"{target.name} and a clean controller started in recommend mode",
        )

    def _free_quarantine_name(self) -> Path | None:
        for n in range(1, MAX_QUARANTINED + 1):
            candidate = self.path.with_name(f"{self.path.name}.corrupt-{n}")
            if not candidate.exists():
                return candidate
        return None

    def save(self, document: dict[str, Any]) -> None:
        """Write atomically; raises GridError `state_write_failed` when the disk refuses.

        A store that is not durable writes nothing (see the module docstring).
        """
        if not self._durable:
            # Never overwrite a file that could not be quarantined; the controller already
            # refuses automatic mode and shows the warning.
            return
        text = json.dumps(document, sort_keys=True, allow_nan=False, separators=(",", ":"))
        try:
            atomic_write_text(self.path, text, 0o600)
        except OSError as exc:
            raise GridError(
                "state_write_failed",
                f"the controller state could not be written ({exc.strerror})",
                fix="free disk space or fix the permissions of the state folder",
            ) from None


class MemoryStore:
    """No durable path: the controller works in observe and recommend mode only."""

    def __init__(self) -> None:
        self.document: dict[str, Any] | None = None
        self.saves = 0

    @property
    def durable(self) -> bool:
        return False

    @property
    def location(self) -> str:
        return ""

    def load(self) -> LoadResult:
        return LoadResult(document=None)

    def quarantine(self, why: str) -> LoadResult:
        return LoadResult(document=None)

    def save(self, document: dict[str, Any]) -> None:
        # Kept so that status can be served, but it survives nothing.
        self.document = json.loads(json.dumps(document, allow_nan=False))
        self.saves += 1
