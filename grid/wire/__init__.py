"""The HTTP client of the allocator API that the CLI and the node agent share.

It speaks the fleet vocabulary (`grid.fleet.wire`) and never imports the server package.
"""

from __future__ import annotations

from grid.wire.client import (
    DEFAULT_TIMEOUT_S,
    AllocatorClient,
    cause_of,
    client_verify,
    is_loopback,
    transport_refusal,
)
from grid.wire.tunnel import (
    CHUNK_BYTES,
    MAX_FRAME_BYTES,
    RELAY_PATH,
    FrameError,
    Kind,
    RequestHead,
    ResponseHead,
    engine_path_allowed,
    error_frame,
    frame,
    parse,
    parse_error,
    request_frame,
    split_request,
    split_whole,
    whole_frame,
)

__all__ = [
    "CHUNK_BYTES",
    "DEFAULT_TIMEOUT_S",
    "MAX_FRAME_BYTES",
    "RELAY_PATH",
    "AllocatorClient",
    "FrameError",
    "Kind",
    "RequestHead",
    "ResponseHead",
    "cause_of",
    "client_verify",
    "engine_path_allowed",
    "error_frame",
    "frame",
    "is_loopback",
    "parse",
    "parse_error",
    "request_frame",
    "split_request",
    "split_whole",
    "transport_refusal",
    "whole_frame",
]
