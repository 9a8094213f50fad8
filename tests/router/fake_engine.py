"""A fake OpenAI-compatible engine on loopback (the engine is an outside thing for the proxy).

It is a real HTTP server in a thread. It records the headers and bodies it received, checks
the engine key like llama-server's --api-key-file does, and answers in the mode the test sets:
"ok" (a JSON chat completion with usage), "sse" (a streamed completion with final usage),
"500", "429", "400" (status-only answers), "drop" (closes the connection without answering) or
"slow_sse" (a long stream, one event every `delay_s`: `aborted` is set when its reader went away
before the end) or "slow_json" (a JSON answer after `delay_s`, sooner `aborted` when the client
closes the connection first). With `tls=(cert, key)` it serves HTTPS (an external endpoint).
"""

from __future__ import annotations

import json
import select
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class FakeEngine:
    def __init__(
        self,
        engine_key: str,
        name: str = "fake",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.engine_key = engine_key
        self.name = name
        self.mode = "ok"
        self.delay_s = 0.0  # added before every answer: a slow engine
        self.requests: list[dict[str, Any]] = []
        self.aborted = threading.Event()  # a slow_sse reader left before the end
        self._server = ThreadingHTTPServer((host, port), self._handler())
        if tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> FakeEngine:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: object) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                engine.requests.append(
                    {
                        "path": self.path,
                        "headers": dict(self.headers.items()),
                        "body": body,
                        "peer": self.client_address[1],  # the client's port: one per connection
                    }
                )
                if self.headers.get("Authorization") != f"Bearer {engine.engine_key}":
                    return self._json(401, {"error": {"message": "Invalid API Key"}})
                mode = engine.mode
                if mode == "slow_sse":
                    return self._slow_sse()
                if mode == "slow_json":
                    return self._slow_json()
                time.sleep(engine.delay_s)
                if mode == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return None
                if mode in ("500", "429", "400"):
                    return self._json(int(mode), {"error": {"message": f"fake {mode}"}})
                if mode == "sse":
                    return self._sse()
                answer = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "model": json.loads(body).get("model"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"}}],
                    "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
                    "served_by": engine.name,
                }
                return self._json(200, answer)

            def _json(self, status: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _slow_sse(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                piece = b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n'
                try:
                    for _ in range(400):
                        self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                        self.wfile.flush()
                        time.sleep(engine.delay_s or 0.05)
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:  # the reader closed the connection: the work stops here
                    engine.aborted.set()
                    self.close_connection = True

            def _slow_json(self) -> None:
                deadline = time.monotonic() + engine.delay_s
                while time.monotonic() < deadline:
                    ready, _, _ = select.select([self.connection], [], [], 0.05)
                    if ready and self.connection.recv(1, socket.MSG_PEEK) == b"":
                        engine.aborted.set()  # the client closed its connection: stop here
                        self.close_connection = True
                        return None
                return self._json(200, {"choices": [{"message": {"content": "late"}}]})

            def _sse(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                events = [
                    {"choices": [{"delta": {"content": "O"}}]},
                    {"choices": [{"delta": {"content": "K"}}]},
                    {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}},
                ]
                payload = [f"data: {json.dumps(e)}\n\n".encode() for e in events]
                for piece in [*payload, b"data: [DONE]\n\n"]:
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")

        return Handler
