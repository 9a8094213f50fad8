"""Validation of one model profile from PUT /allocator/models/{model_id} (pure).

The profile goes through the same rules as a snapshot's `models[i]` (field types, replica bounds,
artifact source completeness, digest canonicalisation), and errors name the profile field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grid.fleet import MAX_MODEL_ID, GridError, ModelProfile, SnapshotError, parse_snapshot

_PREFIX = "models[0]."


def validate_profile(
    model_id: str, body: Any, *, now: float, vocabulary: Sequence[str] | None = None
) -> ModelProfile:
    """The profile, checked as a snapshot's `models[0]`; `workload_scores` words against
    `vocabulary` (the controller policy's; the default vocabulary when None)."""
    if not model_id or len(model_id) > MAX_MODEL_ID or any(c.isspace() for c in model_id):
        raise GridError(
            "invalid_model_id",
            f"a model id must be 1 to {MAX_MODEL_ID} characters without spaces",
            fix="use the model's file or alias name, for example qwen3-coder.gguf",
            path="model_id",
        )
    if not isinstance(body, dict):
        raise GridError(
            "invalid_profile",
            "a model profile must be a JSON object",
            fix="send the profile fields as a JSON object",
        )
    doc = dict(body)
    named = doc.setdefault("model_id", model_id)
    if named != model_id:
        raise GridError(
            "model_id_mismatch",
            f"the body names model {named!r} but the path names {model_id!r}",
            fix="leave model_id out of the body or make it match the path",
            path="model_id",
        )
    source = doc.get("artifact_source")
    if isinstance(source, str) and "@" in source.split("://", 1)[-1].split("/", 1)[0]:
        raise GridError(
            "artifact_source_credentials",
            "the artifact source embeds credentials; it is operator configuration, not a place "
            "for secrets",
            fix="remove the user:password@ part from --artifact-source",
            path="artifact_source",
        )
    try:
        raw: dict[str, Any] = {"schema_version": 1, "now": now, "models": [doc]}
        if vocabulary is not None:
            raw["policy"] = {"workload_vocabulary": list(vocabulary)}
        snap = parse_snapshot(raw)
    except SnapshotError as err:
        path = err.path[len(_PREFIX) :] if err.path.startswith(_PREFIX) else err.path
        raise GridError(
            err.code, err.message, fix=err.fix.replace(_PREFIX, ""), path=path
        ) from None
    return snap.models[0]
