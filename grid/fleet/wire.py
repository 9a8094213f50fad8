"""The wire between nodes, the CLI and the controller (spec "Local wire contract"), as models.

One class per message, used by both ends:

- `NodeUpdate`: PUT /nodes/{node_id}, registration and heartbeat share one body: `resources`
  (`WireResources`), the `allocator` envelope (`WireAllocator`: lifecycle, cached models,
  residency rows `WireResidency`, `routes` on the host's `advertise_address`), `load` and the
  receipts (`acknowledgements`, `WireAck`);
- `NodeReply`: the controller's answer, carrying the commands for the host (`WireCommand`);
- `NodeStatus`: the node agent's `status.json`, the document `grid allocator node status` shows.

Readers are tolerant where the spec asks for it: the top-level fields of older Grid nodes are
ignored (unknown keys), and an envelope's residency rows and a reply's commands stay raw
(`list[Any]`) so one malformed row or command is excluded on its own (the controller marks the
host unhealthy; the node fails that command) instead of refusing the whole message. Writers send
only the fields they set (`wire_json`), so the JSON on the wire is exactly what the node states.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from grid.fleet.actions import ReceiptStatus
from grid.fleet.engine_settings import EngineSettings
from grid.fleet.models import CHAT_TEMPLATE_PATTERN, MAX_MODEL_ID, MB, ModelProfile, ResidencyState

OPERATOR_HEADER = "X-Grid-Allocator-Token"
NODE_HEADER = "X-Grid-Allocator-Node-Token"
# The controller signs every node reply (issue 15): HMAC-SHA256 over the node record id and
# the exact body, keyed by the per-credential reply key the node got with its credential (the key
# never travels in a request, so whoever merely answers on the controller URL cannot sign).
REPLY_SIGNATURE_HEADER = "X-Grid-Reply-Signature"


def reply_signature(reply_key: str, node_id: str, body: bytes) -> str:
    signed = b"grid-reply-v1\n" + node_id.encode() + b"\n" + body
    mac = hmac.new(reply_key.encode(), signed, hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode("ascii")


def reply_key_path(token_file: str | Path) -> Path:
    """Where a node credential's reply key is kept: `<token file>.reply-key` beside the token
    file (mode 0600), so the token file stays one line (`$(cat FILE)` keeps working)."""
    path = Path(token_file).expanduser()
    return path.with_name(path.name + ".reply-key")


def reply_is_signed(reply_key: str, node_id: str, body: bytes, presented: str | None) -> bool:
    if not presented or len(presented) > 128:
        return False
    expected = reply_signature(reply_key, node_id, body)
    return hmac.compare_digest(expected.encode(), presented.encode("ascii", "replace"))


# An IPv4/IPv6 literal or a DNS name: letters, digits, dots, dashes and colons only.
ADDRESS_PATTERN = r"^[A-Za-z0-9.:-]+$"
DEFAULT_ENGINE_ADDRESS = "127.0.0.1"
MAX_ROWS = 256  # residencies or cached models per host
MAX_TEXT = 512
ACK_STATUSES = tuple(s.value for s in ReceiptStatus)
NODE_COMMAND_KINDS = ("load", "warm", "drain", "unload", "evict")  # what this node actuates
# What a node that does not list its capabilities is taken to actuate (older nodes: no evict).
LEGACY_COMMAND_KINDS = ("load", "warm", "drain", "unload")
NodeCommandKind = Literal["load", "warm", "drain", "unload", "evict"]


class _Tolerant(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


def wire_json(message: BaseModel) -> dict[str, Any]:
    """The JSON body of a message: the fields its writer set, nested ones included."""
    return message.model_dump(mode="json", exclude_unset=True)


# ----------------------------------------------------------------------------- node → controller


class WireResources(_Tolerant):
    # The same 1 PiB ceiling as the fleet model, so an oversized value is a 422, not a 500.
    capacity_mb: MB = Field(ge=0)
    reserved_mb: MB = Field(default=0, ge=0)
    external_mb: MB = Field(default=0, ge=0)
    runtimes: list[str] = Field(default_factory=lambda: ["llama.cpp"], max_length=32)
    backends: list[str] = Field(default_factory=list, max_length=32)
    memory_bandwidth_gbps: float = Field(default=0.0, ge=0)
    compute_gflops: float = Field(default=0.0, ge=0)
    failure_domain: str | None = Field(default=None, max_length=MAX_TEXT)
    tags: list[str] = Field(default_factory=list, max_length=64)
    data_tiers: list[str] = Field(default_factory=lambda: ["public", "internal"], max_length=16)
    max_models: int = Field(default=0, ge=0, le=4096)
    disk_free_mb: MB | None = Field(default=None, ge=0)
    # GPUs (issue 21): the device count and each device's memory (absent: none reported).
    gpu_count: int = Field(default=0, ge=0, le=64)
    gpu_memory_mb: list[Annotated[int, Field(ge=0, le=1 << 30)]] = Field(  # at most 1 PiB
        default_factory=list, max_length=64
    )


class WireResidency(_Tolerant):
    """One residency row as a managed node reports it. Ages (`loaded_age_s`) instead of
    timestamps; `last_used_at` echoes the controller's own watermark; `active_requests` None
    means unknown (fails safe: never idle)."""

    model_id: str = Field(min_length=1, max_length=256)
    memory_mb: MB = Field(default=0, ge=0)
    state: ResidencyState
    managed: bool = True
    runtime: str | None = None
    active_requests: int | None = Field(default=0, ge=0)
    artifact_sha256: str | None = None
    loaded_age_s: float | None = Field(default=None, ge=0)
    loaded_at: float | None = Field(default=None, ge=0)  # older nodes send timestamps
    last_used_at: float | None = Field(default=None, ge=0)


class WireRoute(_Tolerant):
    """A READY Grid-owned child the proxy may reach on this port of the host's advertised
    address (`WireAllocator.advertise_address`)."""

    model_id: str = Field(min_length=1, max_length=256)
    port: int = Field(ge=1, le=65535)
    concurrency: int | None = Field(default=None, ge=0, le=1 << 16)
    queued: int = Field(default=0, ge=0, le=1 << 20)
    # The controller's grant for this residency (the WARM command's `grant`, echoed): a route
    # is used only for a residency the controller commanded (grid.runtime.controller.trust).
    grant: str | None = Field(default=None, max_length=128)


class WireAllocator(_Tolerant):
    schema_version: int = 1
    state: str = "accepting"
    throttle_fraction: float = Field(default=1.0, ge=0.0, le=1.0)
    cached_models: list[str] = Field(default_factory=list, max_length=MAX_ROWS)
    # Raw on receipt: `grid.runtime.controller.wire.parse_residency` reads each row on its own
    # (a malformed one is excluded and makes the host unhealthy). A node puts `WireResidency`.
    residencies: list[Any] = Field(default_factory=list, max_length=MAX_ROWS)
    actuator_capabilities: list[str] = Field(
        default_factory=lambda: list(LEGACY_COMMAND_KINDS), max_length=16
    )
    disk_free_mb: MB | None = Field(default=None, ge=0)
    # Provenance of the artifacts the node downloaded because of a predictive prefetch. Raw on
    # receipt like `residencies` (`WirePredictiveEntry` rows; a malformed one is left out, so
    # it is never evicted). A node puts `WirePredictiveEntry`.
    predictive_cache: list[Any] = Field(default_factory=list, max_length=MAX_ROWS)
    # Router inventory: the live child engines and the host's private engine key. The key is
    # taken out by the registry on receipt (memory only) and never appears in any output.
    routes: list[WireRoute] = Field(default_factory=list, max_length=MAX_ROWS)
    engine_key: str | None = Field(default=None, min_length=1, max_length=512, repr=False)
    # The node reaches its engines only over its relay tunnel (docs/addressing.md "Relay"): it
    # sends no engine key, and the router sends these routes down the tunnel, never dials them.
    relay: bool = False
    # The node's authority fence: the highest controller term it accepted and that term's
    # controller, so a controller that lost its state can take a higher term (issue 15).
    highest_term: int = Field(default=0, ge=0)
    controller_id: str = Field(default="", max_length=256)
    # The controller's proof of that term (the accepted command's `term_proof`, echoed): a term
    # is adopted from a node only with it (issue 22).
    term_proof: str | None = Field(default=None, max_length=128)
    # What the node itself finds wrong (e.g. its state folder cannot be written); with these it
    # reports `unhealthy`, and the controller shows them among the host's problems.
    problems: list[str] = Field(default_factory=list, max_length=8)
    # Where this host's engines listen (an IP literal or DNS name; DESIGN "Addressing"): the
    # router dials `routes` there. None (older nodes): the controller's own loopback.
    advertise_address: str | None = Field(
        default=None, min_length=1, max_length=253, pattern=ADDRESS_PATTERN
    )


class WirePredictiveEntry(_Tolerant):
    """One predictive download as the node reports it: an age, not a timestamp."""

    model_id: str = Field(min_length=1, max_length=256)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size_mb: int = Field(ge=0, le=1 << 40)
    cached_age_s: float = Field(ge=0)
    warmed: bool = False


class WireAck(_Tolerant):
    """A receipt: the terminal outcome of one command, as the node reports it."""

    action_id: str = Field(min_length=1, max_length=128)
    status: str = Field(max_length=32)
    message: str = Field(default="", max_length=MAX_TEXT)
    duration_seconds: float | None = None
    artifact_fetched: bool = False


class WireLoad(_Tolerant):
    active_tasks: int = Field(default=0, ge=0)
    queue_depth: int = Field(default=0, ge=0)


class NodeUpdate(_Tolerant):
    """PUT /nodes/{node_id}: registration (with host_id and resources) or heartbeat."""

    node_id: str | None = Field(default=None, max_length=MAX_TEXT)
    role: str | None = Field(default=None, max_length=64)
    host_id: str | None = Field(default=None, min_length=1, max_length=MAX_TEXT)
    models: list[str] = Field(default_factory=list, max_length=MAX_ROWS)
    resources: WireResources | None = None
    allocator: WireAllocator | None = None
    load: WireLoad | None = None
    request_commands: bool = True
    acknowledgements: list[WireAck] = Field(default_factory=list, max_length=MAX_ROWS)


# ----------------------------------------------------------------------------- controller → node


class WireLaunch(_Tolerant):
    """How a model's engine is started, from its profile (docs/engines.md): every WARM and every
    reply (for the models resident on the host) carries it; the node lays its own overrides on
    top and restarts a running child whose command line changes."""

    runtimes: list[str] = Field(default_factory=lambda: ["llama.cpp"], max_length=16)
    kind: str = Field(default="text", max_length=32)
    pooling: Literal["mean", "cls", "last", "rank", "none"] | None = None
    engine: EngineSettings = Field(default_factory=EngineSettings)
    gpu_count: int = Field(default=0, ge=0, le=64)
    chat_template: StrictStr | None = Field(default=None, pattern=CHAT_TEMPLATE_PATTERN)

    @classmethod
    def of(cls, profile: ModelProfile) -> WireLaunch:
        return cls(
            chat_template=profile.chat_template,
            runtimes=list(profile.runtimes),
            kind=profile.kind.value,
            pooling=profile.pooling,
            engine=profile.engine,
            gpu_count=profile.gpu_demand[0],
        )


class WireCommand(_Tolerant):
    """One command as a node receives it (spec "Local wire contract").

    Besides the action it carries the authority it was delivered under (term, controller id,
    absolute lease deadline) and the model's artifact facts from its profile (each null when
    undeclared), so a node verifies and, where authorized, fetches the exact artifact.
    Types are strict: a command whose fields do not validate is failed, never guessed at.
    """

    action_id: StrictStr = Field(min_length=1, max_length=128)
    kind: NodeCommandKind
    node_id: StrictStr | None = None
    host_id: StrictStr | None = None
    model_id: StrictStr = Field(min_length=1, max_length=MAX_MODEL_ID)
    memory_mb: StrictInt = Field(default=0, ge=0)
    plan_generation: StrictStr = ""
    controller_term: StrictInt = Field(default=0, ge=0)
    controller_id: StrictStr = ""
    controller_lease_expires_at: float = Field(default=0.0, ge=0)
    dependencies: list[StrictStr] = Field(default_factory=list, max_length=MAX_ROWS)
    executable: StrictBool = False
    reason: str = ""
    created_at: float | None = None
    not_before: float | None = None
    attempt: int = 0
    artifact_source: StrictStr | None = None
    artifact_sha256: StrictStr | None = None
    artifact_size_mb: StrictInt | None = Field(default=None, ge=0)
    chat_template: StrictStr | None = Field(default=None, pattern=CHAT_TEMPLATE_PATTERN)
    # A cache-only load a prediction asked for (the node records the download's provenance);
    # an `evict` removes exactly `artifact_sha256` and nothing else.
    predictive: StrictBool = False
    launch: WireLaunch | None = None  # the profile's engine facts (None: older controllers)
    # The controller's attestations (grid.runtime.controller.trust): the proof of the term the
    # command was delivered under, and for a WARM the grant of the residency's route. The node
    # keeps and echoes them; it cannot make them.
    term_proof: StrictStr | None = Field(default=None, max_length=128)
    grant: StrictStr | None = Field(default=None, max_length=128)
    schema_version: int = 1

    @property
    def target_host(self) -> str | None:
        """The host the command is for (`host_id`; older controllers send only `node_id`)."""
        return self.host_id if self.host_id is not None else self.node_id


class AckAnswer(_Tolerant):
    """The controller's verdict on one receipt (applied, duplicate, ...)."""

    action_id: str
    result: str


