"""Client keys for the OpenAI-compatible surface (/v1): who may send inference, and how much.

`grid allocator key create NAME` issues a bearer key (`gk1_...`), shown once; only its SHA-256
is kept, in `<state-dir>/client_keys.json` (mode 0600, atomic writes), with its name, a short
prefix for recognition and its creation (and revocation) time. `ClientKeyGate`, a pure ASGI
middleware in front of every route, lets a request under /v1/ through only with
`Authorization: Bearer <key>` of a live key, or the operator capability (the operator may do
anything); otherwise 401 in OpenAI's error shape, before any routing, so every /v1 route
(chat, completions, embeddings, models, even an unknown path) is covered by this one rule.

Open access (no key needed) is an explicit setting (`grid up --open-access`, `open_access` in
config.json) and only for a controller bound to loopback: the server refuses to start with it on
any other address (`open_access_not_loopback`). With open access a request that presents a valid
key is still counted for it; any other request counts as `anonymous`.

Requests are counted per key name (`operator` and `anonymous` included) in memory, since the
controller started; status (`client_keys`) and /metrics (`grid_client_requests_total`) show
them. A key is never logged, stored in clear or returned after its creation.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grid.api.limits import send_json
from grid.api.openai_errors import openai_body
from grid.fleet.errors import GridError
from grid.fleet.files import atomic_write_text
from grid.wire import is_loopback

KEYS_NAME = "client_keys.json"
KEY_PREFIX = "gk1_"
NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
OPERATOR, ANONYMOUS = "operator", "anonymous"
MAX_KEY_CHARS = 256
MAX_KEYS = 10_000
V1_PREFIX = "/v1/"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()


@dataclass
class KeyRecord:
    name: str
    sha256: str
    prefix: str  # the first characters of the key, to recognise it (not enough to use it)
    created_at: float
    revoked_at: float | None = None


def check_open_access(host: str, open_access: bool) -> None:
    """Open access (no client key on /v1) only on a loopback bind."""
    if open_access and not is_loopback(host):
        raise GridError(
            "open_access_not_loopback",
            f"open access to /v1 (no client key) is allowed only on loopback, and this "
            f"controller listens on {host}",
            fix="drop --open-access and issue client keys, or bind to 127.0.0.1",
            next_command="grid allocator key create NAME",
        )


def _unreadable(path: Path, why: str) -> GridError:
    return GridError(
        "client_keys_unreadable",
        f"the client key file {path} cannot be read ({why}); the controller does not start "
        "without it, so no key is silently lost",
        fix=f"restore {path} from a backup, or move it aside (every client key is then gone "
        "and must be issued again)",
        next_command=f"mv {path} {path}.corrupt",
    )


class ClientKeys:
    """The key file and the per-key request counts (thread-safe)."""

    def __init__(
        self, path: Path | None, *, open_access: bool = False, operator_token: str = ""
    ) -> None:
        self.path = path
        self.open_access = open_access
        self._operator = operator_token
        self._lock = threading.Lock()
        self._records: dict[str, KeyRecord] = {}
        self._by_digest: dict[str, str] = {}
        self.requests: dict[str, int] = {}
        self.last_used_at: dict[str, float] = {}
        self._load()

    # ------------------------------------------------------------------ the file

    def _load(self) -> None:
        if self.path is None:  # memory only
            return
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _unreadable(self.path, exc.strerror or type(exc).__name__) from None
        try:
            doc = json.loads(raw)
            rows = doc["keys"]
            records = [KeyRecord(**row) for row in rows]
        except (ValueError, KeyError, TypeError):
            raise _unreadable(self.path, "not a client key document") from None
        for record in records:
            self._records[record.name] = record
        self._index()

    def _index(self) -> None:
        self._by_digest = {r.sha256: r.name for r in self._records.values() if r.revoked_at is None}

    def _save(self) -> None:
        if self.path is None:
            return
        doc = {"schema_version": 1, "keys": [asdict(r) for r in self._records.values()]}
        atomic_write_text(self.path, json.dumps(doc, indent=1) + "\n", 0o600)

    # ------------------------------------------------------------------ administration

    def create(self, name: str, now: float) -> tuple[str, KeyRecord]:
        """A new key for `name` (the plain key is returned once and never kept)."""
        if not NAME_RE.match(name) or name in (OPERATOR, ANONYMOUS):
            raise GridError(
                "invalid_key_name",
                f"{name!r} is not a client key name (1 to 64 letters, digits, . _ -; not "
                f"{OPERATOR!r} or {ANONYMOUS!r})",
                fix="pick a name such as team-search or laptop-ana",
                next_command="grid allocator key create NAME",
                details={"http_status": 422},
            )
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        with self._lock:
            current = self._records.get(name)
            if current is not None and current.revoked_at is None:
                raise GridError(
                    "client_key_exists",
                    f"a live client key named {name!r} exists already",
                    fix="revoke it first, or pick another name",
                    next_command=f"grid allocator key revoke {name}",
                    details={"http_status": 409},
                )
            if len(self._records) >= MAX_KEYS and current is None:
                raise GridError(
                    "too_many_client_keys",
                    f"this controller holds {MAX_KEYS} client keys already",
                    fix="revoke keys that are no longer used",
                    next_command="grid allocator key list",
                    details={"http_status": 409},
                )
            record = KeyRecord(name, digest(key), key[: len(KEY_PREFIX) + 4], now)
            previous = dict(self._records)
            self._records[name] = record
            try:
                self._save()
            except OSError:
                self._records = previous
                raise
            self._index()
        return key, record

    def revoke(self, name: str, now: float) -> KeyRecord:
        with self._lock:
            record = self._records.get(name)
            if record is None or record.revoked_at is not None:
                raise GridError(
                    "unknown_client_key",
                    f"no live client key is named {name!r}",
                    fix="list the keys to see their names",
                    next_command="grid allocator key list",
                    details={"http_status": 404},
                )
            record.revoked_at = now
            self._save()
            self._index()
            return record

    def rows(self) -> list[dict[str, Any]]:
        """Every key (live and revoked) with its counts; no secret (not even the digest)."""
        with self._lock:
            records = sorted(self._records.values(), key=lambda r: r.name)
            requests, used = dict(self.requests), dict(self.last_used_at)
        out: list[dict[str, Any]] = [
            {
                "name": r.name,
                "prefix": r.prefix,
                "created_at": r.created_at,
                "revoked_at": r.revoked_at,
                "requests": requests.get(r.name, 0),
                "last_used_at": used.get(r.name),
            }
            for r in records
        ]
        return out

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self.requests)

    # ------------------------------------------------------------------ requests

    def identify(self, presented: str | None) -> str | None:
        """The name a request is counted for, or None when it may not pass."""
        if presented and len(presented) <= MAX_KEY_CHARS:
            if presented.startswith(KEY_PREFIX):
                name = self._by_digest.get(digest(presented))
                if name is not None:
                    return name
            elif self._operator and hmac.compare_digest(
                presented.encode("utf-8", "replace"), self._operator.encode()
            ):
                return OPERATOR
        return ANONYMOUS if self.open_access else None

    def count(self, name: str, now: float) -> None:
        with self._lock:
            self.requests[name] = self.requests.get(name, 0) + 1
            self.last_used_at[name] = now


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            text = value.decode("latin-1")
            scheme, _, credential = text.partition(" ")
            return credential.strip() if scheme.lower() == "bearer" else None
    return None


class ClientKeyGate:
    """ASGI middleware: see the module docstring. `clock` gives the counts' timestamps."""

    def __init__(self, app: ASGIApp, keys: ClientKeys, clock: Callable[[], float]) -> None:
        self.app = app
        self.keys = keys
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(V1_PREFIX):
            await self.app(scope, receive, send)
            return
        presented = _bearer(scope)
        name = self.keys.identify(presented)
        if name is None:
            await _refuse(send, bool(presented))
            return
        self.keys.count(name, self.clock())
        await self.app(scope, receive, send)


async def _refuse(send: Send, presented: bool) -> None:
    if presented:
        code, message = "invalid_client_key", "the client key is not valid for this Grid"
    else:
        code, message = "client_key_required", "this Grid's /v1 API needs a client key"
    fix = (
        "send Authorization: Bearer <key>; an operator issues one with "
        "`grid allocator key create NAME`"
    )
    doc = openai_body(401, code, message, fix)
    await send_json(send, 401, doc, [(b"www-authenticate", b"Bearer")])
