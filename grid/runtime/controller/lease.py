"""The single-writer mutation lease beside the controller state file.

Automatic mode may only issue commands while this controller holds the lease. The lease file
(`<state>.lease`) names the holder, a `term` and an absolute expiry; every command is stamped
with (controller_term, controller_id, controller_lease_expires_at), and nodes refuse any command
from a lower term. The term increases on every takeover, never on a renewal, and never goes
below the highest term the controller state remembers (a deleted lease file cannot reissue an
old term).

`decide` is the pure rule; `LeaseFile` does the locked read-modify-write. A lease whose holder is
a dead local process (pid plus process-birth marker) is abandoned and may be taken over at once,
so a controller restarted after SIGKILL need not wait out the old expiry; a live holder, or one
on an unknown machine, keeps the lease until it expires.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from grid.fleet import GridError, read_json_file, read_stat

DEFAULT_TTL_S = 15.0


@dataclass(frozen=True)
class LeaseRecord:
    controller_id: str
    term: int
    expires_at: float
    acquired_at: float
    holder_pid: int = 0
    holder_marker: str = ""


@dataclass(frozen=True)
class LeaseDecision:
    granted: bool
    record: LeaseRecord | None  # what the file must say afterwards (None: unchanged)
    takeover: bool = False
    reason: str = ""


class Lease(Protocol):
    """What the controller needs of a mutation lease (the file's, or etcd's: etcd/lease.py)."""

    controller_id: str
    ttl_s: float
    held: LeaseRecord | None

    def acquire(self, now: float, *, floor_term: int = 0) -> LeaseDecision: ...

    def valid(self, now: float) -> bool: ...

    def release(self) -> None: ...

    def authority(self, now: float, max_term: int) -> dict[str, object]: ...


def decide(
    current: LeaseRecord | None,
    *,
    controller_id: str,
    now: float,
    ttl_s: float,
    holder_alive: bool,
    floor_term: int = 0,
    pid: int = 0,
    marker: str = "",
) -> LeaseDecision:
    """Grant, renew or refuse the lease (pure)."""
    if current is not None and current.controller_id == controller_id:
        renewed = LeaseRecord(
            controller_id=controller_id,
            term=max(current.term, floor_term),
            expires_at=max(current.expires_at, now + ttl_s),
            acquired_at=current.acquired_at,
            holder_pid=pid,
            holder_marker=marker,
        )
        return LeaseDecision(granted=True, record=renewed)
    if current is not None and current.expires_at > now and holder_alive:
        return LeaseDecision(
            granted=False,
            record=None,
            reason=f"controller {current.controller_id} holds term {current.term} until "
            f"{current.expires_at:.1f}",
        )
    base = max(current.term if current is not None else 0, floor_term)
    taken = LeaseRecord(
        controller_id=controller_id,
        term=base + 1,
        expires_at=now + ttl_s,
        acquired_at=now,
        holder_pid=pid,
        holder_marker=marker,
    )
    return LeaseDecision(granted=True, record=taken, takeover=True)


def process_marker(pid: int) -> str | None:
    """A process-birth marker (start time in clock ticks), or None when no such process lives."""
    if pid <= 0:
        return None
    stat = read_stat(pid)
    if stat is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return ""
        return ""
    if stat.state == "Z":
        return None  # zombie: the process has exited
    return str(stat.start_ticks)


def holder_is_alive(record: LeaseRecord) -> bool:
    if record.holder_pid <= 0:
        return True  # unknown holder: respect its expiry
    marker = process_marker(record.holder_pid)
    if marker is None:
        return False
    return not record.holder_marker or not marker or marker == record.holder_marker


def _record(data: object) -> LeaseRecord:
    """A lease record from decoded JSON, every field of its declared type (TypeError if not)."""
    if not isinstance(data, dict):
        raise TypeError("the lease file is not a JSON object")
    record = LeaseRecord(**data)
    numbers = (record.expires_at, record.acquired_at)
    if (
        not isinstance(record.controller_id, str)
        or not isinstance(record.term, int)
        or isinstance(record.term, bool)
        or record.term < 0
        or not all(isinstance(n, int | float) and not isinstance(n, bool) for n in numbers)
        or not isinstance(record.holder_pid, int)
        or not isinstance(record.holder_marker, str)
    ):
        raise TypeError("a lease field has the wrong type")
    return record


class LeaseFile:
    """`<state>.lease`, read and written under an exclusive lock file."""

    def __init__(self, path: str | Path, *, controller_id: str, ttl_s: float = DEFAULT_TTL_S):
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.controller_id = controller_id
        self.ttl_s = ttl_s
        self.held: LeaseRecord | None = None
        # Why the last read found the file unusable ("" when it was fine or absent).
        self.unreadable = ""
        self._pid = os.getpid()
        self._marker = process_marker(self._pid) or ""

    def read(self) -> LeaseRecord | None:
        """The lease the file records; None when there is none or it cannot be read (a torn,
        foreign or hostile file, e.g. one nested too deep: `unreadable` says why). Such a file
        counts as expired, and the next lease never goes below the controller's own term."""
        self.unreadable = ""
        try:
            return _record(read_json_file(self.path))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, TypeError) as exc:
            self.unreadable = str(exc)[:200] or type(exc).__name__
            return None

    def acquire(self, now: float, *, floor_term: int = 0) -> LeaseDecision:
        """Take or renew the lease; `self.held` says what this controller holds afterwards."""
        try:
            with self._locked():
                current = self.read()
                decision = decide(
                    current,
                    controller_id=self.controller_id,
                    now=now,
                    ttl_s=self.ttl_s,
                    holder_alive=holder_is_alive(current) if current is not None else False,
                    floor_term=floor_term,
                    pid=self._pid,
                    marker=self._marker,
                )
                if decision.granted and decision.record is not None:
                    self._write(decision.record)
                    self.held = decision.record
                else:
                    self.held = None
                return decision
        except OSError as exc:
            self.held = None
            raise GridError(
                "lease_unavailable",
                f"the controller lease file cannot be written ({exc.strerror})",
                fix="fix the permissions of the state folder",
            ) from None

    def valid(self, now: float) -> bool:
        return self.held is not None and self.held.expires_at > now

    def authority(self, now: float, max_term: int) -> dict[str, object]:
        """The status `authority` block: this controller leads unless another live controller
        holds the lease file now (a single machine has no leader URL to give)."""
        held = self.held
        if held is not None and held.expires_at > now:
            return authority_block("leader", held.term, self.controller_id)
        current = self.read()
        if (
            current is not None
            and current.controller_id != self.controller_id
            and current.expires_at > now
            and holder_is_alive(current)
        ):
            return authority_block("standby", current.term, self.controller_id)
        return authority_block(
            "leader", max(max_term, current.term if current else 0), self.controller_id
        )

    def release(self) -> None:
        """Give the lease up (a clean shutdown): expire it now, keeping its term."""
        if self.held is None:
            return
        with contextlib.suppress(OSError), self._locked():
            current = self.read()
            if current is not None and current.controller_id == self.controller_id:
                self._write(LeaseRecord(**{**asdict(current), "expires_at": 0.0}))
        self.held = None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _write(self, record: LeaseRecord) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(asdict(record), fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def authority_block(
    role: str, term: int, controller_id: str, url: str | None = None
) -> dict[str, object]:
    return {"role": role, "term": term, "controller_id": controller_id, "leader_url": url}
