"""`grid allocator ...`: model profiles, modes, ticks, status and node credentials.

Every command talks to the controller over HTTP (`--grid URL`, default: the local controller of
`--state-dir`). Admin commands take the operator capability from `--token-file`, then
GRID_ALLOCATOR_CONTROL_TOKEN, then the local config.json; it is sent in a header only and never
printed. `status --json` and `--json` elsewhere print exactly one JSON document on stdout.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, ConfigDict, ValidationError
from rich.console import Console

from grid.cli.connection import (
    CaFileOpt,
    GridOpt,
    JsonOpt,
    StateOpt,
    TokenFileOpt,
    _again,
    client,
)
from grid.cli.credential_cmd import credential_app, write_credential_file
from grid.cli.model_set_options import (
    ModelSetAllowHost,
    ModelSetArtifactSha256,
    ModelSetArtifactSizeMb,
    ModelSetArtifactSource,
    ModelSetBackend,
    ModelSetChatTemplate,
    ModelSetColocationExclude,
    ModelSetDataTier,
    ModelSetDenyHost,
    ModelSetExpectedServiceTime,
    ModelSetForbiddenTag,
    ModelSetLatencySloMs,
    ModelSetLoadEstimate,
    ModelSetMaxColocatedModels,
    ModelSetMaxReplicas,
    ModelSetMinFailureDomains,
    ModelSetMinReplicas,
    ModelSetMinResidency,
    ModelSetPin,
    ModelSetPriority,
    ModelSetReplicaConcurrency,
    ModelSetRequiredTag,
    ModelSetRuntime,
    ModelSetRuntimeMemoryMb,
    ModelSetScaleDownCooldown,
    ModelSetTargetUtilization,
    ModelSetWarmEstimate,
    ModelSetWorkloadScore,
)
from grid.cli.render_status import render_status
from grid.cli.text import plural
from grid.fleet import GridError, ModelProfile
from grid.fleet.operator import DesiredReason, ProfileUpdate

T = TypeVar("T")

allocator_app = typer.Typer(
    name="allocator",
    help="Control the fleet allocator: profiles, modes, ticks, status, node credentials.",
    no_args_is_help=True,
)
model_app = typer.Typer(
    help="Create, replace or retire model placement profiles.", no_args_is_help=True
)
token_app = typer.Typer(help="Write host-scoped node credentials.", no_args_is_help=True)
allocator_app.add_typer(model_app, name="model")
allocator_app.add_typer(token_app, name="token")
allocator_app.add_typer(credential_app, name="node-credential")


def _emit(document: BaseModel | dict[str, object]) -> None:
    """A `--json` document: a reply model's JSON form, or a document built here."""
    if isinstance(document, BaseModel):
        document = document.model_dump(mode="json")
    typer.echo(json.dumps(document, indent=2, allow_nan=False))


# ----------------------------------------------------------------------------- model set


def _pairs(values: list[str] | None, flag: str, kind: Callable[[str], T]) -> dict[str, T]:
    out: dict[str, T] = {}
    for raw in values or []:
        name, sep, value = raw.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            out[name] = kind(value)
        except ValueError:
            raise GridError(
                "invalid_option",
                f"{flag} {raw!r} is not NAME=VALUE",
                fix=f"write it as {flag} name=value",
            ) from None
    return out


def _flags_given(update: ProfileUpdate) -> ProfileUpdate:
    """Only the fields whose flags were given (an option left out reads as None, a repeatable
    one as nothing): the rest keep the controller's defaults."""
    given = {
        name: value
        for name, value in update
        if value is not None and not (isinstance(value, list | dict) and not value)
    }
    return ProfileUpdate.model_validate(given)


def _check_artifact_flags(source: str | None, sha256: str | None, size_mb: int | None) -> None:
    if source and not (sha256 and size_mb):
        raise GridError(
            "artifact_source_incomplete",
            "--artifact-source enables autonomous fetch and needs --artifact-sha256 and "
            "--artifact-size-mb too",
            fix="add the exact digest and the download size ceiling, or drop --artifact-source",
        )


