"""Durable engine state: the per-host engine key and one record per live child.

Layout of `<state_dir>/engines.json` (mode 0600, written atomically):

    {"schema_version": 1, "engine_key": "...",
     "engines": {"<model_id>": {"model_id": ..., "pid": ..., "port": ..., "argv": [...],
                                "model_path": ..., "executable": ..., "birth": {...},
                                "spawned_at": ...}}}

`<state_dir>/engine.keys` holds the same key, one per line, for llama-server's
`--api-key-file` (mode 0600). The key never travels through argv or the environment.
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grid.fleet import GridError, atomic_write_text
from grid.node.engines.discover import FoundChild, find_own_children
from grid.node.engines.proc import BirthMarker

STATE_FILE_NAME = "engines.json"
KEY_FILE_NAME = "engine.keys"
STATE_SCHEMA_VERSION = 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BirthRecord(_Strict):
    start_ticks: int
    boot_id: str

    def marker(self) -> BirthMarker:
        return BirthMarker(start_ticks=self.start_ticks, boot_id=self.boot_id)


class EngineRecord(_Strict):
    """What is written right after spawn (pid, port) and then enriched (executable, birth)."""

    model_id: str
    pid: int = Field(gt=0)
    port: int = Field(gt=0, lt=65536)
    argv: list[str]
    model_path: str
    executable: str | None = None
    birth: BirthRecord | None = None
    spawned_at: float
    runtime: str = "llama.cpp"  # the engine adapter that launched it (adapters.py)


class EngineStateDoc(_Strict):
    schema_version: int = STATE_SCHEMA_VERSION
    engine_key: str = Field(min_length=16)
    engines: dict[str, EngineRecord] = Field(default_factory=dict)


def _record_of(child: FoundChild) -> EngineRecord:
    identity = child.identity
    return EngineRecord(
        model_id=child.model_id,
        pid=identity.pid,
        port=child.port,
        argv=list(identity.argv),
        model_path=child.model_path,
        executable=identity.executable,
        birth=BirthRecord(start_ticks=identity.birth.start_ticks, boot_id=identity.birth.boot_id),
        spawned_at=time.time(),
    )


def _reason(exc: Exception) -> str:
    """Why the file was refused, naming fields and positions but never a value from it."""
    if isinstance(exc, ValidationError):
        fields = sorted({".".join(str(p) for p in e["loc"]) or "document" for e in exc.errors()})
        return f"invalid {', '.join(fields[:5])}" + (" ..." if len(fields) > 5 else "")
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON (line {exc.lineno}, column {exc.colno})"
    if isinstance(exc, OSError):
        return exc.strerror or type(exc).__name__
    return type(exc).__name__


class EngineStateStore:
    """Reads and writes the engine state file; the only writer of the engine key."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.state_path = state_dir / STATE_FILE_NAME
        self.key_path = state_dir / KEY_FILE_NAME

    def load_or_init(self) -> EngineStateDoc:
        """The stored document, or a new one with a freshly generated key (persisted at once)."""
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise GridError(
                code="engine_state_unwritable",
                message=f"Cannot create the engine state folder {self.state_dir}: {exc}.",
                fix="Choose a state folder this user can write.",
                next_command=f"ls -ld {self.state_dir.parent}",
            ) from exc
        if not self.state_path.exists():
            doc = self._rediscovered()
            self.save(doc)
        else:
            doc = self.read()
        self.write_key_file(doc.engine_key)
        return doc

    def _rediscovered(self) -> EngineStateDoc:
        """A fresh document that records the node's own children still running (an engine state
        moved aside, or lost, while they ran) and keeps the key they were started with."""
        found = find_own_children(self.state_dir, self.key_path)
        key = self._old_key() if found else None
        engines = {c.model_id: _record_of(c) for c in found}
        return EngineStateDoc(engine_key=key or secrets.token_urlsafe(32), engines=engines)

    def _old_key(self) -> str | None:
        try:
            lines = self.key_path.read_text(encoding="utf-8").split()
        except OSError:
            return None
        return lines[0] if lines and len(lines[0]) >= 16 else None

    def read(self) -> EngineStateDoc:
        """The stored document (creates nothing); GridError when missing, corrupt or newer."""
        try:
            raw: Any = json.loads(self.state_path.read_text(encoding="utf-8"))
            doc = EngineStateDoc.model_validate(raw)
        except (OSError, ValueError, RecursionError) as exc:
            # Never the exception's text: a validation error quotes the values it refused, and
            # the file holds the engine key. Only the failing field paths are named.
            raise GridError(
                code="engine_state_corrupt",
                message=f"The engine state file {self.state_path} cannot be read: "
                f"{_reason(exc)}.{self._running_note()}",
                fix="Inspect the file; if no engine is running, move it aside and start again.",
                path=str(self.state_path),
                next_command=f"mv {self.state_path} {self.state_path}.corrupt",
            ) from None
        if doc.schema_version != STATE_SCHEMA_VERSION:
            raise GridError(
                code="engine_state_version",
                message=(
                    f"The engine state file has schema_version {doc.schema_version}; "
                    f"this agent understands {STATE_SCHEMA_VERSION}."
                ),
                fix="Run the agent version that wrote it, or move the file aside.",
                path=str(self.state_path),
                next_command=f"mv {self.state_path} {self.state_path}.v{doc.schema_version}",
            )
        return doc

    def _running_note(self) -> str:
        found = find_own_children(self.state_dir, self.key_path)
        if not found:
            return ""
        pids = ", ".join(str(c.identity.pid) for c in found)
        return (
            f" {len(found)} engine process(es) of this node still run (PID {pids}); the agent "
            "finds them again (run folder, command line, birth marker) once the file is moved "
            "aside"
        )

    def save(self, doc: EngineStateDoc) -> None:
        """Atomic owner-only write; raises OSError on failure (the caller decides the fallout)."""
        atomic_write_text(self.state_path, doc.model_dump_json(indent=2) + "\n")

    def write_key_file(self, key: str) -> None:
        try:
            atomic_write_text(self.key_path, key + "\n")
        except OSError as exc:
            raise GridError(
                code="engine_state_unwritable",
                message=f"Cannot write the engine key file {self.key_path}: {exc}.",
                fix="Make the state folder writable by this user.",
                next_command=f"ls -ld {self.state_dir}",
            ) from exc
