"""The relay tunnel's wire: frames multiplexed over one WebSocket (docs/addressing.md "Relay").

A node agent dials the controller (`wss://CONTROLLER/relay/{host_id}`, its node credential in
`X-Grid-Allocator-Node-Token`) and keeps that one connection open. The controller sends each
engine request down it as a stream; the node forwards the request to its own loopback engine,
adding the engine key there (the key never leaves the node), and sends the answer back on the
same stream. Every WebSocket message is one binary frame:

    byte 0      kind (`Kind`)
    bytes 1-4   stream id, unsigned big-endian (chosen by the controller, never 0)
    bytes 5-    payload

    REQUEST   controller -> node  u32 head length, head JSON (`RequestHead`), then the body
    RESPONSE  node -> controller  head JSON (`ResponseHead`): status and content type
    DATA      node -> controller  a chunk of the answer, as the engine sent it
    END       node -> controller  the answer is complete
    ERROR     node -> controller  JSON {"code", "message"}: the node could not reach the engine
    CANCEL    controller -> node  the client left: abort the engine request
    WHOLE     node -> controller  u32 head length, head JSON (`ResponseHead`), then the whole
                                  body: an answer of known length in one frame (RESPONSE,
                                  DATA and END at once)

The codec is pure; the controller side is `grid/api/relay.py`, the node side
`grid/node/agent/tunnel.py`.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

RELAY_PATH = "/relay"
MAX_FRAME_BYTES = 20 * 1024 * 1024  # a request head and body (bodies are at most 16 MiB)
CHUNK_BYTES = 64 * 1024  # answers travel in DATA frames of at most this size
# An engine request may use only these paths (any engine kind: chat, completions, embeddings).
ENGINE_PATH_PREFIX = "/v1/"
_HEADER = struct.Struct(">BI")
_LENGTH = struct.Struct(">I")


class Kind(IntEnum):
    REQUEST = 1
    RESPONSE = 2
    DATA = 3
    END = 4
    ERROR = 5
    CANCEL = 6
    WHOLE = 7


class FrameError(ValueError):
    """A frame that does not read: the peer speaks another protocol or is broken."""


@dataclass(frozen=True)
class RequestHead:
    method: str
    path: str
    model_id: str
    port: int
    headers: dict[str, str] = field(default_factory=dict)  # content-type and accept only

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "method": self.method,
                "path": self.path,
                "model_id": self.model_id,
                "port": self.port,
                "headers": self.headers,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> RequestHead:
        doc = _object(raw)
        method, path, model, port = (doc.get(k) for k in ("method", "path", "model_id", "port"))
        headers = doc.get("headers", {})
        if not (
            isinstance(method, str)
            and isinstance(path, str)
            and isinstance(model, str)
            and isinstance(port, int)
            and not isinstance(port, bool)
            and isinstance(headers, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
        ):
            raise FrameError("a request head needs method, path, model_id, port and headers")
        return cls(method, path, model, port, dict(headers))


@dataclass(frozen=True)
class ResponseHead:
    status: int
    content_type: str = "application/json"

    def to_json(self) -> bytes:
        return json.dumps({"status": self.status, "content_type": self.content_type}).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> ResponseHead:
        doc = _object(raw)
        status, kind = doc.get("status"), doc.get("content_type", "application/json")
        if not isinstance(status, int) or isinstance(status, bool) or not isinstance(kind, str):
            raise FrameError("a response head needs a status and a content type")
        return cls(status, kind)


def _object(raw: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise FrameError("a frame's JSON does not parse") from None
    if not isinstance(doc, dict):
        raise FrameError("a frame's JSON is not an object")
    return doc


def frame(kind: Kind, stream: int, payload: bytes = b"") -> bytes:
    return _HEADER.pack(kind, stream) + payload


def request_frame(stream: int, head: RequestHead, body: bytes) -> bytes:
    encoded = head.to_json()
    return frame(Kind.REQUEST, stream, _LENGTH.pack(len(encoded)) + encoded + body)


def whole_frame(stream: int, head: ResponseHead, body: bytes) -> bytes:
    encoded = head.to_json()
    return frame(Kind.WHOLE, stream, _LENGTH.pack(len(encoded)) + encoded + body)


def split_whole(payload: bytes) -> tuple[ResponseHead, bytes]:
    head, body = _split(payload)
    return ResponseHead.from_json(head), body


def error_frame(stream: int, code: str, message: str) -> bytes:
    return frame(Kind.ERROR, stream, json.dumps({"code": code, "message": message}).encode())


def parse(data: bytes) -> tuple[Kind, int, bytes]:
    """(kind, stream id, payload) of one frame; FrameError when it is not one."""
    if len(data) < _HEADER.size:
        raise FrameError("a frame is shorter than its header")
    raw_kind, stream = _HEADER.unpack_from(data)
    try:
        kind = Kind(raw_kind)
    except ValueError:
        raise FrameError(f"unknown frame kind {raw_kind}") from None
    if stream == 0:
        raise FrameError("stream id 0 is reserved")
    return kind, stream, data[_HEADER.size :]


def _split(payload: bytes) -> tuple[bytes, bytes]:
    if len(payload) < _LENGTH.size:
        raise FrameError("a frame has no head")
    (length,) = _LENGTH.unpack_from(payload)
    end = _LENGTH.size + length
    if end > len(payload):
        raise FrameError("a head is longer than its frame")
    return payload[_LENGTH.size : end], payload[end:]


def split_request(payload: bytes) -> tuple[RequestHead, bytes]:
    head, body = _split(payload)
    return RequestHead.from_json(head), body


def parse_error(payload: bytes) -> tuple[str, str]:
    try:
        doc = _object(payload)
    except FrameError:
        return "relay_protocol_error", "the node sent an unreadable error frame"
    code, message = doc.get("code"), doc.get("message")
    return (
        code if isinstance(code, str) and code else "relay_error",
        message if isinstance(message, str) else "",
    )


def engine_path_allowed(method: str, path: str) -> bool:
    """Whether a tunnelled request may reach an engine: GET or POST under /v1/, no traversal,
    no query string tricks (the router sends plain API paths only)."""
    return (
        method in ("GET", "POST")
        and path.startswith(ENGINE_PATH_PREFIX)
        and len(path) <= 256
        and ".." not in path
        and "?" not in path
        and "#" not in path
        and "//" not in path
        and path.isascii()
        and path.isprintable()
        and " " not in path
    )
