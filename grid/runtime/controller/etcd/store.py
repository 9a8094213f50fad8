"""The controller state document in etcd, written only under the leader's fence.

Layout under the cluster prefix P:
    P/state/manifest      {"format": 1, "inline": {field: value}, "parts": {field: [sha...]}}
    P/state/blob/<sha>    one chunk (at most CHUNK_BYTES) of a large field's JSON text
    P/quarantine/<rev>/…  raw copies of a manifest (and its blobs) that did not decode

Each top-level field of the document (`state.py`) is one part. A small part lives inline in the
manifest; a large one (command records, demand history, evidence, timings…) is split into
content-addressed chunks, so no value comes near etcd's request limit (1.5 MiB by default) and
an unchanged part is never written again. A save writes the new chunks, then the manifest and
the deletion of chunks no longer referenced; every transaction compares the leader's fence
(`P/term` is its term and `P/leader` carries its etcd lease), so a deposed leader's save fails
(`state_fenced`) and changes nothing. The manifest is the commit point: a reader sees the old
document or the new one, never a mix.

A manifest or chunk that does not decode is copied under `P/quarantine/<revision>/` and the
controller starts clean in recommend mode, as with the state file; the leader also removes the
unusable manifest (fenced), a standby only copies it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grid.fleet import GridError, json_depth
from grid.runtime.controller.etcd.client import (
    EtcdClient,
    cmp_lease,
    cmp_value,
    op_delete,
    op_get,
    op_put,
)
from grid.runtime.controller.etcd.lease import Fence
from grid.runtime.controller.store import MAX_DEPTH, LoadResult

CHUNK_BYTES = 256 * 1024
INLINE_BYTES = 2048
TXN_BYTES = 1024 * 1024  # request budget per transaction (etcd's default limit is 1.5 MiB)
TXN_OPS = 100  # etcd's default --max-txn-ops is 128
FORMAT = 1


def split_document(document: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[bytes]]]:
    """(inline fields, large fields as JSON chunks) of a document (pure)."""
    inline: dict[str, Any] = {}
    parts: dict[str, list[bytes]] = {}
    for name in sorted(document):
        text = json.dumps(
            document[name], sort_keys=True, allow_nan=False, separators=(",", ":")
        ).encode()
        if len(text) <= INLINE_BYTES:
            inline[name] = document[name]
        else:
            parts[name] = [text[i : i + CHUNK_BYTES] for i in range(0, len(text), CHUNK_BYTES)]
    return inline, parts


def digest(chunk: bytes) -> str:
    return hashlib.sha256(chunk).hexdigest()


class EtcdStore:
    def __init__(
        self,
        client: EtcdClient,
        prefix: str,
        *,
        fence: Callable[[], Fence | None],
        term_key: str,
        leader_key: str,
        local_path: Path | None = None,
    ) -> None:
        self.client = client
        # This controller's own folder (state.json beside config.json is never written): the
        # enrollment book lives beside it.
        self.path = local_path
        self.prefix = prefix
        self.fence = fence
        self.term_key = term_key
        self.leader_key = leader_key
        self.manifest_revision = 0  # of the manifest last read or written here
        self.written_revision = 0  # of the manifest this controller itself wrote last
        self._referenced: set[str] = set()  # chunk digests the current manifest names
        self._texts: dict[tuple[str, ...], bytes] = {}  # a part's chunk digests -> its JSON text
        self._durable = True
        self.load_failed = False  # the last load could not reach etcd (not a bad document)

    @property
    def manifest_key(self) -> str:
        return f"{self.prefix}/state/manifest"

    def blob_key(self, sha: str) -> str:
        return f"{self.prefix}/state/blob/{sha}"

    @property
    def durable(self) -> bool:
        return self._durable

    @property
    def location(self) -> str:
        return self.client.target.url

    # ------------------------------------------------------------------ reading
    def load(self) -> LoadResult:
        self._durable, self.load_failed = True, False
        try:
            found = self.client.get(self.manifest_key)
        except GridError as err:
            self._durable, self.load_failed = False, True
            return LoadResult(
                document=None,
                warning_code="state_unreadable",
                warning=f"the controller state cannot be read from etcd ({err.message}); "
                "automatic mode is refused until it can",
            )
        if found is None:
            self.manifest_revision = 0
            self._referenced = set()
            return LoadResult(document=None)
        self.manifest_revision = found.mod_revision
        try:
            return LoadResult(document=self._decode(found.value))
        except GridError as err:
            if err.code.startswith("etcd"):
                self._durable, self.load_failed = False, True
                return LoadResult(None, "state_unreadable", f"the state chunks: {err.message}")
            return self.quarantine(err.message, raw=found.value)
        except (ValueError, KeyError, TypeError, RecursionError, UnicodeDecodeError) as exc:
            why = f"it is not a valid state document ({type(exc).__name__})"
            return self.quarantine(why, raw=found.value)

    def _decode(self, raw: bytes) -> dict[str, Any]:
        text = raw.decode("utf-8")
        if json_depth(text) > MAX_DEPTH:
            raise ValueError("too deep")
        manifest = json.loads(text)
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ValueError("not a manifest")
        document = dict(manifest["inline"])
        parts: dict[str, list[str]] = manifest["parts"]
        fetch = sorted(
            {s for shas in parts.values() if tuple(shas) not in self._texts for s in shas}
        )
        chunks = self._fetch(fetch)
        texts: dict[tuple[str, ...], bytes] = {}
        for name, shas in parts.items():
            key = tuple(shas)
            body = self._texts.get(key)
            if body is None:
                if any(digest(chunks[s]) != s for s in shas):
                    raise ValueError(f"a chunk of {name} does not match its digest")
                body = b"".join(chunks[s] for s in shas)
            part = body.decode("utf-8")
            if json_depth(part) > MAX_DEPTH:
                raise ValueError("too deep")
            document[name] = json.loads(part)
            texts[key] = body
        self._texts = texts
        self._referenced = {s for key in texts for s in key}
        return document

    def _fetch(self, wanted: list[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for start in range(0, len(wanted), TXN_OPS):
            batch = wanted[start : start + TXN_OPS]
            result = self.client.txn([], [op_get(self.blob_key(s)) for s in batch])
            for sha, rows in zip(batch, result.ranges(), strict=True):
                if not rows:
                    raise KeyError(f"missing state chunk {sha}")
                out[sha] = rows[0].value
        return out

    def quarantine(self, why: str, *, raw: bytes | None = None) -> LoadResult:
        """Copy an unusable manifest aside; the leader also removes it (fenced)."""
        revision = self.manifest_revision
        target = f"{self.prefix}/quarantine/{revision}"
        try:
            if raw is None:
                found = self.client.get(self.manifest_key)
                raw = found.value if found is not None else b""
            self.client.put(f"{target}/manifest", raw)
            fence = self.fence()
            if fence is not None:
                self.client.txn(self.fence_compare(fence), [op_delete(self.manifest_key)])
        except GridError as err:
            self._durable = False
            return LoadResult(
                document=None,
                warning_code="state_quarantine_failed",
                warning=f"the controller state in etcd was unusable because {why}, and it "
                f"could not be copied aside ({err.message}); automatic mode is refused",
            )
        self._referenced = set()
        self._texts = {}
        return LoadResult(
            document=None,
            warning_code="state_quarantined",
            warning=f"the controller state in etcd was unusable because {why}; it was copied "
            f"to {target} and a clean controller started in recommend mode",
        )

    # ------------------------------------------------------------------ writing
    def fence_compare(self, fence: Fence) -> list[dict[str, Any]]:
        return [
            cmp_value(self.term_key, str(fence.term)),
            cmp_lease(self.leader_key, fence.lease_id),
        ]

    def save(self, document: dict[str, Any]) -> None:
        fence = self.fence()
        if fence is None:
            raise _fenced_error("this controller does not hold the mutation lease")
        inline, parts = split_document(document)
        refs = {name: [digest(c) for c in chunks] for name, chunks in parts.items()}
        manifest = json.dumps(
            {"format": FORMAT, "inline": inline, "parts": refs},
            sort_keys=True,
            allow_nan=False,
            separators=(",", ":"),
        )
        wanted = {sha for shas in refs.values() for sha in shas}
        new_chunks = {
            sha: chunk
            for name, chunks in parts.items()
            for sha, chunk in zip(refs[name], chunks, strict=True)
            if sha not in self._referenced
        }
        stale = sorted(self._referenced - wanted)
        compare = self.fence_compare(fence)
        batches = _batches([op_put(self.blob_key(s), c) for s, c in sorted(new_chunks.items())])
        final = [op_put(self.manifest_key, manifest)] + [op_delete(self.blob_key(s)) for s in stale]
        if (
            len(batches) <= 1
            and _size(final) + sum(_size(b) for b in batches) < TXN_BYTES
            and (len(final) + sum(len(b) for b in batches) <= TXN_OPS)
        ):
            batches = [[*(batches[0] if batches else []), *final]]
        else:
            batches += _batches(final)
        revision = 0
        for ops in batches:
            try:
                result = self.client.txn(compare, ops)
            except GridError as err:
                raise GridError(
                    "state_write_failed",
                    f"the controller state could not be written to etcd ({err.message})",
                    fix=err.fix or "bring the etcd cluster back",
                    next_command="grid allocator status",
                ) from None
            if not result.succeeded:
                raise _fenced_error("another controller took the mutation lease")
            revision = result.revision
        self._referenced = wanted
        self._texts = {tuple(refs[n]): b"".join(chunks) for n, chunks in parts.items()}
        self.manifest_revision = self.written_revision = revision


def _size(ops: list[dict[str, Any]]) -> int:
    return sum(len(json.dumps(op)) for op in ops)


def _batches(ops: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for op in ops:
        n = len(json.dumps(op))
        if current and (size + n > TXN_BYTES or len(current) >= TXN_OPS):
            out.append(current)
            current, size = [], 0
        current.append(op)
        size += n
    if current:
        out.append(current)
    return out


def _fenced_error(why: str) -> GridError:
    return GridError(
        "state_fenced",
        f"the controller state was not written: {why} (a standby or deposed leader never writes)",
        fix="send mutations to the leader (its URL is in `grid allocator status`)",
        next_command="grid allocator status",
        details={"http_status": 503},
    )
