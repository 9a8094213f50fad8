"""External endpoints on the HTTP side: the TLS dial, the health probe, the prober thread, and
what the OpenAI proxy needs to route to them (docs/engines.md "External endpoints").

Every dial verifies TLS with the endpoint's CA file (else the system store); plain http is
used only for a loopback URL. A certificate that does not verify is `engine_tls_failed`: the
endpoint is marked unhealthy and nothing falls back to http. An endpoint whose /v1/models (or
whose answer to a request) is not OpenAI-shaped JSON is marked unhealthy with the reason, and
that request gets 502 with an OpenAI error body.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
from urllib.parse import urlsplit

import httpx

from grid.fleet import ExternalEndpoint, ExternalHealth, base_url
from grid.runtime.controller import ControllerService

log = logging.getLogger("grid.externals")
PROBE_TIMEOUT_S = 5.0
PROBE_INTERVAL_S = 10.0
EXPECTED_KEY = {"/v1/chat/completions": "choices", "/v1/completions": "choices",
                "/v1/embeddings": "data"}  # fmt: skip


def tls_verify(endpoint: ExternalEndpoint) -> ssl.SSLContext | bool:
    """What httpx verifies the endpoint with: its CA file, else the system store."""
    if urlsplit(endpoint.url).scheme != "https":
        return True  # loopback http (url_problem refused any other)
    if endpoint.ca_file:
        return ssl.create_default_context(cafile=endpoint.ca_file)
    return ssl.create_default_context()


def is_tls_failure(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _unhealthy(code: str, reason: str, now: float, source: str = "probe") -> ExternalHealth:
    return ExternalHealth.model_validate(
        {"healthy": False, "code": code, "reason": reason, "probed_at": now, "source": source}
    )


def listed_models(document: object) -> list[str] | None:
    """The ids of an OpenAI `GET /v1/models` answer, or None when it is not one."""
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        return None
    ids = [e.get("id") for e in document["data"] if isinstance(e, dict)]
    if len(ids) != len(document["data"]) or not all(isinstance(i, str) for i in ids):
        return None
    return [str(i) for i in ids]


def probe(endpoint: ExternalEndpoint, now: float) -> ExternalHealth:
    """One health probe: GET /v1/models over the verified connection."""
    url = base_url(endpoint.url) + "/v1/models"
    try:
        with httpx.Client(
            verify=tls_verify(endpoint), timeout=PROBE_TIMEOUT_S, trust_env=False
        ) as client:
            reply = client.get(url)
    except (OSError, ssl.SSLError) as exc:  # an unreadable CA file
        return _unhealthy("engine_tls_failed", f"the CA file cannot be used: {exc}", now)
    except httpx.HTTPError as exc:
        if is_tls_failure(exc):
            return _unhealthy(
                "engine_tls_failed",
                f"the TLS certificate of {endpoint.url} does not verify ({exc}); "
                "nothing is sent over plain http",
                now,
            )
        return _unhealthy("external_unreachable", f"{url} does not answer ({exc})", now)
    if reply.status_code != 200:
        return _unhealthy("external_http_error", f"{url} answered HTTP {reply.status_code}", now)
    try:
        ids = listed_models(reply.json())
    except ValueError:
        ids = None
    if ids is None:
        return _unhealthy("external_not_openai", f"{url} answers non-OpenAI JSON", now)
    missing = [m for m in endpoint.models if m not in ids]
    reason = f"serves {', '.join(m for m in endpoint.models if m in ids) or 'none of its models'}"
    if missing:
        reason += f"; does not list {', '.join(missing)}"
    return ExternalHealth(
        healthy=True, code="ok", reason=reason, probed_at=now, checked_at=now, served=ids
    )


def apply_health(service: ControllerService, name: str, health: ExternalHealth) -> None:
    if service.controller.record_external_health(name, health):
        log.info("external %s: %s (%s)", name, health.code, health.reason)
        service.notify()


def probe_all(service: ControllerService) -> None:
    for endpoint in service.controller.external_records():
        apply_health(service, endpoint.name, probe(endpoint, service.clock()))


class ExternalProber:
    """Probes every external endpoint every `interval_s` on a daemon thread."""

    def __init__(self, service: ControllerService, interval_s: float = PROBE_INTERVAL_S) -> None:
        self.service, self.interval_s = service, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="grid-externals", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                probe_all(self.service)
            except Exception as exc:  # the prober outlives any one bad round
                log.warning("external probe round failed: %s", type(exc).__name__)
            self._stop.wait(self.interval_s)


# ----------------------------------------------------------------------------- proxy side
# (their routes are in the controller's routing table: grid/runtime/controller/views.py)


def openai_shaped(content: bytes, path: str) -> bool:
    """Is a 2xx answer the OpenAI JSON its path promises (an object with choices or data)?"""
    key = EXPECTED_KEY.get(path)
    try:
        document = json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(document, dict) and (key is None or key in document)


def mark_failed(service: ControllerService, name: str, code: str, reason: str) -> None:
    apply_health(service, name, _unhealthy(code, reason, service.clock(), "request"))
