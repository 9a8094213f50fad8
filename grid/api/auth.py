"""Credentials of the allocator API: the operator capability and host-scoped node credentials.

Operator capability: a random secret in the controller's owner-only config file, presented in
`X-Grid-Allocator-Token` or `Authorization: Bearer ...`; it guards every mutating admin route.

Node credential: `gan1.<payload>.<signature>`, where the payload (base64url JSON) names one
stable host_id, an expiry and a nonce, and the signature is HMAC-SHA256 with the controller's
node-signing key. It is presented in `X-Grid-Allocator-Node-Token` and is valid only for its
host. Every comparison is constant-time; no secret is ever put in a log line, a status document
or an error body (errors say which credential failed, never what was sent).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import secrets
from dataclasses import dataclass, field

from grid.fleet import GridError

NODE_TOKEN_PREFIX = "gan1"
MAX_CREDENTIAL_CHARS = 4096
DEFAULT_NODE_TTL_S = 30 * 86_400.0
MAX_NODE_TTL_S = 366 * 86_400.0


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _unauthorized(what: str) -> GridError:
    return GridError(
        "unauthorized",
        f"this route needs the {what}",
        fix=f"send the {what} in its header",
        details={"http_status": 401},
    )


def _forbidden(code: str, message: str, fix: str, next_command: str = "") -> GridError:
    return GridError(
        code, message, fix=fix, next_command=next_command, details={"http_status": 403}
    )


@dataclass(frozen=True)
class NodeIdentity:
    host_id: str
    expires_at: float
    reply_key: str = field(default="", repr=False)  # signs the replies to this credential
    credential_id: str = ""  # the payload's nonce: how the credential book names it
    issued_at: float | None = None  # None: minted before credentials carried it


def credential_claims(token: str) -> dict[str, object]:
    """The claims of a node credential's payload, NOT verified ({} when unreadable)."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        claims = json.loads(_unb64(parts[1]))
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
        return {}
    return claims if isinstance(claims, dict) else {}


@dataclass(frozen=True)
class Credentials:
    operator_token: str
    node_signing_key: str

    # -- operator --------------------------------------------------------------------------
    def check_operator(self, presented: str | None) -> None:
        if not presented:
            raise _unauthorized("operator capability")
        if len(presented) > MAX_CREDENTIAL_CHARS or not hmac.compare_digest(
            presented.encode("utf-8", "replace"), self.operator_token.encode("utf-8")
        ):
            raise _forbidden(
                "invalid_operator_token",
                "the operator capability is not valid for this controller",
                "use the operator_token from the controller's config.json, "
                "GRID_ALLOCATOR_CONTROL_TOKEN or --token-file",
            )

    # -- nodes -----------------------------------------------------------------------------
    def mint_node_token(self, host_id: str, *, now: float, ttl_s: float) -> tuple[str, float]:
        if not host_id or len(host_id) > 256:
            raise GridError(
                "invalid_host_id",
                "a host id must be 1 to 256 characters",
                fix="pass a stable host id such as host-mac-studio",
                details={"http_status": 422},
            )
        if not (math.isfinite(ttl_s) and 0 < ttl_s <= MAX_NODE_TTL_S):
            raise GridError(
                "invalid_ttl",
                f"a node credential lives between 1 second and {int(MAX_NODE_TTL_S)} seconds",
                fix="pass a shorter --ttl-seconds",
                details={"http_status": 422},
            )
        expires = now + ttl_s
        claims = {"h": host_id, "exp": expires, "n": secrets.token_hex(8), "iat": now}
        payload = json.dumps(claims, separators=(",", ":")).encode()
        body = _b64(payload)
        return f"{NODE_TOKEN_PREFIX}.{body}.{self._sign(body)}", expires

    def reply_key(self, token: str) -> str:
        """The key that signs the controller's replies to `token` (see grid.fleet.wire): derived
        from the signing key and the credential's payload, handed to the node with its
        credential, never sent in a request."""
        body = token.split(".")[1] if token.count(".") == 2 else token
        mac = hmac.new(
            self.node_signing_key.encode(), f"grid-reply-v1|{body}".encode(), hashlib.sha256
        )
        return _b64(mac.digest())

    def _sign(self, body: str) -> str:
        mac = hmac.new(
            self.node_signing_key.encode(), f"{NODE_TOKEN_PREFIX}.{body}".encode(), hashlib.sha256
        )
        return _b64(mac.digest())

    def verify_node_token(self, presented: str | None, *, now: float) -> NodeIdentity:
        if not presented:
            raise _unauthorized("node credential")
        invalid = _forbidden(
            "invalid_node_credential",
            "the node credential is not valid for this controller",
            "write a fresh credential with `grid allocator token write FILE --host-id ID`",
            next_command="grid allocator token write FILE --host-id ID",
        )
        if len(presented) > MAX_CREDENTIAL_CHARS:
            raise invalid
        parts = presented.split(".")
        if len(parts) != 3 or parts[0] != NODE_TOKEN_PREFIX:
            raise invalid
        if not hmac.compare_digest(
            self._sign(parts[1]).encode(), parts[2].encode("ascii", "replace")
        ):
            raise invalid
        try:
            claims = json.loads(_unb64(parts[1]))
            host_id, expires = claims["h"], float(claims["exp"])
        except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
            raise invalid from None
        if not isinstance(host_id, str) or not host_id or not math.isfinite(expires):
            raise invalid
        if expires <= now:
            raise _forbidden(
                "expired_node_credential",
                "the node credential has expired",
                "write a fresh credential with `grid allocator token write FILE --host-id ID`",
                next_command="grid allocator token write FILE --host-id ID",
            )
        nonce, issued = claims.get("n"), claims.get("iat")
        return NodeIdentity(
            host_id=host_id,
            expires_at=expires,
            reply_key=self.reply_key(presented),
            credential_id=nonce if isinstance(nonce, str) else "",
            issued_at=float(issued) if isinstance(issued, int | float) else None,
        )
