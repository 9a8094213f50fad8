"""The options of `grid allocator model set` (grid/cli/allocator_cmd.py), one alias each."""

from __future__ import annotations

from typing import Annotated

import typer

ModelSetRuntime = Annotated[
    list[str] | None,
    typer.Option("--runtime", help="Runtime it runs on (repeat; default llama.cpp)."),
]
ModelSetRuntimeMemoryMb = Annotated[
    list[str] | None, typer.Option("--runtime-memory-mb", help="RUNTIME=MB, repeatable.")
]
ModelSetBackend = Annotated[
    list[str] | None,
    typer.Option("--backend", help="Required backend, e.g. cuda (repeat; default any)."),
]
ModelSetRequiredTag = Annotated[
    list[str] | None, typer.Option("--required-tag", help="Host tag it needs (repeat).")
]
ModelSetForbiddenTag = Annotated[
    list[str] | None, typer.Option("--forbidden-tag", help="Host tag it avoids (repeat).")
]
ModelSetPin = Annotated[list[str] | None, typer.Option("--pin", help="Pinned host id.")]
ModelSetAllowHost = Annotated[
    list[str] | None,
    typer.Option("--allow-host", help="Only these hosts (repeat; default any)."),
]
ModelSetDenyHost = Annotated[
    list[str] | None, typer.Option("--deny-host", help="Never this host (repeat).")
]
ModelSetWorkloadScore = Annotated[
    list[str] | None, typer.Option("--workload-score", help="WORKLOAD=SCORE in (0, 1].")
]
ModelSetColocationExclude = Annotated[
    list[str] | None,
    typer.Option("--colocation-exclude", help="Model never placed on the same host (repeat)."),
]
ModelSetMaxColocatedModels = Annotated[
    int | None,
    typer.Option(
        "--max-colocated-models",
        help="Most models on a host with it, itself included (0: any).",
    ),
]
ModelSetMinReplicas = Annotated[
    int | None,
    typer.Option("--min-replicas", help="Baseline replicas kept without demand (default 0)."),
]
ModelSetMaxReplicas = Annotated[
    int | None,
    typer.Option("--max-replicas", help="Most replicas demand may earn (default 1)."),
]
ModelSetMinFailureDomains = Annotated[
    int | None,
    typer.Option("--min-failure-domains", help="Spread replicas over this many failure domains."),
]
ModelSetPriority = Annotated[
    int | None,
    typer.Option("--priority", help="Administrator priority class (higher wins; default 0)."),
]
ModelSetDataTier = Annotated[
    str | None,
    typer.Option("--data-tier", help="Data tier a host must allow (default internal)."),
]
ModelSetArtifactSha256 = Annotated[
    str | None, typer.Option("--artifact-sha256", help="SHA-256 of the GGUF weights (64 hex).")
]
ModelSetArtifactSource = Annotated[
    str | None,
    typer.Option(
        "--artifact-source", help="URL nodes may fetch the weights from (needs the digest)."
    ),
]
ModelSetArtifactSizeMb = Annotated[
    int | None, typer.Option("--artifact-size-mb", help="Download size of the weights, MB.")
]
ModelSetTargetUtilization = Annotated[
    float | None,
    typer.Option("--target-utilization", help="Busy fraction per replica to plan for, in (0, 1]."),
]
ModelSetReplicaConcurrency = Annotated[
    float | None,
    typer.Option("--replica-concurrency", help="Requests one replica serves at once (default 1)."),
]
ModelSetExpectedServiceTime = Annotated[
    float | None, typer.Option("--expected-service-time", help="Seconds per request.")
]
ModelSetLatencySloMs = Annotated[
    float | None, typer.Option("--latency-slo-ms", help="Latency objective, ms.")
]
ModelSetLoadEstimate = Annotated[float | None, typer.Option("--load-estimate", help="Seconds.")]
ModelSetWarmEstimate = Annotated[float | None, typer.Option("--warm-estimate", help="Seconds.")]
ModelSetMinResidency = Annotated[float | None, typer.Option("--min-residency", help="Seconds.")]
ModelSetScaleDownCooldown = Annotated[
    float | None, typer.Option("--scale-down-cooldown", help="Seconds.")
]
ModelSetChatTemplate = Annotated[
    str | None,
    typer.Option(
        "--chat-template",
        help="llama.cpp built-in chat template name (e.g. gemma, chatml) for a GGUF that "
        "carries none; default: the GGUF's own.",
    ),
]
