"""Client keys for the OpenAI-compatible surface (/v1): who may send inference, and how much.

`grid allocator key create NAME` issues a bearer key (`gk1_...`), shown once; only its SHA-256
is kept, with its name, a short prefix for recognition and its creation (and revocation) time,
in the controller's durable state (`client_keys` of the state document): it follows the store,
so with `--store etcd://...` every controller of the cluster accepts it, and a standby that
becomes leader keeps serving the keys the old leader issued. A key file of an older controller
(`<state-dir>/client_keys.json`) is imported at start and renamed `client_keys.json.imported`.

`ClientKeyGate`, a pure ASGI middleware in front of every route, lets a request under /v1/
through only with `Authorization: Bearer <key>` of a live key, or the operator capability
(the operator may do anything); otherwise 401 in OpenAI's error shape, before any routing, so
every /v1 route (chat, completions, embeddings, models, even an unknown path) is covered by
this one rule.

Open access (no key needed) is an explicit setting (`grid up --open-access`, `open_access` in
config.json) and only for a controller bound to loopback: the server refuses to start with it on
any other address (`open_access_not_loopback`). With open access a request that presents a valid
key is still counted for it; any other request counts as `anonymous`.

Requests are counted per key name (`operator` and `anonymous` included) in memory, since the
controller started; status (`client_keys`) and /metrics (`grid_client_requests_total`) show
them. A key is never logged, stored in clear or returned after its creation.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any, Protocol

from grid.api.limits import send_json
from grid.api.openai_errors import openai_body
from grid.fleet import GridError, atomic_write_text
from grid.runtime.controller import ClientKeyRecord, ControllerService, update_client_keys
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


KeyRecord = ClientKeyRecord  # name, sha256, prefix, created_at, revoked_at (state.py)


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


class KeyBackend(Protocol):
    """Where the records live. `records()` returns a list that is replaced, never changed in
    place, on every change (so it is indexed by identity); `update` applies `change` to the
    current records and makes the result durable, or raises and changes nothing."""

    def records(self) -> list[KeyRecord]: ...

    def update(self, change: Callable[[list[KeyRecord]], list[KeyRecord]], now: float) -> None: ...


class MemoryKeys:
    """Records in memory only (an app built without a service)."""

    def __init__(self) -> None:
        self._records: list[KeyRecord] = []

    def records(self) -> list[KeyRecord]:
        return self._records

    def update(self, change: Callable[[list[KeyRecord]], list[KeyRecord]], now: float) -> None:
        self._records = change(list(self._records))


class FileKeys:
    """A key file of its own (mode 0600, atomic writes): what older controllers kept in
    `<state-dir>/client_keys.json`, read once to import it into the controller's state."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._records = self._load()

    def _load(self) -> list[KeyRecord]:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise _unreadable(self.path, exc.strerror or type(exc).__name__) from None
        try:
            return [KeyRecord.model_validate(row) for row in json.loads(raw)["keys"]]
        except (ValueError, KeyError, TypeError):
            raise _unreadable(self.path, "not a client key document") from None

    def records(self) -> list[KeyRecord]:
        return self._records

    def update(self, change: Callable[[list[KeyRecord]], list[KeyRecord]], now: float) -> None:
        chosen = change(list(self._records))
        doc = {"schema_version": 1, "keys": [r.model_dump(mode="json") for r in chosen]}
        atomic_write_text(self.path, json.dumps(doc, indent=1) + "\n", 0o600)
        self._records = chosen


class ControllerKeys:
    """The records in the controller's durable state (grid/runtime/controller/key_records.py):
    they follow its store, file or etcd, and a standby reads what the leader wrote."""

    def __init__(self, service: ControllerService) -> None:
        self.service = service

    def records(self) -> list[KeyRecord]:
        return self.service.controller.state.client_keys  # the current controller (HA swaps it)

    def update(self, change: Callable[[list[KeyRecord]], list[KeyRecord]], now: float) -> None:
        update_client_keys(self.service.controller, change, now)


