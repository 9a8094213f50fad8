"""A local HTTP file server on 127.0.0.1 for artifact-store tests.

It stands in for the operator-approved mirror (an outside thing), serving real files with
HTTP Range support, and has knobs to misbehave: cut the connection after N body bytes, omit
Content-Length (close-delimited body), answer a fixed status. It records every request's path
and Range header and counts body bytes sent, so tests can assert what was transferred.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

_RANGE_RE = re.compile(r"^bytes=(\d+)-$")


@dataclass
class ServedRequest:
    path: str
    range_header: str | None
    status: int = 0
    body_bytes: int = 0


@dataclass
class ServerKnobs:
    cut_after_bytes: int | None = None  # close the connection after this many body bytes
    cuts_remaining: int = 0  # how many responses are cut
    omit_length: bool = False
    force_status: int | None = None


@dataclass
class FakeMirror:
    """Files by URL path; knobs; the request log."""

    files: dict[str, Path] = field(default_factory=dict)
    knobs: ServerKnobs = field(default_factory=ServerKnobs)
    requests: list[ServedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def body_bytes_sent(self) -> int:
        return sum(r.body_bytes for r in self.requests)


def _handler_for(mirror: FakeMirror) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one request per connection; close ends a body

        def log_message(self, format: str, *args: object) -> None:  # quiet test output
            return

        def do_GET(self) -> None:
            served = ServedRequest(self.path, self.headers.get("Range"))
            with mirror.lock:
                mirror.requests.append(served)
            knobs = mirror.knobs
            if knobs.force_status is not None:
                served.status = knobs.force_status
                self.send_response(knobs.force_status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            file_path = mirror.files.get(self.path)
            if file_path is None:
                served.status = 404
                self.send_error(404)
                return
            data = file_path.read_bytes()
            start = 0
            match = _RANGE_RE.match(served.range_header or "")
            if match:
                start = int(match.group(1))
                if start >= len(data):
                    served.status = 416
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                served.status = 206
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                served.status = 200
                self.send_response(200)
            body = data[start:]
            if not knobs.omit_length:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with mirror.lock:
                cut = knobs.cut_after_bytes if knobs.cuts_remaining > 0 else None
                if cut is not None:
                    knobs.cuts_remaining -= 1
            if cut is not None:
                body = body[:cut]
            try:
                self.wfile.write(body)
                self.wfile.flush()
                served.body_bytes = len(body)
            except (BrokenPipeError, ConnectionResetError):
                return  # the client gave up (for example at the size ceiling)
            if cut is not None:
                self.close_connection = True

    return Handler


class MirrorServer:
    """Context manager: a ThreadingHTTPServer on an ephemeral loopback port."""

    def __init__(self, mirror: FakeMirror) -> None:
        self.mirror = mirror
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(mirror))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> MirrorServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
