"""The node's credential: its token, and the reply key that verifies the controller's replies.

A credential text is the token first and `reply-key <key>` after it, on the next line (what
`grid allocator token write`, an enrollment and a node start on the controller's machine write)
or on the same line after a space (handy in one environment variable). Every path carries both:
the token file (or `<token file>.reply-key` beside it, the two-file layout),
GRID_ALLOCATOR_NODE_TOKEN, and the daemon's stdin. A node with no reply key does not start
(`no_reply_key`): it could not tell its controller's replies from anyone else's.

`reusable` says whether a credential file may be used again instead of minting another: it names
the wanted host, carries its reply key and does not expire within a day.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from grid.fleet import GridError, reply_key_path

REPLY_KEY_WORD = "reply-key"
MAX_CREDENTIAL_TEXT = 8192
REUSE_MARGIN_S = 86_400.0  # a credential this close to its expiry is renewed, not reused


def parse_credential(text: str) -> tuple[str, str | None]:
    """(token, reply key or None) of a credential text."""
    words = text[:MAX_CREDENTIAL_TEXT].split()
    token = words[0] if words and words[0] != REPLY_KEY_WORD else ""
    key = None
    for index, word in enumerate(words[:-1]):
        if word == REPLY_KEY_WORD:
            key = words[index + 1]
            break
    return token, key or None


def credential_text(token: str, reply_key: str) -> str:
    """The text a credential file holds: the token, then its reply key."""
    return f"{token}\n{REPLY_KEY_WORD} {reply_key}\n"


def read_credential_file(path: str | Path) -> tuple[str, str | None]:
    """A token file's token and reply key (the key from `<file>.reply-key` when the file has
    none). Raises OSError when the token file cannot be read."""
    target = Path(path).expanduser()
    token, key = parse_credential(target.read_text(encoding="utf-8"))
    if key is None:
        try:
            key = reply_key_path(target).read_text(encoding="utf-8").strip() or None
        except OSError:
            key = None
    return token, key


def _claims(token: str) -> dict[str, object]:
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, RecursionError):
        return {}
    return claims if isinstance(claims, dict) else {}


def token_claims(token: str) -> tuple[str | None, float | None]:
    """The host id and expiry a token names (read, not verified: the controller verifies)."""
    claims = _claims(token)
    host, expires = claims.get("h"), claims.get("exp")
    return (
        host if isinstance(host, str) and host else None,
        float(expires) if isinstance(expires, int | float) else None,
    )


def credential_id(token: str) -> str:
    """The id the controller's credential book lists a token under (its nonce; "" unknown)."""
    nonce = _claims(token).get("n")
    return nonce if isinstance(nonce, str) else ""


def reusable(path: Path, host_id: str, now: float) -> str | None:
    """The credential file's token when it may be used again for `host_id` (names that host,
    carries a reply key, lives past `REUSE_MARGIN_S`), else None."""
    try:
        token, key = read_credential_file(path)
    except OSError:
        return None
    host, expires = token_claims(token)
    if host != host_id or key is None or expires is None or expires - now < REUSE_MARGIN_S:
        return None
    return token


def no_reply_key(source: str) -> GridError:
    return GridError(
        "no_reply_key",
        f"the node credential from {source} carries no reply key, so the node could not tell "
        "its controller's replies from anyone else's; it does not start without one",
        fix="write the credential again (its file then holds the token and `reply-key ...`); "
        'for GRID_ALLOCATOR_NODE_TOKEN use the whole file: "$(cat node.token)"',
        next_command="grid allocator token write FILE --host-id ID",
    )
