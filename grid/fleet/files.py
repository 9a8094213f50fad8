"""Atomic file writes shared by every layer that persists state (pure helpers over the OS).

A reader sees the old file or the new one, never a torn one: the text goes to a uniquely named
temporary file in the same folder, created with its final mode from the start (no window where
a secret is world-readable), fsynced, renamed over the target, and the folder is fsynced.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


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
