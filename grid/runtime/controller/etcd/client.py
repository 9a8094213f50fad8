"""A small etcd v3 client over etcd's own JSON gateway (`/v3/kv/*`, `/v3/lease/*`).

etcd serves its gRPC API as JSON over HTTP on the client port (grpc-gateway, etcd 3.4+), so the
controller talks to it with httpx, already a dependency, instead of a gRPC stack (the PyPI
clients `etcd3`/`aetcd` bring grpcio and generated protobuf modules that do not load next to
the protobuf OR-Tools needs). Keys and values travel base64-encoded. Every call tries the
endpoints in turn, starting with the one that answered last, so one dead member changes nothing.

Errors are `GridError`s with stable codes: `etcd_unreachable` (no endpoint answered),
`etcd_tls_failed` (a handshake was refused or a certificate did not verify), `etcd_unavailable`
(members answer but none can serve: no quorum, no leader, a timeout) and `etcd_error` (etcd
refused the request itself).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from grid.fleet import GridError

DEFAULT_PREFIX = "/grid"
DEFAULT_TIMEOUT_S = 2.0
# gRPC status codes etcd answers with when it cannot serve now (another member may).
_RETRYABLE = {4, 14}  # DEADLINE_EXCEEDED, UNAVAILABLE
_FIX_URL = "give --store as etcd://HOST:PORT[,HOST:PORT...] (the etcd members' client URLs)"


def b64(data: bytes | str) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode("ascii")


def unb64(text: str | None) -> bytes:
    return base64.b64decode(text or "")


@dataclass(frozen=True)
class EtcdTarget:
    """Where the etcd cluster is and how to reach it (parsed from `--store etcd://...`)."""

    endpoints: tuple[str, ...]
    prefix: str = DEFAULT_PREFIX
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""

    @property
    def tls(self) -> bool:
        return bool(self.ca_file or self.cert_file)

    @property
    def url(self) -> str:
        tail = "" if self.prefix == DEFAULT_PREFIX else self.prefix
        return "etcd://" + ",".join(self.endpoints) + tail

    def base_urls(self) -> list[str]:
        scheme = "https" if self.tls else "http"
        return [f"{scheme}://{e}" for e in self.endpoints]


def parse_store_url(
    url: str, *, ca_file: str = "", cert_file: str = "", key_file: str = ""
) -> EtcdTarget:
    """`etcd://HOST:PORT[,HOST:PORT...][/PREFIX]` (refused with `invalid_store_url`)."""
    if not url.startswith("etcd://"):
        raise GridError(
            "invalid_store_url",
            f"the store {url!r} is not an etcd:// URL",
            fix=_FIX_URL + ", or leave --store out for the state file",
            next_command="grid up --help",
        )
    rest = url[len("etcd://") :]
    hosts, slash, path = rest.partition("/")
    prefix = "/" + path.strip("/") if slash and path.strip("/") else DEFAULT_PREFIX
    endpoints: list[str] = []
    for part in hosts.split(","):
        parsed = urlsplit("//" + part.strip())
        try:
            port = parsed.port
        except ValueError:
            port = None
        if not parsed.hostname or port is None or parsed.username or parsed.password:
            raise GridError(
                "invalid_store_url",
                f"{part.strip() or '(empty)'} in --store is not HOST:PORT",
                fix=_FIX_URL,
                next_command="grid up --help",
            )
        host = f"[{parsed.hostname}]" if ":" in parsed.hostname else parsed.hostname
        endpoints.append(f"{host}:{port}")
    if (cert_file == "") != (key_file == ""):
        raise GridError(
            "etcd_tls_incomplete",
            "--etcd-cert-file and --etcd-key-file go together",
            fix="pass both (the client certificate and its key), or neither",
            next_command="grid up --help",
        )
    return EtcdTarget(tuple(endpoints), prefix, ca_file, cert_file, key_file)


@dataclass(frozen=True)
class KV:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int


@dataclass(frozen=True)
class TxnResult:
    succeeded: bool
    revision: int
    responses: list[dict[str, Any]]

    def ranges(self) -> list[list[KV]]:
        """The key-values of each range response, in order."""
        out = []
        for item in self.responses:
            rng = item.get("response_range")
            if rng is not None:
                out.append([_kv(kv) for kv in rng.get("kvs", [])])
        return out


def _kv(raw: dict[str, Any]) -> KV:
    return KV(
        key=unb64(raw.get("key")).decode("utf-8", "replace"),
        value=unb64(raw.get("value")),
        create_revision=int(raw.get("create_revision", 0)),
        mod_revision=int(raw.get("mod_revision", 0)),
        lease=int(raw.get("lease", 0)),
    )


# --------------------------------------------------------------------------- txn builders
def cmp_value(key: str, value: str | bytes) -> dict[str, Any]:
    return {"target": "VALUE", "key": b64(key), "result": "EQUAL", "value": b64(value)}


def cmp_mod(key: str, revision: int) -> dict[str, Any]:
    return {"target": "MOD", "key": b64(key), "result": "EQUAL", "mod_revision": str(revision)}


def cmp_absent(key: str) -> dict[str, Any]:
    return {"target": "CREATE", "key": b64(key), "result": "EQUAL", "create_revision": "0"}


def cmp_lease(key: str, lease: int) -> dict[str, Any]:
    return {"target": "LEASE", "key": b64(key), "result": "EQUAL", "lease": str(lease)}


def op_put(key: str, value: str | bytes, lease: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = {"key": b64(key), "value": b64(value)}
    if lease:
        body["lease"] = str(lease)
    return {"request_put": body}


def op_delete(key: str) -> dict[str, Any]:
    return {"request_delete_range": {"key": b64(key)}}


def op_get(key: str) -> dict[str, Any]:
    return {"request_range": {"key": b64(key)}}


def prefix_end(prefix: str) -> str:
    raw = bytearray(prefix.encode())
    raw[-1] += 1
    return raw.decode()


class EtcdClient:
    """Thread-safe; one pooled HTTP connection per member."""

    def __init__(self, target: EtcdTarget, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.target = target
        self.timeout_s = timeout_s
        self._urls = target.base_urls()
        self._first = 0
        self._lock = threading.Lock()
        verify: ssl.SSLContext | bool = False
        if target.tls:
            verify = ssl.create_default_context(cafile=target.ca_file or None)
            if target.cert_file:
                verify.load_cert_chain(target.cert_file, target.key_file)
        self._http = httpx.Client(
            verify=verify, timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 1.0))
        )

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------------ transport
    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            first = self._first
        order = self._urls[first:] + self._urls[:first]
        problems: list[str] = []
        tls_failed = False
        busy = False
        for url in order:
            try:
                response = self._http.post(url + path, content=json.dumps(body))
            except httpx.ConnectError as exc:
                tls_failed = tls_failed or _is_tls(exc)
                problems.append(f"{url}: {_short(exc)}")
                continue
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                tls_failed = tls_failed or _is_tls(exc)
                busy = busy or isinstance(exc, httpx.TimeoutException)
                problems.append(f"{url}: {_short(exc)}")
                continue
            data = _json(response)
            if response.status_code == 200:
                with self._lock:
                    self._first = self._urls.index(url)
                return data
            code = data.get("code")
            message = str(data.get("message") or data.get("error") or response.status_code)
            if code in _RETRYABLE or (response.status_code >= 500 and code is None):
                busy = True
                problems.append(f"{url}: {message}")
                continue
            raise GridError(
                "etcd_error",
                f"etcd refused {path}: {message}",
                fix="check the etcd cluster's health (etcdctl endpoint health)",
                details={"http_status": 503},
            )
        raise _unavailable(problems, tls_failed=tls_failed, busy=busy)

    # ------------------------------------------------------------------ kv
    def get(self, key: str) -> KV | None:
        data = self.call("/v3/kv/range", {"key": b64(key)})
        kvs = data.get("kvs") or []
        return _kv(kvs[0]) if kvs else None

    def get_prefix(self, prefix: str, *, keys_only: bool = False) -> list[KV]:
        body: dict[str, Any] = {"key": b64(prefix), "range_end": b64(prefix_end(prefix))}
        if keys_only:
            body["keys_only"] = True
        data = self.call("/v3/kv/range", body)
        return [_kv(kv) for kv in data.get("kvs") or []]

    def put(self, key: str, value: str | bytes, lease: int = 0) -> int:
        body: dict[str, Any] = {"key": b64(key), "value": b64(value)}
        if lease:
            body["lease"] = str(lease)
        data = self.call("/v3/kv/put", body)
        return int(data.get("header", {}).get("revision", 0))

    def txn(
        self,
        compare: list[dict[str, Any]],
        success: list[dict[str, Any]],
        failure: list[dict[str, Any]] | None = None,
    ) -> TxnResult:
        body: dict[str, Any] = {"compare": compare, "success": success}
        if failure:
            body["failure"] = failure
        data = self.call("/v3/kv/txn", body)
        return TxnResult(
            succeeded=bool(data.get("succeeded", False)),
            revision=int(data.get("header", {}).get("revision", 0)),
            responses=list(data.get("responses") or []),
        )

    # ------------------------------------------------------------------ leases
    def grant(self, ttl_s: int) -> tuple[int, int]:
        data = self.call("/v3/lease/grant", {"TTL": str(ttl_s)})
        return int(data["ID"]), int(data.get("TTL", ttl_s))

    def keepalive(self, lease: int) -> int:
        """The lease's TTL after the refresh; 0 when etcd no longer has it (expired)."""
        data = self.call("/v3/lease/keepalive", {"ID": str(lease)})
        return int(data.get("result", {}).get("TTL", 0))

    def revoke(self, lease: int) -> None:
        try:
            self.call("/v3/lease/revoke", {"ID": str(lease)})
        except GridError as err:
            if "not found" not in err.message:
                raise

    def status(self) -> dict[str, Any]:
        return self.call("/v3/maintenance/status", {})


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _is_tls(exc: Exception) -> bool:
    text = f"{exc!r} {exc.__cause__!r} {exc.__context__!r}".lower()
    return "ssl" in text or "certificate" in text or "handshake" in text or "tls" in text


def _short(exc: Exception) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0][:200]


def _unavailable(problems: list[str], *, tls_failed: bool, busy: bool) -> GridError:
    seen = "; ".join(problems) or "no endpoint"
    if tls_failed:
        return GridError(
            "etcd_tls_failed",
            f"the TLS handshake with etcd failed ({seen})",
            fix="give the CA that signed the etcd server certificates (--etcd-ca-file) and, if "
            "etcd asks for client certificates, --etcd-cert-file and --etcd-key-file",
            next_command="grid up --help",
            details={"http_status": 503},
        )
    if busy:
        return GridError(
            "etcd_unavailable",
            f"etcd answers but cannot serve now: no quorum or no leader ({seen})",
            fix="bring a majority of the etcd members back (etcdctl endpoint status)",
            next_command="grid allocator status",
            details={"http_status": 503},
        )
    return GridError(
        "etcd_unreachable",
        f"no etcd member answered ({seen})",
        fix="start etcd, or correct the HOST:PORT list in --store (the members' client URLs)",
        next_command="grid up --help",
        details={"http_status": 503},
    )
