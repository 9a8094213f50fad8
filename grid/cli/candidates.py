"""`grid test start --candidate-model MODEL --workload-model WORKLOAD=MODEL` (both repeatable).

A candidate is a model every logical node holds (its weights are in each node's catalog) with
no replica floor, so only the allocator decides to load it. `--workload-model WORKLOAD=MODEL`
gives MODEL the workload score WORKLOAD=1.0; a model it names that is neither the baseline nor
a `--candidate-model` becomes a candidate too. Workload words are the default vocabulary.
"""

from __future__ import annotations

from pathlib import Path

from grid.fleet import DEFAULT_WORKLOAD_VOCABULARY, GridError
from grid.lab import CandidateModel, FleetModel, resolve_model

FULL_SCORE = 1.0


def parse_workload_models(pairs: list[str]) -> list[tuple[str, str]]:
    """[(workload, model)] from WORKLOAD=MODEL strings; GridError for a bad one."""
    out: list[tuple[str, str]] = []
    for pair in pairs:
        word, sep, model = pair.partition("=")
        word, model = word.strip(), model.strip()
        if not sep or not word or not model:
            raise GridError(
                "invalid_workload_model",
                f"--workload-model {pair!r} is not WORKLOAD=MODEL",
                fix="pass for example --workload-model coding=gemma-3-270m",
                next_command="grid test start --help",
            )
        if word not in DEFAULT_WORKLOAD_VOCABULARY:
            raise GridError(
                "unknown_workload",
                f"workload {word!r} is not in the vocabulary",
                fix=f"use one of: {', '.join(DEFAULT_WORKLOAD_VOCABULARY)}",
                next_command="grid test start --help",
            )
        out.append((word, model))
    return out


def candidate_models(
    baseline: FleetModel,
    names: list[str],
    pairs: list[str],
    weights_dir: Path,
) -> tuple[dict[str, float], list[CandidateModel]]:
    """The baseline's workload scores and the candidates, in the order first named."""
    mapping = parse_workload_models(pairs)
    order: list[str] = []
    for name in [*names, *(m for _w, m in mapping)]:
        if name not in order:
            order.append(name)
    resolved: dict[str, FleetModel] = {}
    for name in order:
        model = resolve_model(name, weights_dir)
        resolved[name] = model
    scores: dict[str, dict[str, float]] = {}
    for word, name in mapping:
        scores.setdefault(resolved[name].model_id, {})[word] = FULL_SCORE
    candidates: list[CandidateModel] = []
    for name in order:
        model = resolved[name]
        if model.model_id == baseline.model_id or any(
            c.model_id == model.model_id for c in candidates
        ):
            continue
        candidates.append(
            CandidateModel(**model.model_dump(), workload_scores=scores.get(model.model_id, {}))
        )
    return scores.get(baseline.model_id, {}), candidates
