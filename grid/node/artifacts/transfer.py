"""Byte transfer into a staging file: HTTP with Range resume, or a local copy; size-bounded.

Both writers append to the staging file from its current length, flush and fsync what they
received (so a cut connection keeps every byte that arrived), and stop the moment the stream
would pass the declared ceiling, deleting the staging file: oversized bytes are never the
declared artifact. Hashing and publishing belong to `artifacts.ArtifactStore`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path

import httpx

from grid.fleet import GridError

_CONTENT_RANGE_RE = re.compile(r"^bytes (?:(\d+)-(\d+)|\*)/(\d+|\*)$")


def _too_large(max_size_bytes: int, seen: int | None = None) -> GridError:
    observed = f" (at least {seen} bytes)" if seen is not None else ""
    return GridError(
        code="artifact_too_large",
        message=f"The artifact exceeds its declared ceiling of {max_size_bytes} bytes{observed}.",
        fix="Check the source; raise the profile's artifact size only if the file is right.",
    )


def _check_disk(staging: Path, needed_bytes: int) -> None:
    free = shutil.disk_usage(staging.parent).free
    if needed_bytes > free:
        raise GridError(
            code="artifact_disk_full",
            message=f"The artifact needs {needed_bytes} more bytes; {free} are free.",
            fix="Free disk space on the node, then retry the load.",
            next_command=f"df -h {staging.parent}",
        )


def _discard(staging: Path) -> None:
    with contextlib.suppress(OSError):
        staging.unlink()


def _current_size(staging: Path, max_size_bytes: int) -> int:
    size = staging.stat().st_size if staging.exists() else 0
    if size > max_size_bytes:
        _discard(staging)
        return 0
    return size


def copy_file_resumable(source: Path, staging: Path, max_size_bytes: int) -> int:
    """Copy `source` into `staging` after the bytes already there; returns bytes copied."""
    try:
        total = source.stat().st_size
    except OSError as exc:
        raise GridError(
            code="artifact_source_missing",
            message=f"The artifact source file {source} cannot be read: {exc}.",
            fix="Check the file:// path in the profile.",
            next_command=f"ls -l {source}",
        ) from exc
    if total > max_size_bytes:
        raise _too_large(max_size_bytes, total)
    offset = _current_size(staging, max_size_bytes)
    if offset > total:
        _discard(staging)
        offset = 0
    _check_disk(staging, total - offset)
    copied = 0
    with source.open("rb") as src, staging.open("ab") as dst:
        src.seek(offset)
        while block := src.read(1024 * 1024):
            if offset + copied + len(block) > max_size_bytes:
                dst.close()
                _discard(staging)
                raise _too_large(max_size_bytes, offset + copied + len(block))
            dst.write(block)
            copied += len(block)
        dst.flush()
        os.fsync(dst.fileno())
    return copied


class _Incomplete(Exception):
    """The stream ended before the length the server announced."""


class HttpTransfer:
    """One artifact download with bounded retries, each resuming with `Range: bytes=N-`."""

    def __init__(
        self,
        client: httpx.Client,
        *,
        url: str,
        staging: Path,
        max_size_bytes: int,
        max_attempts: int,
    ) -> None:
        self._client = client
        self._url = url
        self._staging = staging
        self._max = max_size_bytes
        self._max_attempts = max_attempts

    def run(self) -> int:
        """Download until the staging file is complete; returns the number of attempts."""
        attempts = 0
        while True:
            attempts += 1
            try:
                self._attempt()
                return attempts
            except (httpx.TransportError, _Incomplete) as exc:
                if attempts >= self._max_attempts:
                    kept = self._staging.stat().st_size if self._staging.exists() else 0
                    raise GridError(
                        code="artifact_transfer_interrupted",
                        message=(
                            f"The download from {self._url} was cut after {attempts} "
                            f"attempt(s) ({type(exc).__name__}); {kept} bytes are kept "
                            "for the next attempt."
                        ),
                        fix="Retry the load; it resumes where this one stopped.",
                        details={"partial_bytes": kept},
                        next_command="grid allocator node status",
                    ) from exc

    def _attempt(self) -> None:
        offset = _current_size(self._staging, self._max)
        # Identity encoding: Range offsets then count exactly the bytes written to disk.
        headers = {"Accept-Encoding": "identity"}
        if offset:
            headers["Range"] = f"bytes={offset}-"
        with self._client.stream("GET", self._url, headers=headers) as response:
            status = response.status_code
            if status == 416 and offset:
                self._handle_unsatisfiable(response, offset)
                return
            if status == 206 and offset:
                total = self._resume_total(response, offset)
            elif status == 200:
                offset = 0  # the server ignored the range: start from scratch
                total = _int_or_none(response.headers.get("content-length"))
            elif status >= 500 or status == 429:
                raise _Incomplete(f"HTTP {status}")
            else:
                raise GridError(
                    code="artifact_http_error",
                    message=f"{self._url} answered HTTP {status}.",
                    fix="Check the artifact source and the configured base URL.",
                )
            if total is not None and total > self._max:
                _discard(self._staging)
                raise _too_large(self._max, total)
            if total is not None:
                _check_disk(self._staging, total - offset)
            self._write_stream(response, offset, total)

    def _handle_unsatisfiable(self, response: httpx.Response, offset: int) -> None:
        """416: the partial may already hold every byte; otherwise start over."""
        match = _CONTENT_RANGE_RE.match(response.headers.get("content-range", ""))
        total = _int_or_none(match.group(3)) if match else None
        if total != offset:
            _discard(self._staging)
            raise _Incomplete("range not satisfiable for the kept partial")

    def _resume_total(self, response: httpx.Response, offset: int) -> int | None:
        match = _CONTENT_RANGE_RE.match(response.headers.get("content-range", ""))
        if match is None or match.group(1) is None or int(match.group(1)) != offset:
            _discard(self._staging)
            raise _Incomplete("the server resumed at a different offset")
        return _int_or_none(match.group(3))

    def _write_stream(self, response: httpx.Response, offset: int, total: int | None) -> None:
        mode = "ab" if offset else "wb"
        received = 0
        with self._staging.open(mode) as out:
            try:
                # iter_raw() without a size hands over each network read as it arrives, so a
                # cut connection loses no byte that was received (a re-chunker would).
                for chunk in response.iter_raw():
                    if offset + received + len(chunk) > self._max:
                        out.close()
                        _discard(self._staging)
                        raise _too_large(self._max, offset + received + len(chunk))
                    out.write(chunk)
                    received += len(chunk)
            finally:
                if not out.closed:
                    out.flush()
                    os.fsync(out.fileno())
        if total is not None and offset + received < total:
            raise _Incomplete(f"received {offset + received} of {total} bytes")


def _int_or_none(value: str | None) -> int | None:
    if value is None or not value.isdigit():
        return None
    return int(value)
