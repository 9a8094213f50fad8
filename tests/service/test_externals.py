"""External endpoints: bad input (issue 21, part 3). A real controller process and real HTTP
servers on loopback playing endpoints that answer the wrong thing.

The happy path with a real llama-server (and TLS) is tests/e2e/test_engines.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from typer.testing import CliRunner

from grid.cli.main import app
from grid.fleet.errors import GridError
from tests.service.harness import ControllerProcess

pytestmark = pytest.mark.service


class _Endpoint(BaseHTTPRequestHandler):
    answers: ClassVar[dict[str, Any]] = {}

    def _send(self) -> None:
        body = json.dumps(self.answers.get(self.path, {"hello": "world"})).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._send()

    def log_message(self, *_args: object) -> None:
        return


def _serve(answers: dict[str, Any]) -> Iterator[int]:
    handler = type("Handler", (_Endpoint,), {"answers": answers})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def not_openai() -> Iterator[int]:
    yield from _serve({})


@pytest.fixture
def bad_answers() -> Iterator[int]:
    yield from _serve({"/v1/models": {"object": "list", "data": [{"id": "m"}]}})


def _put(admin: Any, name: str, **body: Any) -> dict[str, Any]:
    result: dict[str, Any] = admin.request("PUT", f"/allocator/externals/{name}", json=body)
    return result


def test_an_endpoint_answering_non_openai_json_is_unhealthy_with_the_reason(
    controller: ControllerProcess, not_openai: int
) -> None:
    with controller.admin() as admin:
        admin.put_model("m", {"memory_mb": 100, "min_replicas": 1})
        view = _put(admin, "odd", url=f"http://127.0.0.1:{not_openai}", models=["m"])
        assert view["health"]["healthy"] is False
        assert view["health"]["code"] == "external_not_openai"
        assert "non-OpenAI JSON" in view["health"]["reason"]
        assert view["serving"] == []
        admin.tick()
        status = admin.status(history=0).model_dump(mode="json")
    assert status["externals"][0]["code"] == "external_not_openai"
    odd = next(h for h in status["hosts"] if h["host_id"] == "odd")
    assert odd["state"] == "unhealthy" and odd["ownership"] == "external"
    assert [u["model_id"] for u in status["unmet"]] == ["m"]  # it counts for nothing


def test_a_request_answered_with_non_openai_json_gets_502_and_marks_the_route(
    controller: ControllerProcess, bad_answers: int
) -> None:
    with controller.admin() as admin:
        admin.put_model("m", {"memory_mb": 100})
        view = _put(admin, "half", url=f"http://127.0.0.1:{bad_answers}/v1", models=["m"])
        assert view["health"]["healthy"] and view["serving"] == ["m"]
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    reply = httpx.post(f"{controller.url}/v1/chat/completions", json=chat, timeout=30)
    assert reply.status_code == 502
    error = reply.json()["error"]
    assert error["code"] == "external_not_openai" and error["type"] == "server_error"
    with controller.admin() as admin:
        (row,) = admin.request("GET", "/allocator/externals")["externals"]
    assert row["health"]["healthy"] is False
    assert row["health"]["code"] == "external_not_openai" and row["health"]["source"] == "request"


def test_urls_in_clear_off_loopback_and_unreadable_cas_are_refused(
    controller: ControllerProcess, tmp_path: Path
) -> None:
    junk = tmp_path / "ca.pem"
    junk.write_text("not a certificate")
    refused = [
        ({"url": "http://10.1.2.3:8000"}, "external_url_refused"),  # plain http off loopback
        ({"url": "ftp://127.0.0.1/x"}, "external_url_refused"),
        ({"url": "https://user:pw@127.0.0.1:1"}, "external_url_refused"),
        ({"url": "https://127.0.0.1:1", "ca_file": str(junk)}, "ca_file_unreadable"),
    ]
    with controller.admin() as admin:
        for body, code in refused:
            with pytest.raises(GridError) as caught:
                _put(admin, "bad", models=["m"], **body)
            assert caught.value.code == code, body
        assert admin.request("GET", "/allocator/externals")["externals"] == []


def test_the_cli_adds_lists_and_removes_an_endpoint(
    controller: ControllerProcess, bad_answers: int
) -> None:
    runner = CliRunner()
    flags = ["--grid", controller.url, "--state-dir", str(controller.state_dir)]
    url = f"http://127.0.0.1:{bad_answers}"
    added = runner.invoke(app, ["node", "add-external", "lab", "--url", url, "--models", "m",
                                "--capacity-mb", "512", *flags])  # fmt: skip
    assert added.exit_code == 0, added.output
    assert "lab:" in added.output and "healthy" in added.output
    listed = runner.invoke(app, ["node", "list-external", "--json", *flags])
    (view,) = json.loads(listed.output)["externals"]
    assert view["external"]["capacity_mb"] == 512 and view["serving"] == ["m"]
    shown = runner.invoke(app, ["allocator", "status", *flags])
    assert shown.exit_code == 0, shown.output
    assert "lab" in shown.output  # the external host is a row of the status
    removed = runner.invoke(app, ["node", "remove-external", "lab", *flags])
    assert removed.exit_code == 0
    again = runner.invoke(app, ["node", "remove-external", "lab", *flags])
    assert again.exit_code == 2 and "unknown_external" in again.output
