"""The bodies of the allocator's operator routes and their replies.

The routes (grid/api) declare them as their request and response models, the HTTP client
(grid/wire) returns them, the CLI renderers read their fields, and the OpenAPI document
(schemas/openapi.json) publishes them. The status document is in `status.py`. The node
messages (registration, heartbeat, commands) are `grid.fleet.wire`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from grid.fleet.actions import Mode, Tombstone
from grid.fleet.externals import ExternalEndpoint, ExternalHealth
from grid.fleet.models import ModelProfile
from grid.fleet.operator.status import TickSummary

MAX_OBSERVATIONS = 1000


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Health(_Message):
    ok: bool
    instance: str
    mode: Mode


class ProfileReply(_Message):
    """PUT /allocator/models/{id}: the profile as the controller saved it."""

    profile: ModelProfile


class TombstoneReply(_Message):
    """DELETE /allocator/models/{id}: the retired model's tombstone."""

    tombstone: Tombstone


class ModeRequest(_Message):
    mode: Literal["observe", "recommend", "automatic"]


class ModeReply(_Message):
    mode: Mode
    previous: Mode
    withdrawn: list[str]  # the undelivered commands leaving automatic withdrew


class TickReply(_Message):
    tick: TickSummary | None
    revision: int
    success_revision: int


class ObservationBatch(_Message):
    """Request observations as the router records them (grid.demand.parse_observation)."""

    observations: list[dict[str, JsonValue]] = Field(max_length=MAX_OBSERVATIONS)


class ObservationError(_Message):
    index: str
    code: str
    path: str


class ObservationReply(_Message):
    accepted: int
    ignored: int
    invalid: int
    errors: list[ObservationError]  # the first 20 refused observations


class IssuedCredential(_Message):
    """A host-scoped node credential, answered once: token, reply key, expiry and id."""

    host_id: str
    token: str = Field(repr=False)
    reply_key: str = Field(repr=False)
    expires_at: float
    credential_id: str


class MintedCredential(IssuedCredential):
    generated_host_id: bool  # the controller chose the host id


class EnrolledCredential(IssuedCredential):
    controllers: list[str]  # every controller's URL on a cluster (etcd), else empty


class CredentialRow(_Message):
    """An issued credential as listed: never its token or key."""

    credential_id: str
    host_id: str
    expires_at: float
    issued_at: float | None
    source: str
    revoked_at: float | None
    state: Literal["valid", "expired", "revoked"]
    last_seen_at: float | None


class CredentialList(_Message):
    credentials: list[CredentialRow]


class RevokeReply(_Message):
    revoked: list[str]
    hosts: list[str]
    tunnels_closed: list[str]


class Enrollment(_Message):
    """A one-time enrollment token for one host (answered once)."""

    host_id: str
    token: str = Field(repr=False)
    expires_at: float


class ExternalView(_Message):
    """PUT /allocator/externals/{name} (and one row of the list): the endpoint as saved, its
    last health verdict and the models routed to it."""

    external: ExternalEndpoint
    health: ExternalHealth
    serving: list[str]


class ExternalList(_Message):
    externals: list[ExternalView]


class ExternalRemoved(_Message):
    removed: str


class DesiredReason(_Message):
    """One model's desired replica count and why, in `grid allocator status` (read from the
    dashboard's view document, which reads the planner's targets)."""

    desired: int
    why: str


class RecordedEvaluation(_Message):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    model_id: str
    workload: str
    artifact_sha256: str | None
    quality: float | None  # the decay-weighted mean after this evaluation
    quality_samples: float
    quality_confidence: float


class EvaluationReply(_Message):
    evaluation: RecordedEvaluation
    revision: int


class CreatedKey(_Message):
    """A new /v1 client key, answered once (201)."""

    name: str
    key: str = Field(repr=False)
    prefix: str
    created_at: float


class RevokedKey(_Message):
    name: str
    revoked_at: float | None


class KeyRevokeReply(_Message):
    revoked: RevokedKey
