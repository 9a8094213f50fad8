"""The proxy's one way out to an engine: over the host's relay tunnel, or straight to a
loopback or TLS engine (the route's `transport`, grid/router/routes.py).

`Dialer.send` returns an answer with `status_code`, `headers`, `aiter_raw()` and `aclose()`,
whichever way it went, and raises `UpstreamError` with a stable code when the engine cannot be
reached: `relay_disconnected` (the host's tunnel is down or dropped mid-request),
`engine_not_found` (the node has no such engine any more), `upstream_unreachable`,
`upstream_timeout`, `engine_tls_failed` (an https engine whose certificate did not verify:
never retried over plain HTTP) and `insecure_engine_transport` (plain HTTP to a non-loopback
address, refused before anything is sent). The body is sent unchanged, whatever the path
(chat, completions, embeddings): only the content type and accept headers go with it, and on a
direct hop the engine key, which on the relay is added by the node itself.

Direct hops share one pooled HTTP client per CA file, so a request does not pay a new
connection to a loopback engine.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Protocol

import httpx

from grid.api.relay import RelayHub, UpstreamError
from grid.router import Route, transport_refusal
from grid.wire import RequestHead, cause_of

UPSTREAM_TIMEOUT = httpx.Timeout(connect=5.0, read=600.0, write=60.0, pool=5.0)
READ_TIMEOUT_S = 600.0
POOL = httpx.Limits(max_connections=256, max_keepalive_connections=64, keepalive_expiry=30.0)


class EngineReply(Protocol):
    status_code: int
    headers: Mapping[str, str]

    def aiter_raw(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


def upstream_error(exc: httpx.HTTPError, route: Route) -> UpstreamError:
    """What an httpx failure on a direct hop means, as a stable code."""
    tls = cause_of(exc, ssl.SSLError)
    if tls is not None:
        reason = getattr(tls, "verify_message", None) or tls.reason or type(tls).__name__
        return UpstreamError(
            "engine_tls_failed",
            f"the TLS handshake with the engine at {route.base_url} failed ({reason}); "
            "nothing was sent, and Grid never falls back to plain HTTP",
        )
    if isinstance(exc, httpx.TimeoutException):
        return UpstreamError(
            "upstream_timeout", f"the engine at {route.engine_id} did not answer in time",
            timed_out=True,
        )  # fmt: skip
    return UpstreamError(
        "upstream_unreachable", f"the engine at {route.engine_id} could not be reached"
    )


class HttpReply:
    """An httpx streamed response whose failures read as `UpstreamError`."""

    def __init__(self, reply: httpx.Response, route: Route) -> None:
        self._reply = reply
        self._route = route
        self.status_code = reply.status_code
        self.headers: Mapping[str, str] = reply.headers

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._reply.aiter_raw():
                yield chunk
        except httpx.HTTPError as exc:
            raise upstream_error(exc, self._route) from None

    async def aclose(self) -> None:
        await self._reply.aclose()


class Dialer:
    def __init__(self, hub: RelayHub) -> None:
        self.hub = hub
        self._clients: dict[str, httpx.AsyncClient] = {}

    def _client(self, route: Route) -> httpx.AsyncClient:
        ca = (route.ca_file or "") if route.transport == "https" else ""
        client = self._clients.get(ca)
        if client is None:
            verify: ssl.SSLContext | bool = True
            if ca:
                try:
                    verify = ssl.create_default_context(cafile=ca)
                except (OSError, ssl.SSLError, ValueError):
                    raise UpstreamError(
                        "engine_tls_failed",
                        f"the CA file {ca} for the engine at {route.base_url} cannot be read",
                    ) from None
            client = httpx.AsyncClient(
                timeout=UPSTREAM_TIMEOUT, trust_env=False, verify=verify, limits=POOL
            )
            self._clients[ca] = client
        return client

    async def send(
        self,
        route: Route,
        engine_key: str | None,
        path: str,
        body: bytes,
        accept: str,
        now: float,
    ) -> EngineReply:
        headers = {"Content-Type": "application/json", "Accept": accept}
        if route.transport == "relay":
            session = self.hub.session(route.host_id, now)
            if session is None:
                raise UpstreamError(
                    "relay_disconnected", f"host {route.host_id}'s relay tunnel is not connected"
                )
            head = RequestHead("POST", path, route.model_id, route.port, headers)
            return await session.request(
                head, body, timeout_s=READ_TIMEOUT_S, read_timeout_s=READ_TIMEOUT_S
            )
        refused = transport_refusal(route)
        if refused is not None:
            raise UpstreamError(
                refused,
                f"Grid does not send requests over plain HTTP to {route.base_url}: engines stay "
                "on their host's loopback behind the relay, external endpoints use https",
            )
        if engine_key:
            headers["Authorization"] = f"Bearer {engine_key}"
        client = self._client(route)
        request = client.build_request("POST", route.base_url + path, content=body, headers=headers)
        try:
            reply = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise upstream_error(exc, route) from None
        return HttpReply(reply, route)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
