"""The OpenAI-compatible inference boundary: GET /v1/models, POST /v1/chat/completions and
POST /v1/completions, proxied to the chosen Grid-owned child over loopback.

This is the permissionless LAN boundary (spec): no Grid credential is needed, and only
configured model ids create model demand. A request with `model: "auto"` (or no model) is
classified in memory (grid/demand/classify.py) and routed to a READY model the current plan's
portfolio maps its workload to; when none is ready it gets an honest 503 whose `preparing`
object says what is being prepared (workload, model, admission state and reason). Either way
it is workload demand, never demand for the model that served it. The client's headers are
not forwarded: the upstream hop carries only the content type and the host's private engine
key, so neither a client's Authorization header nor its X-Grid-Affinity-Key (hashed on
arrival) ever leaves this process.
A failed POST is never replayed; the circuit breaker only redirects later requests. After each
request one bounded observation (no prompt or response content) is folded into the demand
tracker, best effort, after the response is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import replace
from typing import Any, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from grid.api.deps import Service
from grid.api.errors import status_for
from grid.api.externals import openai_shaped
from grid.api.openai_errors import engine_error
from grid.api.openai_kinds import external_failure, kind_refusal
from grid.api.openai_support import (
    AUTO_MODEL,
    MAX_BODY_BYTES,
    MAX_RESPONSE_BYTES,
    RequestFacts,
    Served,
    bind_model,
    observe_quietly,
    openai_error,
    read_facts,
)
from grid.api.proxy_state import Preparing, ProxyState, Upstream
from grid.api.relay import UpstreamError
from grid.api.relay_dial import Dialer, EngineReply
from grid.api.settling import RouteWindow
from grid.demand import EndpointFamily, Outcome
from grid.fleet import GridError
from grid.router import (
    AffinityKey,
    BreakerOutcome,
    RouteRefusal,
    SseUsageReader,
    classify_status,
    hash_affinity_key,
    usage_of,
)

log = logging.getLogger("grid.proxy")
router = APIRouter(prefix="/v1", tags=["openai"])

AFFINITY_HEADER = "X-Grid-Affinity-Key"
T = TypeVar("T")
CLIENT_CLOSED = 499  # nginx's "client closed request": nobody reads it, the log shows it
ENGINE_FAILURES = frozenset({BreakerOutcome.FAILURE, BreakerOutcome.RATE_LIMITED})


def proxy_state(request: Request) -> ProxyState:
    state: ProxyState = request.app.state.proxy  # created with the app (grid/api/app.py)
    return state


@router.get("/models")
async def list_models(request: Request, service: Service) -> dict[str, Any]:
    proxy = proxy_state(request)

    async def ready() -> tuple[list[str], list[str]]:
        return await run_in_threadpool(proxy.model_listing, service.controller, service.clock())

    window: RouteWindow = request.app.state.route_window  # just started: await heartbeats
    models, workloads = await window.retry(ready, lambda got: bool(got[0]), await ready())
    data: list[dict[str, Any]] = [
        {"id": m, "object": "model", "created": 0, "owned_by": "grid"} for m in models
    ]
    # `auto` is listed (last) while an automatic request would be served for some workload:
    # the portfolio maps it to a READY model (like OpenRouter's `openrouter/auto`), so a client
    # that picks models from this list can choose it; `grid_workloads` says for which work.
    if workloads:
        data.append(
            {
                "id": AUTO_MODEL,
                "object": "model",
                "created": 0,
                "owned_by": "grid",
                "grid_workloads": workloads,
            }
        )
    return {"object": "list", "data": data}


@router.get("/models/{model_id:path}", response_model=None)
async def retrieve_model(model_id: str, request: Request, service: Service) -> Response:
    """One entry of GET /v1/models: 200 when the model has a READY engine, else 404."""
    listed = await list_models(request, service)
    entry = next((m for m in listed["data"] if m["id"] == model_id), None)
    if entry is not None:
        return JSONResponse(entry)
    if model_id == AUTO_MODEL:
        return openai_error(
            404,
            "model_unavailable",
            "model 'auto' is not servable yet: no workload is mapped to a READY model",
            fix="send requests with model 'auto' (they are answered 503 workload_preparing "
            "while Grid prepares a model for their work) and retry when GET /v1/models lists it",
        )
    if model_id in service.controller.profiles:
        return openai_error(
            404,
            "model_unavailable",
            f"model {model_id!r} is configured but no engine has it READY yet",
            fix="retry when GET /v1/models lists it; requests for it count as demand",
        )
    return openai_error(
        404,
        "model_not_found",
        f"model {model_id!r} is not served by this Grid",
        fix="list the served models with GET /v1/models",
    )


@router.post("/chat/completions", response_model=None)
async def chat_completions(request: Request, service: Service) -> Response:
    return await _proxy(request, service, EndpointFamily.CHAT, "/v1/chat/completions")


@router.post("/completions", response_model=None)
async def completions(request: Request, service: Service) -> Response:
    return await _proxy(request, service, EndpointFamily.COMPLETIONS, "/v1/completions")


def _refusal_response(refusal: RouteRefusal) -> JSONResponse:
    return openai_error(
        503,
        "model_unavailable" if refusal.code == "no_route" else refusal.code,
        refusal.message,
        fix="retry shortly: Grid loads demanded models; `grid allocator status` shows why",
    )


def _preparing_response(preparing: Preparing) -> JSONResponse:
    model = preparing.model_id
    what = f"model {model!r}" if model else "a model"
    error = {
        "message": f"no ready model serves {preparing.workload!r} work yet; Grid is preparing "
        f"{what} for it ({preparing.state}: {preparing.reason})",
        "type": "server_error",
        "code": "workload_preparing",
        "fix": "retry shortly; `grid allocator status` shows the workload's admission row",
    }
    return JSONResponse(
        {"error": error, "preparing": preparing.to_dict()},
        status_code=503,
        headers={"Retry-After": "5"},
    )


async def _proxy(request: Request, service: Service, family: EndpointFamily, path: str) -> Response:
    """Parse, choose an engine, send the request to it, then relay and record the answer."""
    started = time.perf_counter()
    ctl = service.controller
    try:
        body = await _read_request(request)
        facts = read_facts(body, family, ctl.classifier)
        affinity = hash_affinity_key(request.headers.get(AFFINITY_HEADER))
    except GridError as err:
        return openai_error(status_for(err), err.code, err.message, err.fix)
    if affinity is not None:
        facts = replace(facts, affinity_digest=affinity.digest)
    if (wrong := kind_refusal(ctl.profiles, facts.model_id, family)) is not None:
        return wrong  # a chat request to an embedding model, or the reverse (issue 21)
    picked = await _choose(request, service, facts, affinity, started)
    if isinstance(picked, Response):
        return picked
    if facts.auto:
        body = bind_model(body, picked.route.model_id)
    route = picked.route
    facts = facts.served_by(
        Served(route.model_id, route.artifact_sha256, route.host_id, route.engine_id, route.queued)
    )
    proxy = proxy_state(request)
    dialer: Dialer = request.app.state.dialer
    sent = dialer.send(route, picked.engine_key, path, body, _accept(request), service.clock())
    reply = await _engine_step(
        request, proxy, picked, service, facts, started, sent, connecting=True
    )
    if isinstance(reply, Response):  # the hop failed or the client left: never retried
        return reply
    if facts.stream and 200 <= reply.status_code < 300:
        return _stream(proxy, picked, service, facts, started, reply)
    try:
        content = await _engine_step(
            request, proxy, picked, service, facts, started, _read_bounded(reply), connecting=False
        )
    finally:
        await reply.aclose()
    if isinstance(content, Response):
        return content
    if picked.external and 200 <= reply.status_code < 300 and not openai_shaped(content, path):
        return external_failure(proxy, picked, service, facts, started, "external_not_openai")
    return _record_reply(proxy, picked, service, facts, started, reply, content)


async def _choose(
    request: Request,
    service: Service,
    facts: RequestFacts,
    affinity: AffinityKey | None,
    started: float,
) -> Upstream | Response:
    """The engine to send the request to, or the response refusing it: 404 for a model this
    Grid does not serve, else 503 (no engine saw it: demand for the model, or for the workload
    of an automatic request, never an engine error)."""
    proxy = proxy_state(request)
    window: RouteWindow = request.app.state.route_window  # just started: await heartbeats
    if facts.auto:
        prepared = await _pick_auto(proxy, window, service, facts, affinity)
        if not isinstance(prepared, Preparing):
            return prepared
        refused: Response = _preparing_response(prepared)
    else:
        chosen = await _pick_named(proxy, window, service, facts, affinity)
        if not isinstance(chosen, RouteRefusal):
            return chosen
        if chosen.code == "no_route" and facts.model_id not in service.controller.profiles:
            return openai_error(
                404,
                "model_not_found",
                f"model {facts.model_id!r} is not served by this Grid",
                fix="list the served models with GET /v1/models",
            )
        refused = _refusal_response(chosen)
    facts_done = facts.finished(Outcome.NO_ROUTE, time.perf_counter() - started, None)
    return _with_observation(refused, service, facts_done)


async def _pick_auto(
    proxy: ProxyState,
    window: RouteWindow,
    service: Service,
    facts: RequestFacts,
    affinity: AffinityKey | None,
) -> Upstream | Preparing:
    """A READY model the portfolio maps the request's workload to, or what is prepared."""

    async def choose_auto() -> Upstream | Preparing:
        return await run_in_threadpool(
            proxy.choose_auto,
            service.controller,
            facts.shape.workload,
            service.clock(),
            affinity=affinity,
            max_tokens=facts.max_tokens,
        )

    # Just after a start the first plan and heartbeats are still coming: wait (bounded).
    return await window.retry(
        choose_auto, lambda c: not isinstance(c, Preparing), await choose_auto()
    )


