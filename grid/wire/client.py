"""The httpx client of the allocator API, shared by the CLI and the node agent.

Refusals come back as GridError with the server's code, sentence and fix. Credentials are sent
only in headers and never over plain HTTP to a non-loopback address. Nothing here prints or logs
a credential.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import httpx
from pydantic import BaseModel, ValidationError

from grid.fleet import (
    NODE_HEADER,
    OPERATOR_HEADER,
    REPLY_SIGNATURE_HEADER,
    GridError,
    NodeReply,
    NodeUpdate,
    reply_is_signed,
    wire_json,
)
from grid.fleet.operator import (
    AllocatorStatus,
    CredentialList,
    CredentialRow,
    EnrolledCredential,
    Enrollment,
    Health,
    MintedCredential,
    ModeReply,
    ObservationReply,
    ProfileReply,
    ProfileUpdate,
    RevokeReply,
    TickReply,
    TombstoneReply,
)

DEFAULT_TIMEOUT_S = 60.0
E = TypeVar("E", bound=BaseException)
M = TypeVar("M", bound=BaseModel)
CA_FILE_ENV = "GRID_CA_FILE"  # the CA the CLI verifies a controller with (docs/addressing.md)


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def client_verify(ca_file: str | Path | None) -> ssl.SSLContext | bool:
    """What a controller's certificate is verified with: the private CA in `ca_file` (None:
    $GRID_CA_FILE), else the system store (True)."""
    if ca_file is None:
        ca_file = os.environ.get(CA_FILE_ENV)
    if ca_file is None or str(ca_file) == "":
        return True
    path = Path(ca_file).expanduser()
    try:
        return ssl.create_default_context(cafile=str(path))
    except (OSError, ssl.SSLError, ValueError):
        raise GridError(
            "ca_file_invalid",
            f"{path} is not a readable PEM file of CA certificates",
            fix="pass --ca-file with the CA that issued the controller's certificate",
            next_command="grid test status --json   (its ca_file names a logical fleet's CA)",
        ) from None


class AllocatorClient:
    def __init__(
        self,
        base_url: str,
        *,
        operator_token: str | None = None,
        node_token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
        reply_key: str | None = None,
        ca_file: str | Path | None = None,
    ) -> None:
        # With a reply key, every node reply must carry the controller's signature (issue 15).
        self.reply_key = reply_key or None
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise GridError(
                "invalid_controller_url",
                f"{base_url!r} is not an http(s) URL",
                fix="pass --grid http://127.0.0.1:22101 (or the controller's URL)",
            )
        self._plain_remote = parts.scheme == "http" and not is_loopback(parts.hostname)
        if operator_token or node_token:
            self._check_secret_may_travel()
        headers: dict[str, str] = {}
        if operator_token:
            headers[OPERATOR_HEADER] = operator_token
        if node_token:
            headers[NODE_HEADER] = node_token
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout_s,
            transport=transport,
            trust_env=False,
            verify=client_verify(ca_file),
        )

    def _check_secret_may_travel(self) -> None:
        if self._plain_remote:
            raise GridError(
                "insecure_transport",
                "credentials are never sent over plain HTTP to a non-loopback address",
                fix="use the controller's https:// URL, or run the command on the controller",
            )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> AllocatorClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- transport -------------------------------------------------------------------------
    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._send(method, path, **kwargs)
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    def stream(self, method: str, path: str, **kwargs: Any) -> Any:
        """A streamed request (a context manager of `httpx.Response`), e.g. a chat reply."""
        return self._http.stream(method, path, **kwargs)

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise GridError(
                "controller_timeout",
                f"the controller at {self.base_url} did not answer in time",
                fix="check the controller's log, or retry",
                next_command="grid allocator status",
            ) from None
        except httpx.TransportError as exc:
            raise transport_refusal(self.base_url, exc) from None
        if response.status_code >= 400 or response.status_code in (307, 308):
            raise _refusal(response)  # a redirect: a standby controller names its leader
        return response

    # -- allocator ---------------------------------------------------------------------------
    def _reply(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        """One operator route's reply, parsed as its published model (grid.fleet.operator)."""
        response = self._send(method, path, **kwargs)
        try:
            return model.model_validate_json(response.content)
        except ValidationError:
            raise GridError(
                "controller_reply_malformed",
                f"the controller at {self.base_url} answered {method} {path} with a body that "
                f"is not a {model.__name__}",
                fix="check that --grid names a Grid controller of a matching version",
                next_command="grid allocator status --json",
            ) from None

    def healthz(self) -> Health:
        return self._reply(Health, "GET", "/healthz")

    def status(self, *, history: int = 50) -> AllocatorStatus:
        return self._reply(AllocatorStatus, "GET", "/allocator/status", params={"history": history})

    def put_model(
        self, model_id: str, profile: ProfileUpdate | Mapping[str, object]
    ) -> ProfileReply:
        """Create or replace a profile from the fields given (a mapping is read as a
        `ProfileUpdate` first: an unknown field is refused here, as the controller would)."""
        update = ProfileUpdate.model_validate(
            profile if isinstance(profile, ProfileUpdate) else dict(profile)
        )
        return self._reply(
            ProfileReply, "PUT", f"/allocator/models/{_seg(model_id)}", json=update.given()
        )

    def delete_model(self, model_id: str) -> TombstoneReply:
        return self._reply(TombstoneReply, "DELETE", f"/allocator/models/{_seg(model_id)}")

    def set_mode(self, mode: str) -> ModeReply:
        return self._reply(ModeReply, "PUT", "/allocator/mode", json={"mode": mode})

    def tick(self) -> TickReply:
        return self._reply(TickReply, "POST", "/allocator/tick")

    def observe(self, observations: Sequence[Mapping[str, object]]) -> ObservationReply:
        body = {"observations": [dict(o) for o in observations]}
        return self._reply(ObservationReply, "POST", "/allocator/observations", json=body)

    def node_credential(
        self, host_id: str | None, *, ttl_s: float | None = None
    ) -> MintedCredential:
        body: dict[str, str | float] = {}
        if host_id is not None:
            body["host_id"] = host_id
        if ttl_s is not None:
            body["ttl_seconds"] = ttl_s
        return self._reply(MintedCredential, "POST", "/allocator/node-credentials", json=body)

    def node_credentials(self, host_id: str | None = None) -> list[CredentialRow]:
        """The credentials the controller issued (ids, hosts, times, state; never a secret)."""
        params = {"host_id": host_id} if host_id is not None else {}
        listing = self._reply(CredentialList, "GET", "/allocator/node-credentials", params=params)
        return listing.credentials

    def revoke_node_credentials(
        self, *, credential_id: str | None = None, host_id: str | None = None
    ) -> RevokeReply:
        body = {"credential_id": credential_id} if credential_id else {"host_id": host_id}
        return self._reply(RevokeReply, "POST", "/allocator/node-credentials/revoke", json=body)

    def create_enrollment(
        self, host_id: str, *, ttl_s: float | None = None, credential_ttl_s: float | None = None
    ) -> Enrollment:
        body: dict[str, str | float] = {"host_id": host_id}
        if ttl_s is not None:
            body["ttl_seconds"] = ttl_s
        if credential_ttl_s is not None:
            body["credential_ttl_seconds"] = credential_ttl_s
        return self._reply(Enrollment, "POST", "/allocator/enrollments", json=body)

    def enroll(self, enrollment_token: str) -> EnrolledCredential:
        """Exchange a one-time enrollment token for a host credential (token, reply_key)."""
        self._check_secret_may_travel()
        return self._reply(EnrolledCredential, "POST", "/enroll", json={"token": enrollment_token})

    def metrics(self) -> str:
        result: str = self.request("GET", "/metrics")
        return result

    # -- nodes ------------------------------------------------------------------------------
    def put_node(self, node_id: str, update: NodeUpdate) -> NodeReply:
        """Registration or heartbeat; the body is exactly the fields the caller set. The reply
        must carry the controller's signature under this client's reply key: a node takes no
        unsigned reply (without a key nothing is sent)."""
        if self.reply_key is None:
            raise GridError(
                "no_reply_key",
                "this node client has no reply key, so it could not tell the controller's "
                "replies from anyone else's; nothing was sent",
                fix="write the credential again: its file holds the token and `reply-key ...`",
                next_command="grid allocator token write FILE --host-id ID",
            )
        response = self._send("PUT", f"/nodes/{_seg(node_id)}", json=wire_json(update))
        if not reply_is_signed(
            self.reply_key, node_id, response.content, response.headers.get(REPLY_SIGNATURE_HEADER)
        ):
            raise GridError(
                "controller_reply_unauthenticated",
                f"the reply from {self.base_url} is not signed by the controller that issued "
                "this node's credential; it was ignored",
                fix="check that --grid names this node's controller, or write a fresh "
                "credential with its reply key",
                next_command="grid allocator token write FILE --host-id ID",
            )
        try:
            return NodeReply.model_validate_json(response.content)
        except ValidationError:
            raise GridError(
                "controller_reply_malformed",
                f"the controller at {self.base_url} answered the node update with a body "
                "that is not a node reply",
                fix="check that --grid names a Grid controller of a matching version",
                next_command="grid allocator status",
            ) from None


