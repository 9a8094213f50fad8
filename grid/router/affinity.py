"""X-Grid-Affinity-Key: hashed at once, then rendezvous hashing among near-equivalent routes.

The raw key is validated (printable, at most 256 UTF-8 bytes) and replaced by a SHA-256 digest
before anything else sees it; only the digest is kept, and it is never forwarded upstream.
Rendezvous (highest-random-weight) hashing keeps a session on the same engine without a
session map: adding or removing an unrelated engine moves only the sessions of that engine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from grid.fleet import GridError

MAX_KEY_BYTES = 256


@dataclass(frozen=True)
class AffinityKey:
    """The one-way digest of a client's affinity key (hex); the raw key is gone."""

    digest: str

    def __repr__(self) -> str:  # a digest is not secret, but keep logs short
        return f"AffinityKey({self.digest[:12]}...)"


def hash_affinity_key(raw: str | None) -> AffinityKey | None:
    """None for no (or an empty) header; GridError `invalid_affinity_key` for a bad one."""
    if raw is None or raw == "":
        return None
    encoded = raw.encode("utf-8", "surrogatepass")
    if len(encoded) > MAX_KEY_BYTES or not raw.isprintable():
        raise GridError(
            "invalid_affinity_key",
            f"X-Grid-Affinity-Key must be printable text of at most {MAX_KEY_BYTES} UTF-8 bytes",
            fix="send a short opaque session id, or leave the header out",
            details={"http_status": 400},
        )
    return AffinityKey(hashlib.sha256(b"grid-affinity\x00" + encoded).hexdigest())


def _weight(key: AffinityKey, engine_id: str) -> bytes:
    return hashlib.sha256(f"{key.digest}\x00{engine_id}".encode()).digest()


def rendezvous_order(key: AffinityKey, engine_ids: Iterable[str]) -> list[str]:
    """Engines by descending rendezvous weight for this key (the first is the session's)."""
    return sorted(set(engine_ids), key=lambda e: (_weight(key, e), e), reverse=True)
