"""External OpenAI-compatible endpoints as inventory (docs/engines.md "External endpoints").

An endpoint that someone else runs (vLLM, Ollama, LM Studio, another llama-server) is added by
the operator with its URL, the models it serves and, optionally, the CA that signs its TLS
certificate and the memory it stands for. Grid probes it, routes to it, observes it and counts
its models as external residencies of a host named after it: serving capacity the planner
counts, never drains, never unloads and never places anything on.

Dialled over TLS; plain http only to a loopback address. `ExternalHealth` is what the last
probe (or request) found: healthy, or a stable code and its reason.
"""

from __future__ import annotations

import ipaddress
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from grid.fleet.models import MAX_MB, MAX_MODEL_ID

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$"
MAX_EXTERNAL_MODELS = 64


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_problem(url: str) -> str | None:
    """Why `url` cannot be an external endpoint's base URL (None: it can)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "it is not a URL"
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "it must be an https:// URL with a host"
    if parts.username or parts.password or parts.query or parts.fragment:
        return "it may not carry credentials, a query or a fragment"
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        return "plain http is allowed to a loopback address only; use https"
    return None


def base_url(url: str) -> str:
    """The URL the OpenAI paths (/v1/...) are appended to: no trailing slash or /v1."""
    trimmed = url.rstrip("/")
    return trimmed[: -len("/v1")] if trimmed.endswith("/v1") else trimmed


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ExternalSpec(_Strict):
    """What the operator states about an endpoint (PUT /allocator/externals/{name})."""

    url: str = Field(min_length=8, max_length=2048)
    models: list[str] = Field(min_length=1, max_length=MAX_EXTERNAL_MODELS)
    ca_file: str | None = Field(default=None, max_length=4096)
    capacity_mb: int = Field(default=0, ge=0, le=MAX_MB)
    runtime: str = Field(default="openai", pattern=r"^[A-Za-z0-9._-]{1,32}$")

    @field_validator("models")
    @classmethod
    def _model_ids(cls, value: list[str]) -> list[str]:
        for model_id in value:
            if not 1 <= len(model_id) <= MAX_MODEL_ID or not model_id.isprintable():
                raise ValueError("model ids are 1 to 256 printable characters")
        if len(set(value)) != len(value):
            raise ValueError("a model is listed twice")
        return value


class ExternalEndpoint(ExternalSpec):
    name: str = Field(pattern=NAME_PATTERN)
    added_at: float = Field(default=0.0, ge=0)


class ExternalHealth(_Strict):
    healthy: bool = False
    code: str = "not_probed"  # ok | not_probed | engine_tls_failed | external_unreachable | ...
    reason: str = "not probed yet"
    checked_at: float | None = None  # when the endpoint last answered a probe as it should
    probed_at: float | None = None
    served: list[str] = Field(default_factory=list)  # model ids its /v1/models lists
    source: Literal["probe", "request"] = "probe"