def _seg(value: str) -> str:
    return quote(value, safe="")


def _refusal(response: httpx.Response) -> GridError:
    try:
        body = response.json()
        error = body.get("error", {}) if isinstance(body, dict) else {}
    except ValueError:
        error = {}
    code = str(error.get("code") or f"http_{response.status_code}")
    message = str(error.get("message") or f"the controller answered HTTP {response.status_code}")
    return GridError(
        code,
        message,
        fix=str(error.get("fix") or _default_fix(response.status_code)),
        next_command=str(error.get("next_command", "")),
        details={"http_status": response.status_code, "location": response.headers.get("location")},
    )


def _default_fix(status: int) -> str:
    """What to do about a refusal whose body says nothing more (an older or foreign server)."""
    if status in (401, 403):
        return (
            "check the credential this command sends (GRID_ALLOCATOR_CONTROL_TOKEN, or the "
            "node's token file)"
        )
    if status >= 500:
        return "read the controller's log, then retry"
    return "correct the request, then retry"


def transport_refusal(base_url: str, exc: httpx.TransportError) -> GridError:
    """What a failed connection to the controller means: an untrusted certificate (nothing was
    sent) or no answer."""
    cause = _verification_failure(exc)
    if cause is not None:
        return _untrusted(base_url, cause)
    return _unreachable(base_url)


def _unreachable(base_url: str) -> GridError:
    return GridError(
        "controller_unreachable",
        f"no controller answers at {base_url}",
        fix="start it, or pass the right --grid URL",
        next_command="grid up",
    )


def cause_of(exc: BaseException, kind: type[E]) -> E | None:
    """The first exception of `kind` in `exc`'s chain of causes (at most 8 deep), if any."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _verification_failure(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The certificate verification error somewhere in `exc`'s chain, if any."""
    return cause_of(exc, ssl.SSLCertVerificationError)


def _untrusted(base_url: str, exc: ssl.SSLCertVerificationError) -> GridError:
    """The controller's certificate did not verify: nothing was sent after the handshake."""
    reason = exc.verify_message or str(exc)
    return GridError(
        "controller_certificate_untrusted",
        f"the certificate of {base_url} did not verify ({reason}); no request was sent",
        fix="pass --ca-file with the CA that issued the controller's certificate, or renew an "
        "expired certificate on the controller",
        next_command="grid test status --json   (its ca_file names a logical fleet's CA)",
    )
