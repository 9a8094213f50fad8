"""One-time enrollment tokens (docs/addressing.md "Enrollment").

- `POST /allocator/enrollments` (operator capability): a token for one host id, valid `ttl`
  seconds (default 15 minutes). Only its SHA-256 is kept, in `<state-dir>/enrollments.json`
  (owner-only, atomic writes), so the file never holds a usable secret.
- `POST /enroll` (no credential: the token is in the body): exchanges a valid, unused token for
  that host's credential (the same host-scoped credential `token write` mints, with its reply
  key). The token is marked used durably before the credential is returned, so a reused token is
  refused (`enrollment_token_used`) even across a controller restart; an expired one is
  `enrollment_token_expired`, an unknown one `enrollment_token_invalid`. On a controller cluster
  (etcd) the reply also lists every controller's URL (`controllers`) and both routes answer on
  the leader only (a standby redirects): the book is the leader's own file, so tokens issued
  by one leader are void after a change of leader.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from grid.api.auth import DEFAULT_NODE_TTL_S, MAX_NODE_TTL_S, Credentials
from grid.api.credential_book import CredentialBook
from grid.api.deps import Service, get_credentials, require_operator
from grid.fleet import GridError, atomic_write_text, read_json_file
from grid.fleet.operator import EnrolledCredential, Enrollment
from grid.runtime.controller.etcd import HAService

router = APIRouter(tags=["enrollment"])

ENROLL_PREFIX = "gridenroll"
ENROLLMENTS_NAME = "enrollments.json"
DEFAULT_ENROLL_TTL_S = 900.0
MAX_ENROLL_TTL_S = 7 * 86_400.0
MAX_KEPT = 1024  # used and expired entries are pruned beyond this
_LOCK = threading.Lock()


class EnrollmentRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    host_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:@-]+$")
    ttl_seconds: float = Field(default=DEFAULT_ENROLL_TTL_S, gt=0, le=MAX_ENROLL_TTL_S)
    credential_ttl_seconds: float = Field(default=DEFAULT_NODE_TTL_S, gt=0, le=MAX_NODE_TTL_S)


class EnrollBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: str = Field(min_length=1, max_length=256, repr=False)


class BookEntry(BaseModel):
    """One issued token in the book, keyed by the token's SHA-256 (the file's JSON form)."""

    model_config = ConfigDict(extra="ignore")
    host_id: str
    created_at: float = 0.0
    expires_at: float = 0.0
    credential_ttl_s: float = DEFAULT_NODE_TTL_S
    used_at: float | None = None


Book = dict[str, BookEntry]
_BOOK = TypeAdapter(Book)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


def _book_path(service: Any) -> Path:
    return Path(service.controller.store.path).with_name(ENROLLMENTS_NAME)


def _load(path: Path) -> Book:
    try:
        return _BOOK.validate_python(read_json_file(path))  # depth-checked like state.json
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):  # a pydantic ValidationError is a ValueError
        raise GridError(
            "enrollment_book_unreadable",
            f"{path} cannot be read, so no enrollment token can be checked",
            fix=f"move {path} aside (outstanding tokens are then void) and enroll again",
            details={"http_status": 500},
        ) from None


def _save(path: Path, book: Book, now: float) -> None:
    if len(book) > MAX_KEPT:
        for key in sorted(book, key=lambda k: book[k].expires_at):
            if len(book) <= MAX_KEPT:
                break
            if book[key].used_at or book[key].expires_at <= now:
                del book[key]
    document = _BOOK.dump_python(book, mode="json")
    atomic_write_text(path, json.dumps(document, indent=1, sort_keys=True), 0o600)


@router.post("/allocator/enrollments", dependencies=[Depends(require_operator)])
def post_enrollment(body: EnrollmentRequest, service: Service) -> Enrollment:
    now = service.clock()
    token = f"{ENROLL_PREFIX}.{secrets.token_urlsafe(32)}"
    path = _book_path(service)
    with _LOCK:
        book = _load(path)
        book[_digest(token)] = BookEntry(
            host_id=body.host_id,
            created_at=now,
            expires_at=now + body.ttl_seconds,
            credential_ttl_s=body.credential_ttl_seconds,
        )
        _save(path, book, now)
    return Enrollment(host_id=body.host_id, token=token, expires_at=now + body.ttl_seconds)


def _refused(code: str, message: str, status: int) -> GridError:
    return GridError(
        code,
        message,
        fix="ask the operator for a fresh token: grid allocator enroll --host-id ID",
        next_command="grid allocator enroll --host-id ID",
        details={"http_status": status},
    )


@router.post("/enroll")
def post_enroll(
    body: EnrollBody,
    request: Request,
    service: Service,
    credentials: Annotated[Credentials, Depends(get_credentials)],
) -> EnrolledCredential:
    now = service.clock()
    path = _book_path(service)
    presented = _digest(body.token)
    with _LOCK:
        book = _load(path)
        key = next((k for k in book if hmac.compare_digest(k, presented)), None)
        entry = book.get(key) if key is not None else None
        if key is None or entry is None:
            raise _refused(
                "enrollment_token_invalid", "this enrollment token is not known here", 403
            )
        if entry.used_at:
            raise _refused(
                "enrollment_token_used",
                "this enrollment token was already used; a token enrolls one machine once",
                409,
            )
        if entry.expires_at <= now:
            raise _refused("enrollment_token_expired", "this enrollment token has expired", 410)
        entry.used_at = now
        _save(path, book, now)  # durable before the credential leaves: never usable twice
    issued: CredentialBook = request.app.state.credential_book
    answer = issued.issue(
        credentials, entry.host_id, now=now, ttl_s=entry.credential_ttl_s, source="enrollment"
    )
    # A controller cluster on etcd: every controller's URL, so the node follows its leader.
    urls = service.controller_urls() if isinstance(service, HAService) else []
    return EnrolledCredential(**dict(answer), controllers=urls)