async def _pick_named(
    proxy: ProxyState,
    window: RouteWindow,
    service: Service,
    facts: RequestFacts,
    affinity: AffinityKey | None,
) -> Upstream | RouteRefusal:
    """An engine of the named model, or why there is none (waiting, bounded, after a start
    while the model is configured)."""
    ctl = service.controller

    async def choose() -> Upstream | RouteRefusal:
        now = service.clock()
        quick = proxy.try_choose(
            ctl, facts.model_id, now, affinity=affinity, max_tokens=facts.max_tokens
        )
        if quick is not None:  # no lock was held: chosen here, without a thread hop
            return quick
        return await run_in_threadpool(
            proxy.choose,
            ctl,
            facts.model_id,
            now,
            affinity=affinity,
            max_tokens=facts.max_tokens,
        )

    return await window.retry(
        choose,
        lambda c: not (isinstance(c, RouteRefusal) and facts.model_id in ctl.profiles),
        await choose(),
    )


async def _engine_step(
    request: Request,
    proxy: ProxyState,
    chosen: Upstream,
    service: Service,
    facts: RequestFacts,
    started: float,
    work: Awaitable[T],
    *,
    connecting: bool,
) -> T | Response:
    """`work`'s result (sending to the engine, or reading its answer), or the response for
    its failure: a failed hop is answered and never retried; a client that left, or any
    surprise (re-raised), frees the route and counts nothing."""
    try:
        return await _until_disconnect(request, work)
    except UpstreamError as exc:
        if connecting and chosen.external and exc.code == "engine_tls_failed":
            return external_failure(proxy, chosen, service, facts, started, exc.code)
        return _transport_failure(proxy, chosen, service, facts, started, exc)
    except ClientLeft:  # the engine request was cancelled with it
        proxy.abandon(chosen, service.clock())
        return Response(status_code=CLIENT_CLOSED)
    except BaseException:
        proxy.abandon(chosen, service.clock())
        raise