@model_app.command("set")
def model_set(
    model_id: Annotated[str, typer.Argument(help="Model id (the GGUF file or alias name).")],
    memory_mb: Annotated[int, typer.Option("--memory-mb", help="Resident MB of one replica.")],
    runtime: ModelSetRuntime = None,
    runtime_memory_mb: ModelSetRuntimeMemoryMb = None,
    backend: ModelSetBackend = None,
    required_tag: ModelSetRequiredTag = None,
    forbidden_tag: ModelSetForbiddenTag = None,
    pin: ModelSetPin = None,
    allow_host: ModelSetAllowHost = None,
    deny_host: ModelSetDenyHost = None,
    workload_score: ModelSetWorkloadScore = None,
    colocation_exclude: ModelSetColocationExclude = None,
    max_colocated_models: ModelSetMaxColocatedModels = None,
    min_replicas: ModelSetMinReplicas = None,
    max_replicas: ModelSetMaxReplicas = None,
    min_failure_domains: ModelSetMinFailureDomains = None,
    priority: ModelSetPriority = None,
    data_tier: ModelSetDataTier = None,
    artifact_sha256: ModelSetArtifactSha256 = None,
    artifact_source: ModelSetArtifactSource = None,
    artifact_size_mb: ModelSetArtifactSizeMb = None,
    target_utilization: ModelSetTargetUtilization = None,
    replica_concurrency: ModelSetReplicaConcurrency = None,
    expected_service_time: ModelSetExpectedServiceTime = None,
    latency_slo_ms: ModelSetLatencySloMs = None,
    load_estimate: ModelSetLoadEstimate = None,
    warm_estimate: ModelSetWarmEstimate = None,
    min_residency: ModelSetMinResidency = None,
    scale_down_cooldown: ModelSetScaleDownCooldown = None,
    chat_template: ModelSetChatTemplate = None,
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    ca_file: CaFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create or replace a model placement profile."""
    _check_artifact_flags(artifact_source, artifact_sha256, artifact_size_mb)
    update = ProfileUpdate(
        memory_mb=memory_mb,
        runtime_memory_mb=_pairs(runtime_memory_mb, "--runtime-memory-mb", int),
        runtimes=runtime,
        backends=backend,
        priority=priority,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        pinned_hosts=pin,
        allowed_hosts=allow_host,
        denied_hosts=deny_host,
        required_tags=required_tag,
        forbidden_tags=forbidden_tag,
        data_tier=data_tier,
        max_colocated_models=max_colocated_models,
        colocation_excludes=colocation_exclude,
        min_failure_domains=min_failure_domains,
        artifact_size_mb=artifact_size_mb,
        artifact_sha256=artifact_sha256,
        artifact_source=artifact_source,
        chat_template=chat_template,
        workload_scores=_pairs(workload_score, "--workload-score", float),
        target_utilization=target_utilization,
        replica_concurrency=replica_concurrency,
        expected_service_time_s=expected_service_time,
        latency_slo_ms=latency_slo_ms,
        load_estimate_s=load_estimate,
        warm_estimate_s=warm_estimate,
        min_residency_s=min_residency,
        scale_down_cooldown_s=scale_down_cooldown,
    )
    with client(grid, state_dir, token_file, ca_file=ca_file) as api:
        saved = api.put_model(model_id, _flags_given(update))
        mode = api.healthz().mode.value
    if as_json:
        _emit(saved)
        return
    _echo_saved(saved.profile, mode, grid, state_dir, token_file)


def _echo_saved(
    prof: ModelProfile,
    mode: str,
    grid: str | None,
    state_dir: Path | None,
    token_file: Path | None,
) -> None:
    """What `model set` prints: the saved profile, the mode when it acts on nothing, and next."""
    typer.echo(
        f"Saved profile {prof.model_id}: {prof.memory_mb} MB, replicas "
        f"{prof.min_replicas}..{prof.max_replicas}, runtimes "
        f"{', '.join(prof.runtimes)}"
        + (f", chat template {prof.chat_template}" if prof.chat_template else "")
    )
    if mode != "automatic":
        typer.echo(
            f"The controller is in {mode} mode: it plans this model but loads nothing. "
            "To let it act: " + _again("grid allocator mode automatic", grid, state_dir, token_file)
        )
    typer.echo(
        "Next: "
        + _again("grid allocator tick", grid, state_dir, token_file)
        + " && "
        + _again("grid allocator status", grid, state_dir)
    )


@model_app.command("remove")
def model_remove(
    model_id: Annotated[str, typer.Argument(help="Model id of the profile to retire.")],
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    ca_file: CaFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Retire a model profile (drained and unloaded safely)."""
    with client(grid, state_dir, token_file, ca_file=ca_file) as api:
        result = api.delete_model(model_id)
    if as_json:
        _emit(result)
        return
    typer.echo(
        f"Retired {model_id}: it converges to zero replicas; the tombstone stays "
        "until the profile is created again."
    )


model_app.command("rm", help="Alias of `model remove`.")(model_remove)


# ----------------------------------------------------------------------------- mode, tick


@allocator_app.command("mode")
def mode(
    value: Annotated[str, typer.Argument(help="observe, recommend or automatic.")],
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    ca_file: CaFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Select observe, recommend or automatic mode (recommend is the kill switch)."""
    if value not in ("observe", "recommend", "automatic"):
        raise GridError(
            "unknown_mode",
            f"mode {value!r} is not observe, recommend or automatic",
            fix="use one of observe, recommend, automatic",
        )
    with client(grid, state_dir, token_file, ca_file=ca_file) as api:
        result = api.set_mode(value)
    if as_json:
        _emit(result)
        return
    typer.echo(f"Mode: {result.previous.value} -> {result.mode.value}")
    if result.withdrawn:
        typer.echo(f"Cancelled {plural(len(result.withdrawn), 'undelivered command')}.")


@allocator_app.command("tick")
def tick(
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    ca_file: CaFileOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a reconciliation pass now."""
    with client(grid, state_dir, token_file, ca_file=ca_file) as api:
        result = api.tick()
    if as_json:
        _emit(result)
        return
    report = result.tick
    if report is not None and report.ok:
        typer.echo(
            f"Tick ok in {report.duration_ms} ms: {report.engine} "
            f"{report.solver_status}, {plural(len(report.issued), 'command')} issued, "
            f"generation {report.generation}"
        )
    else:
        typer.echo(f"Tick failed: {report.error if report is not None else 'unknown error'}")
        raise typer.Exit(1)


# ----------------------------------------------------------------------------- status


class _ViewModel(BaseModel):
    """The part of a model row of the dashboard's view document that status reads."""

    model_config = ConfigDict(extra="ignore", protected_namespaces=())
    model_id: str
    desired: int
    reason: str


class _View(BaseModel):
    model_config = ConfigDict(extra="ignore")
    models: list[_ViewModel] = []


def desired_reasons(api: Any) -> dict[str, DesiredReason]:
    """Per model, the desired replica count and why (the dashboard's view document, which
    reads the planner's targets for the controller's own snapshot); {} from an older one."""
    try:
        view = _View.model_validate(api.request("GET", "/ui/view.json", params={"history": 0}))
    except (GridError, ValidationError):
        return {}
    return {m.model_id: DesiredReason(desired=m.desired, why=m.reason) for m in view.models}


@allocator_app.command("status")
def status(
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    ca_file: CaFileOpt = None,
    as_json: JsonOpt = False,
    history: Annotated[
        int, typer.Option("--history", min=0, max=512, help="Command records to include.")
    ] = 50,
) -> None:
    """Show hosts, the plan, workload admission and candidates, learned workflows, unmet
    replicas, pending commands, revisions and warnings. With the operator capability (found
    as for admin commands, never required) it also shows operator-only details."""
    with client(
        grid, state_dir, token_file, admin=False, ca_file=ca_file, operator_if_known=True
    ) as api:
        doc = api.status(history=history)
        reasons = desired_reasons(api)
    if as_json:
        by_model = {m: r.model_dump(mode="json") for m, r in reasons.items()}
        _emit({**doc.model_dump(mode="json"), "desired_reasons": by_model})
    else:
        console = Console(highlight=False, width=max(120, Console().width))
        console.print(render_status(doc, reasons))


# ----------------------------------------------------------------------------- tokens


@token_app.command("write")
def token_write(
    file: Annotated[Path, typer.Argument(help="Where to write the credential (mode 0600).")],
    host_id: Annotated[str | None, typer.Option("--host-id", help="Stable host id.")] = None,
    ttl_seconds: Annotated[
        float | None,
        typer.Option("--ttl-seconds", help="Credential lifetime (default: the controller's)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file.")] = False,
    grid: GridOpt = None,
    state_dir: StateOpt = None,
    token_file: TokenFileOpt = None,
    ca_file: CaFileOpt = None,
) -> None:
    """Write an expiring credential valid only for one host; the secret is never printed."""
    target = file.expanduser()
    if target.exists() and not force:
        raise GridError(
            "file_exists",
            f"{target} already exists",
            fix="choose another path, or pass --force to replace it",
        )
    with client(grid, state_dir, token_file, ca_file=ca_file) as api:
        minted = api.node_credential(host_id, ttl_s=ttl_seconds)
    write_credential_file(target, minted, force=force)
    if minted.generated_host_id:
        typer.echo(f"Generated host id: {minted.host_id}")
    typer.echo(
        f"Wrote a credential for host {minted.host_id} to {target} (mode 0600): the token "
        "and the reply key the node verifies the controller with, in one file; copy that file "
        "to that machine over a secure channel."
    )
