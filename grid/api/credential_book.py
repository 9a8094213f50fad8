"""The node credentials this controller issued: listed, revoked, checked on every node request.

`<state-dir>/node-credentials.json` (owner-only, written atomically, depth-checked like
state.json) keeps one row per credential: its id (the payload's nonce), its host, when it was
issued and expires, how it was issued (`token write`, an enrollment, a node start on this
machine) and when it was revoked. No token and no key is kept, so the file is not a credential.

- `issue` is the one path that mints a credential (every route that hands one out uses it).
- `check` refuses a revoked credential (`revoked_node_credential`, 403): revocation takes effect
  at the host's next request. A valid credential the book has never seen (minted before the
  book existed) is recorded as `seen` at its first use, so every credential in use can be listed
  and revoked.
- `revoke` marks one credential, or every credential of a host (also those not yet seen, by
  issue time), revoked, durably before it answers.

An unreadable book is moved aside (`node-credentials.json.corrupt-<n>`) and the controller warns
(`credential_book_quarantined`): the revocations it held must be made again.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from grid.api.auth import Credentials, NodeIdentity
from grid.fleet import GridError, atomic_write_text, read_json_file
from grid.fleet.operator import CredentialRow as CredentialView
from grid.fleet.operator import IssuedCredential

BOOK_NAME = "node-credentials.json"
MAX_ROWS = 4096  # expired rows are pruned beyond this
SOURCES = ("token_write", "enrollment", "seen")


@dataclass
class CredentialRow:
    credential_id: str
    host_id: str
    expires_at: float
    issued_at: float | None = None
    source: str = "token_write"
    revoked_at: float | None = None

    def view(self, now: float, last_seen_at: float | None) -> CredentialView:
        state = "revoked" if self.revoked_at is not None else "valid"
        if state == "valid" and self.expires_at <= now:
            state = "expired"
        return CredentialView(**asdict(self), state=state, last_seen_at=last_seen_at)


def _row(data: object) -> CredentialRow:
    if not isinstance(data, dict):
        raise TypeError("a credential row is not an object")
    row = CredentialRow(**data)
    stamps = (row.expires_at, row.issued_at, row.revoked_at)
    if not (
        isinstance(row.credential_id, str)
        and isinstance(row.host_id, str)
        and row.source in SOURCES
        and all(s is None or isinstance(s, int | float) for s in stamps)
    ):
        raise TypeError("a credential row field has the wrong type")
    return row


def _revoked_error() -> GridError:
    return GridError(
        "revoked_node_credential",
        "this node credential was revoked by the operator",
        fix="ask the operator for a fresh credential (grid allocator token write FILE "
        "--host-id ID, or an enrollment token)",
        next_command="grid allocator token write FILE --host-id ID",
        details={"http_status": 403},
    )


class CredentialBook:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.rows: dict[str, CredentialRow] = {}
        self.host_revoked_before: dict[str, float] = {}  # host -> credentials issued earlier
        self.last_seen: dict[str, float] = {}  # memory only
        self.warning = ""  # set when an unreadable book was moved aside
        self._load()

    # -- persistence -----------------------------------------------------------------------
    def _load(self) -> None:
        if self.path is None:
            return
        try:
            data = read_json_file(self.path)
            if not isinstance(data, dict) or data.get("schema_version") != 1:
                raise TypeError("not a schema-1 credential book")
            rows = [_row(r) for r in data.get("credentials", [])]
            before = data.get("host_revoked_before", {})
            if not isinstance(before, dict) or not all(
                isinstance(v, int | float) for v in before.values()
            ):
                raise TypeError("host_revoked_before is malformed")
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError) as exc:
            self.warning = self._quarantine(str(exc)[:160] or type(exc).__name__)
            return
        self.rows = {r.credential_id: r for r in rows}
        self.host_revoked_before = {str(k): float(v) for k, v in before.items()}

    def _quarantine(self, why: str) -> str:
        assert self.path is not None
        for n in range(1, 1000):
            target = self.path.with_name(f"{self.path.name}.corrupt-{n}")
            if not target.exists():
                with contextlib.suppress(OSError):
                    os.replace(self.path, target)
                    return (
                        f"the node credential book {self.path} could not be read ({why}); it "
                        f"was moved to {target.name}, so the revocations it held are lost: "
                        "revoke those credentials again"
                    )
                break
        return f"the node credential book {self.path} could not be read ({why})"

    def _save(self, now: float) -> None:
        if self.path is None:
            return
        if len(self.rows) > MAX_ROWS:
            for key in sorted(self.rows, key=lambda k: self.rows[k].expires_at):
                if len(self.rows) <= MAX_ROWS:
                    break
                if self.rows[key].expires_at <= now:
                    del self.rows[key]
        document = {
            "schema_version": 1,
            "credentials": [asdict(r) for _k, r in sorted(self.rows.items())],
            "host_revoked_before": dict(sorted(self.host_revoked_before.items())),
        }
        try:
            atomic_write_text(self.path, json.dumps(document, indent=1), 0o600)
        except OSError as exc:
            raise GridError(
                "credential_book_write_failed",
                f"the node credential book could not be written ({exc.strerror})",
                fix="free disk space or fix the permissions of the state folder, then retry",
                details={"http_status": 503},
            ) from None

    # -- the three operations ----------------------------------------------------------------
    def issue(
        self, credentials: Credentials, host_id: str, *, now: float, ttl_s: float, source: str
    ) -> IssuedCredential:
        """Mint a credential for `host_id`, record it durably, and return what the caller
        hands out: token, reply key, expiry and id."""
        token, expires = credentials.mint_node_token(host_id, now=now, ttl_s=ttl_s)
        identity = credentials.verify_node_token(token, now=now)
        with self._lock:
            self.rows[identity.credential_id] = CredentialRow(
                identity.credential_id, host_id, expires, now, source
            )
            self._save(now)
        return IssuedCredential(
            host_id=host_id,
            token=token,
            reply_key=identity.reply_key,
            expires_at=expires,
            credential_id=identity.credential_id,
        )

    def _revoked(self, identity: NodeIdentity) -> bool:
        row = self.rows.get(identity.credential_id)
        cutoff = self.host_revoked_before.get(identity.host_id)
        issued = identity.issued_at if identity.issued_at is not None else 0.0
        return (row is not None and row.revoked_at is not None) or (
            cutoff is not None and issued < cutoff
        )

    def revoked(self, identity: NodeIdentity) -> bool:
        """Whether this credential is revoked now (one credential, or its host's before then)."""
        with self._lock:
            return self._revoked(identity)

    def check(self, identity: NodeIdentity, now: float) -> None:
        """Refuse a revoked credential; record a valid one never seen before."""
        key = identity.credential_id
        with self._lock:
            row = self.rows.get(key)
            if self._revoked(identity):
                raise _revoked_error()
            self.last_seen[key] = now
            if row is None and key:
                self.rows[key] = CredentialRow(
                    key, identity.host_id, identity.expires_at, identity.issued_at, "seen"
                )
                with contextlib.suppress(GridError):  # listed next time even if not durable
                    self._save(now)

    def revoke(self, *, credential_id: str | None, host_id: str | None, now: float) -> list[str]:
        """Revoke one credential or every credential of a host; the ids revoked."""
        with self._lock:
            if credential_id is not None:
                row = self.rows.get(credential_id)
                if row is None:
                    raise GridError(
                        "unknown_node_credential",
                        f"no node credential with id {credential_id[:40]!r} is known here",
                        fix="list them with `grid allocator node-credential list`",
                        next_command="grid allocator node-credential list",
                        details={"http_status": 404},
                    )
                rows = [row]
            else:
                assert host_id is not None
                rows = [r for r in self.rows.values() if r.host_id == host_id]
                self.host_revoked_before[host_id] = now
            for row in rows:
                if row.revoked_at is None:
                    row.revoked_at = now
            self._save(now)
            return sorted(r.credential_id for r in rows)

    def listing(self, now: float, host_id: str | None = None) -> list[CredentialView]:
        with self._lock:
            rows = [r for r in self.rows.values() if host_id is None or r.host_id == host_id]
            return [
                r.view(now, self.last_seen.get(r.credential_id))
                for r in sorted(rows, key=lambda r: (r.host_id, r.issued_at or 0.0))
            ]