def _record_reply(
    proxy: ProxyState,
    chosen: Upstream,
    service: Service,
    facts: RequestFacts,
    started: float,
    reply: EngineReply,
    content: bytes,
) -> Response:
    """Finish the route with the engine's status, and the client's response with its
    observation (the engine's own 5xx and 429 are errors; a caller's 4xx is served demand)."""
    elapsed = time.perf_counter() - started
    usage = usage_of(content) if 200 <= reply.status_code < 300 else None
    completion = usage.completion_tokens if usage is not None else None
    proxy.finish(
        chosen, reply.status_code, service.clock(), latency_s=elapsed, completion_tokens=completion
    )
    engine_failed = classify_status(reply.status_code) in ENGINE_FAILURES
    outcome = Outcome.ERROR if engine_failed else Outcome.OK
    media_type = reply.headers.get("content-type", "application/json")
    if reply.status_code >= 400:  # the engine's error in the one /v1 error shape
        content, media_type = engine_error(content, reply.status_code), "application/json"
    response = Response(
        content,
        status_code=reply.status_code,
        media_type=media_type,
        headers=_served_headers(chosen, facts),
    )
    return _with_observation(response, service, facts.finished(outcome, elapsed, usage))


class ClientLeft(Exception):
    """The client disconnected while the engine was still working on its request."""


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _until_disconnect(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result, unless the client disconnects first: then `work` is cancelled (over
    the relay that sends CANCEL, so the engine stops too) and ClientLeft is raised."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # this request itself is being cancelled: so is its work
        watcher.cancel()
        task.cancel()
        raise
    watcher.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task  # let the cancellation run (over the relay it sends the CANCEL)
        raise ClientLeft()
    return task.result()


def _accept(request: Request) -> str:
    # Only what the engine needs crosses: never the client's Authorization or affinity headers.
    # An Accept value that cannot be encoded (non-ASCII) would fail the hop after the route was
    # claimed: such a value falls back to JSON.
    accept = request.headers.get("accept", "application/json")[:256]
    return accept if accept.isascii() and accept.isprintable() else "application/json"


def _served_headers(chosen: Upstream, facts: RequestFacts) -> dict[str, str]:
    headers = {"X-Grid-Served-By": chosen.route.host_id}
    if facts.auto:
        headers["X-Grid-Model"] = chosen.route.model_id
        headers["X-Grid-Workload"] = facts.shape.workload
    return headers


async def _joined(chunks: AsyncIterator[bytes], limit: int, too_large: Exception) -> bytes:
    """The chunks joined, or `too_large` raised as soon as they pass `limit` bytes."""
    kept: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise too_large
        kept.append(chunk)
    return b"".join(kept)


async def _read_request(request: Request) -> bytes:
    too_large = GridError(
        "request_too_large",
        f"the request body is larger than {MAX_BODY_BYTES} bytes",
        fix="send a smaller request",
        details={"http_status": 413},
    )
    return await _joined(request.stream(), MAX_BODY_BYTES, too_large)


async def _read_bounded(reply: EngineReply) -> bytes:
    too_large = UpstreamError(
        "response_too_large", "the engine's answer is larger than the proxy accepts"
    )
    return await _joined(reply.aiter_raw(), MAX_RESPONSE_BYTES, too_large)


def _transport_failure(
    proxy: ProxyState,
    chosen: Upstream,
    service: Service,
    facts: RequestFacts,
    started: float,
    failure: UpstreamError,
) -> Response:
    elapsed = time.perf_counter() - started
    proxy.finish(
        chosen,
        None,
        service.clock(),
        latency_s=elapsed,
        completion_tokens=None,
        failure=(failure.code, failure.message),
    )
    log.warning("engine %s failed for %s: %s", chosen.route.engine_id, facts.model_id, failure.code)
    timed_out = failure.timed_out
    response = openai_error(
        504 if timed_out else 502,
        failure.code,
        f"the engine chosen for model {facts.model_id!r} did not answer ({failure.message}); "
        "it was not retried",
        fix=_FAILURE_FIXES.get(failure.code, _RETRY_FIX),
    )
    outcome = Outcome.TIMEOUT if timed_out else Outcome.ERROR
    return _with_observation(response, service, facts.finished(outcome, elapsed, None))


_RETRY_FIX = "send the request again: later requests avoid a failing engine"
_FAILURE_FIXES = {
    "engine_tls_failed": "give the endpoint a certificate its CA file verifies (or the right "
    "--ca-file); Grid never falls back to plain HTTP",
    "relay_disconnected": "send the request again: the node reconnects its tunnel by itself; "
    "`grid allocator status` shows the live tunnels",
}


def _stream(
    proxy: ProxyState,
    chosen: Upstream,
    service: Service,
    facts: RequestFacts,
    started: float,
    reply: EngineReply,
) -> StreamingResponse:
    reader = SseUsageReader()
    result: dict[str, Any] = {}

    async def relay() -> AsyncIterator[bytes]:
        status: int | None = reply.status_code
        cancelled = True  # until the stream ends or fails on the engine's side
        try:
            async for chunk in reply.aiter_raw():
                reader.feed(chunk)
                yield chunk
            cancelled = False
        except UpstreamError:
            status, cancelled = None, False
        finally:
            await reply.aclose()  # before the end (the client left): the engine stops too
            elapsed = time.perf_counter() - started
            usage = reader.usage
            completion = usage.completion_tokens if usage is not None else None
            proxy.finish(
                chosen,
                status,
                service.clock(),
                latency_s=elapsed,
                completion_tokens=completion,
                cancelled=cancelled,
            )
            outcome = Outcome.OK if status is not None else Outcome.ERROR
            result["facts"] = facts.finished(outcome, elapsed, usage)

    async def after_stream() -> None:
        if not chosen.finished:  # the stream never ran (the client left before it started)
            await reply.aclose()
            proxy.abandon(chosen, service.clock())
        done = result.get("facts")
        if done is not None:
            await run_in_threadpool(observe_quietly, service, done)

    return StreamingResponse(
        relay(),
        status_code=reply.status_code,
        media_type=reply.headers.get("content-type", "text/event-stream"),
        headers={**_served_headers(chosen, facts), "Cache-Control": "no-cache"},
        background=BackgroundTask(after_stream),
    )


def _with_observation(response: Response, service: Service, facts: RequestFacts) -> Response:
    response.background = BackgroundTask(observe_quietly, service, facts)
    return response
