"""The durable controller document (schema v1): what survives a restart, and nothing else.

Kept: mode, policy, model profiles, retirement tombstones, the plan-generation counter, the
highest controller term issued, action records (bounded history) with the command envelope of
every open one, learned timings, the demand tracker's bounded state, per-model last-used
watermarks, workload forecasts, outcome evidence, learned workflow transitions and the digests
of the client keys of /v1. Not kept:
host membership (hosts must re-register after a restart), secrets and the workflow cursors
(named with a per-process secret).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from grid.fleet import (
    Action,
    ActionKind,
    ActionRecord,
    ExternalEndpoint,
    Mode,
    ModelProfile,
    Policy,
    Tombstone,
    WireCommand,
    WireLaunch,
)

STATE_SCHEMA_VERSION = 1
MAX_TERMINAL_RECORDS = 512  # newest finished records kept for backoff and status


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Command(_Strict):
    """An executable action issued to one host, with the authority it was delivered under."""

    action: Action
    plan_generation: str
    issued_seq: int = Field(ge=0)
    controller_term: int = Field(default=0, ge=0)
    controller_id: str = ""
    controller_lease_expires_at: float = Field(default=0.0, ge=0)

    def wire(self, *, created_at: float, profile: ModelProfile | None = None) -> WireCommand:
        """The command as a node receives it (spec "Local wire contract"), typed.

        It carries the model's artifact facts from `profile` (the profile as the controller
        holds it now), so a node verifies and, where authorized, fetches the exact artifact
        without asking for anything else; each is null when undeclared (additive fields). Every
        field is within the wire's limits by construction (a profile's model id is at most
        `MAX_MODEL_ID` characters), so building it never fails at delivery. An evict (and a
        predictive load) carries the exact SHA-256 the plan proved, not the profile's current
        one: the node deletes only that artifact.
        """
        a = self.action
        sha = profile.artifact_sha256 if profile else None
        if a.artifact_sha256 and (a.kind is ActionKind.EVICT or a.predictive):
            sha = a.artifact_sha256
        return WireCommand(
            action_id=a.action_id,
            kind=a.kind.value,  # every action kind is a node command kind
            node_id=a.host_id,
            host_id=a.host_id,
            model_id=a.model_id,
            memory_mb=a.memory_mb,
            plan_generation=self.plan_generation,
            controller_term=self.controller_term,
            controller_id=self.controller_id,
            controller_lease_expires_at=self.controller_lease_expires_at,
            dependencies=list(a.dependencies),
            executable=a.executable,
            reason=a.reason,
            created_at=created_at,
            not_before=a.not_before,
            attempt=a.attempt,
            artifact_source=profile.artifact_source if profile else None,
            artifact_sha256=sha,
            artifact_size_mb=profile.artifact_size_mb if profile else None,
            chat_template=profile.chat_template if profile else None,
            predictive=a.predictive and a.kind is ActionKind.LOAD,
            launch=WireLaunch.of(profile) if profile else None,
            schema_version=1,
        )


class ClientKeyRecord(BaseModel):
    """One client key of /v1 (grid/api/client_keys.py): only its SHA-256 is ever kept."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._-]+$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    prefix: str = Field(max_length=16)  # the key's first characters, to recognise it
    created_at: float
    revoked_at: float | None = None


class ControllerDocument(_Strict):
    schema_version: Literal[1] = 1
    saved_at: float = Field(default=0.0, ge=0)
    mode: Mode = Mode.RECOMMEND
    policy: Policy = Field(default_factory=Policy)
    profiles: list[ModelProfile] = Field(default_factory=list)
    tombstones: list[Tombstone] = Field(default_factory=list)
    generation: dict[str, Any] = Field(default_factory=dict)
    max_term: int = Field(default=0, ge=0)
    issued_seq: int = Field(default=0, ge=0)
    records: list[ActionRecord] = Field(default_factory=list)
    commands: list[Command] = Field(default_factory=list)
    timings: list[dict[str, Any]] = Field(default_factory=list)
    demand: dict[str, Any] = Field(default_factory=dict)
    model_last_used_at: dict[str, float] = Field(default_factory=dict)
    # Issue 9 (absent in older files: they load with empty workload history): the workload
    # tracker, the outcome evidence store and the learned workflow transitions, each bounded
    # by its own module (grid/demand/workloads.py, evidence.py, workflow.py).
    workloads: dict[str, Any] = Field(default_factory=dict)
    evidence: dict[str, Any] = Field(default_factory=dict)
    workflow: dict[str, Any] = Field(default_factory=dict)
    # Operator drains of hosts (host_id -> reason; absent in older files: none drained).
    host_drains: dict[str, str] = Field(default_factory=dict)
    # Issue 21: external OpenAI-compatible endpoints the operator added (their health is live).
    externals: list[ExternalEndpoint] = Field(default_factory=list)
    # Client keys of /v1, hashed: they follow the store (file or etcd), so every controller of
    # a cluster accepts them (absent in older files: none, or imported from client_keys.json).
    client_keys: list[ClientKeyRecord] = Field(default_factory=list)


def bound_records(records: list[ActionRecord]) -> list[ActionRecord]:
    """Keep every record that still matters plus the newest finished ones.

    Open records and withdrawn-after-delivery records without a receipt hold slots or block
    destructive work, so they are never dropped; finished history is trimmed oldest first.
    """
    keep = [r for r in records if r.holds_slot or r.is_open]
    done = [r for r in records if not (r.holds_slot or r.is_open)]
    done.sort(key=lambda r: (r.finished_at or r.withdrawn_at or r.created_at, r.action_id))
    kept_done = done[-MAX_TERMINAL_RECORDS:]
    return keep + kept_done