def import_key_file(path: Path, keys: ClientKeys, now: float) -> int:
    """Move the records of an older controller's key file into `keys` (a name it already holds
    wins) and rename the file `<name>.imported`; the number imported. A controller that cannot
    save (a standby) leaves the file for the leader's next start."""
    if not path.exists():
        return 0
    legacy = FileKeys(path).records()

    def merge(current: list[KeyRecord]) -> list[KeyRecord]:
        held = {r.name for r in current}
        return current + [r for r in legacy if r.name not in held]

    before = len(keys.backend.records())
    keys.backend.update(merge, now)
    with contextlib.suppress(OSError):  # left in place, it imports nothing new next time
        os.replace(path, path.with_name(path.name + ".imported"))
    return len(keys.backend.records()) - before


class ClientKeys:
    """The key records (a `KeyBackend`) and the per-key request counts (thread-safe).

    `source`: a service (the controller's state), a path (a key file of its own) or None
    (memory only)."""

    def __init__(
        self,
        source: ControllerService | Path | KeyBackend | None = None,
        *,
        open_access: bool = False,
        operator_token: str = "",
    ) -> None:
        self.backend: KeyBackend
        if source is None:
            self.backend = MemoryKeys()
        elif isinstance(source, Path):
            self.backend = FileKeys(source)
        elif isinstance(source, ControllerService):
            self.backend = ControllerKeys(source)
        else:
            self.backend = source
        self.open_access = open_access
        self._operator = operator_token
        self._lock = threading.Lock()
        self._indexed: tuple[list[KeyRecord], dict[str, str]] | None = None
        self.requests: dict[str, int] = {}
        self.last_used_at: dict[str, float] = {}

    def _by_digest(self) -> dict[str, str]:
        """sha256 -> name of every live key, rebuilt when the backend's list is another one."""
        records = self.backend.records()
        indexed = self._indexed
        if indexed is None or indexed[0] is not records:
            index = {r.sha256: r.name for r in records if r.revoked_at is None}
            indexed = self._indexed = (records, index)
        return indexed[1]

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
        record = KeyRecord(
            name=name, sha256=digest(key), prefix=key[: len(KEY_PREFIX) + 4], created_at=now
        )

        def add(current: list[KeyRecord]) -> list[KeyRecord]:
            same = [r for r in current if r.name == name]
            if same and same[0].revoked_at is None:
                raise GridError(
                    "client_key_exists",
                    f"a live client key named {name!r} exists already",
                    fix="revoke it first, or pick another name",
                    next_command=f"grid allocator key revoke {name}",
                    details={"http_status": 409},
                )
            if len(current) >= MAX_KEYS and not same:
                raise GridError(
                    "too_many_client_keys",
                    f"this controller holds {MAX_KEYS} client keys already",
                    fix="revoke keys that are no longer used",
                    next_command="grid allocator key list",
                    details={"http_status": 409},
                )
            return [r for r in current if r.name != name] + [record]

        with self._lock:
            self.backend.update(add, now)
        return key, record

    def revoke(self, name: str, now: float) -> KeyRecord:
        revoked: list[KeyRecord] = []

        def mark(current: list[KeyRecord]) -> list[KeyRecord]:
            live = [r for r in current if r.name == name and r.revoked_at is None]
            if not live:
                raise GridError(
                    "unknown_client_key",
                    f"no live client key is named {name!r}",
                    fix="list the keys to see their names",
                    next_command="grid allocator key list",
                    details={"http_status": 404},
                )
            revoked.append(live[0].model_copy(update={"revoked_at": now}))
            return [revoked[0] if r.name == name else r for r in current]

        with self._lock:
            self.backend.update(mark, now)
        return revoked[0]

    def rows(self) -> list[dict[str, Any]]:
        """Every key (live and revoked) with its counts; no secret (not even the digest)."""
        records = sorted(self.backend.records(), key=lambda r: r.name)
        with self._lock:
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
                name = self._by_digest().get(digest(presented))
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
