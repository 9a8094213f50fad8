"""Atomic file writes shared by every layer that persists state (pure helpers over the OS).

A reader sees the old file or the new one, never a torn one: the text goes to a uniquely named
temporary file in the same folder, created with its final mode from the start (no window where
a secret is world-readable), fsynced, renamed over the target, and the folder is fsynced.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

# Grid's own state files nest a handful of levels; anything deeper is not ours, and a hostile
# depth would exhaust the interpreter's recursion while it is decoded or validated.
MAX_JSON_DEPTH = 64
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


class TooDeep(ValueError):
    """A JSON text nests deeper than `MAX_JSON_DEPTH` (a ValueError, like any undecodable text)."""


def json_depth(text: str) -> int:
    """The deepest `[`/`{` nesting of a JSON text (strings skipped), computed without recursion."""
    depth = deepest = 0
    for match in _BRACKETS.finditer(_STRINGS.sub("", text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def loads_bounded(text: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads` for a state file: a text nested deeper than `max_depth` raises `TooDeep`
    (never RecursionError), so every reader treats it as the undecodable file it is."""
    if json_depth(text) > max_depth:
        raise TooDeep(f"it nests deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except RecursionError:  # belt and braces: the scan above already bounds the depth
        raise TooDeep(f"it nests deeper than {max_depth} levels") from None


def read_json_file(path: Path, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A JSON state file, depth-checked (`loads_bounded`). Raises FileNotFoundError, OSError,
    or ValueError (undecodable, not UTF-8, or too deep)."""
    return loads_bounded(path.read_text(encoding="utf-8"), max_depth)


def fsync_dir(folder: Path) -> None:
    """Persist a rename in `folder`; filesystems that cannot open folders are skipped."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return  # the rename is still atomic, only its durability is the filesystem's
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str, mode: int = 0o600) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
