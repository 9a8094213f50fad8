"""OpenAI compatibility of the /v1 boundary (issue 14, item 9) on a real controller process
with a fake engine on loopback (the engine is an outside thing here; tests/e2e drives real
llama.cpp): GET /v1/models/{id}, and one error body for every error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.router.fake_engine import FakeEngine
from tests.router.test_proxy_service import ENGINE_KEY, configure, register
from tests.service.harness import ControllerProcess

pytestmark = pytest.mark.service


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    process = ControllerProcess(Path(tmp_path_factory.mktemp("openai")) / "ctl")
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def engine(server: ControllerProcess) -> Iterator[FakeEngine]:
    fake = FakeEngine(ENGINE_KEY, "e1").start()
    configure(server, "m1")
    configure(server, "m2")  # configured, no engine
    register(server, "h1", {"m1": fake})
    try:
        yield fake
    finally:
        fake.stop()


def _shape(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) <= {"error", "preparing"}
    error = body["error"]
    assert {"message", "type", "code"} <= set(error) <= {"message", "type", "code", "fix"}
    assert all(isinstance(error[k], str) and error[k] for k in ("message", "type", "code"))
    assert error["code"] == code
    assert error["type"] == ("server_error" if status >= 500 else error["type"])
    return error


def test_retrieve_a_listed_model(server: ControllerProcess, engine: FakeEngine) -> None:
    listed = httpx.get(f"{server.url}/v1/models").json()["data"]
    entry = next(m for m in listed if m["id"] == "m1")
    one = httpx.get(f"{server.url}/v1/models/m1")
    assert one.status_code == 200
    assert one.json() == entry == {"id": "m1", "object": "model", "created": 0, "owned_by": "grid"}


def test_retrieve_a_model_that_is_not_served(server: ControllerProcess, engine: FakeEngine) -> None:
    unknown = _shape(httpx.get(f"{server.url}/v1/models/nope"), 404, "model_not_found")
    assert "nope" in unknown["message"]
    configured = _shape(httpx.get(f"{server.url}/v1/models/m2"), 404, "model_unavailable")
    assert "m2" in configured["message"] and "READY" in configured["message"]


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/v1/nothing-here", 404, "not_found"),
        ("GET", "/v1/chat/completions", 405, "method_not_allowed"),
        ("DELETE", "/v1/models", 405, "method_not_allowed"),
        ("PUT", "/v1/completions", 405, "method_not_allowed"),
    ],
)
def test_framework_errors_have_the_openai_shape(
    server: ControllerProcess, method: str, path: str, status: int, code: str
) -> None:
    error = _shape(httpx.request(method, f"{server.url}{path}"), status, code)
    assert error["type"] == "invalid_request_error"
    assert path in error["message"]


def test_refusals_have_the_openai_shape(server: ControllerProcess, engine: FakeEngine) -> None:
    url = f"{server.url}/v1/chat/completions"
    bad_json = httpx.post(url, content=b"{not json", headers={"Content-Type": "application/json"})
    assert bad_json.status_code in (400, 422)
    _shape(bad_json, bad_json.status_code, bad_json.json()["error"]["code"])
    unknown = httpx.post(url, json={"model": "ghost", "messages": []})
    _shape(unknown, 404, "model_not_found")
    unavailable = httpx.post(url, json={"model": "m2", "messages": []})
    assert unavailable.status_code == 503
    _shape(unavailable, 503, unavailable.json()["error"]["code"])


@pytest.fixture(scope="module")
def failing(server: ControllerProcess) -> Iterator[dict[str, FakeEngine]]:
    """One model per failure mode, each on its own engine (a breaker opens per model)."""
    fakes = {mode: FakeEngine(ENGINE_KEY, f"fail-{mode}").start() for mode in ("400", "429", "500")}
    for mode, fake in fakes.items():
        fake.mode = mode
        configure(server, f"m-{mode}")
    register(server, "h2", {f"m-{mode}": fake for mode, fake in fakes.items()})
    try:
        yield fakes
    finally:
        for fake in fakes.values():
            fake.stop()


@pytest.mark.parametrize(
    ("mode", "code", "kind"),
    [
        ("400", "invalid_request", "invalid_request_error"),
        ("429", "rate_limited", "rate_limit_error"),
        ("500", "engine_error", "server_error"),
    ],
)
def test_engine_errors_have_the_openai_shape(
    server: ControllerProcess, failing: dict[str, FakeEngine], mode: str, code: str, kind: str
) -> None:
    reply = httpx.post(
        f"{server.url}/v1/chat/completions",
        json={"model": f"m-{mode}", "messages": [{"role": "user", "content": "hi"}]},
    )
    error = _shape(reply, int(mode), code)
    assert error["type"] == kind
    assert error["message"] == f"the engine answered HTTP {mode}: fake {mode}"
    assert failing[mode].requests  # the engine really answered it