class ReplyAllocator(_Tolerant):
    schema_version: int = 1
    mode: str = ""
    # The controller's remaining authority in its own clock domain (None: unreadable, none).
    controller_lease_ttl_seconds: float | None = None
    revision: int = 0
    commands: list[Any] = Field(default_factory=list)  # raw: each is read as a WireCommand
    held_destructive: list[str] = Field(default_factory=list)


class NodeReply(_Tolerant):
    """The answer to PUT /nodes/{node_id}."""

    node_id: str = ""
    host_id: str = ""
    ttl_seconds: float = 0.0
    model_last_used_at: dict[str, float] = Field(default_factory=dict)
    acknowledgements: list[AckAnswer] = Field(default_factory=list)
    allocator: ReplyAllocator = Field(default_factory=ReplyAllocator)
    # The launch facts of the models resident on the host (settings changes restart them).
    launch: dict[str, WireLaunch] = Field(default_factory=dict)


# ----------------------------------------------------------------------------- node status


class CommandBrief(_Tolerant):
    action_id: str
    kind: str
    model_id: str
    memory_mb: int = 0


class StatusResidency(_Tolerant):
    model_id: str
    state: str
    memory_mb: int = 0
    pid: int | None = None
    port: int | None = None
    engine: str | None = None  # the supervisor's view of the child (ready, failed, ...)
    reason: str = ""
    runtime: str | None = None  # the engine adapter (llama.cpp, vllm)
    settings: dict[str, Any] = Field(default_factory=dict)  # effective engine settings


class StatusReceipt(_Tolerant):
    action_id: str
    kind: str
    model_id: str
    status: str
    code: str = ""
    message: str = ""
    duration_seconds: float = 0.0
    artifact_fetched: bool = False
    finished_at: float = 0.0
    acknowledged: bool = False


class NodeStatus(_Tolerant):
    """`status.json`: what the running node agent last saw and did. It holds no secret."""

    schema_version: int = 1
    updated_at: float = 0.0
    pid: int | None = None
    instance: str = ""
    host_id: str = ""
    node_id: str = ""
    grid_url: str = ""
    lifecycle: str = ""
    reasons: list[str] = Field(default_factory=list)
    throttle_fraction: float = 0.0
    stopping: bool = False
    registered: bool = False
    controller_mode: str = ""
    last_heartbeat_at: float | None = None
    last_error: str = ""
    highest_term: int = 0
    plan_sequence: int = 0
    in_flight: CommandBrief | None = None
    queue: list[CommandBrief] = Field(default_factory=list)
    residencies: list[StatusResidency] = Field(default_factory=list)
    receipts: list[StatusReceipt] = Field(default_factory=list)
    # The relay tunnel as the node sees it (url, connected, connects, requests, last_error).
    relay: dict[str, Any] | None = None
