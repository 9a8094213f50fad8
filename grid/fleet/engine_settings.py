"""Engine settings: what a profile asks of the engine that serves it, and a host's overrides.

One model, `EngineSettings`, used in three places (docs/engines.md):
- a profile's `engine` (sent with every WARM command: the controller's wish for that model);
- a node's `engine_defaults` (below the profile) and `engine_overrides` (above it), per model
  id or `*`, in node.json;
- the effective settings a running child was started with (node status shows them).

Every field is optional: None means "not set here", and `merge` lays sources over each other.
Extra flags come from an allow-list per engine kind (`ALLOWED_FLAGS`): a flag that would change
where the engine listens, which key it takes, which weights it serves or where it writes is
never accepted, and a flag's value is one plain token. The binary path is a host setting only
(`--llama-server`, `$GRID_LLAMA_SERVER`): a controller never names an executable on a node.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

# flag -> takes a value. llama.cpp's server flags (tools/server/README.md) and vLLM's
# `vllm serve` engine arguments that tune performance and memory only.
LLAMA_CPP_FLAGS: dict[str, bool] = {
    "--flash-attn": True,
    "--mlock": False,
    "--no-mmap": False,
    "--batch-size": True,
    "--ubatch-size": True,
    "--threads-batch": True,
    "--cache-type-k": True,
    "--cache-type-v": True,
    "--cont-batching": False,
    "--no-cont-batching": False,
    "--numa": True,
    "--split-mode": True,
    "--tensor-split": True,
    "--main-gpu": True,
    "--rope-scaling": True,
    "--rope-freq-base": True,
    "--defrag-thold": True,
    "--n-predict": True,
    "--temp": True,
    "--seed": True,
}
VLLM_FLAGS: dict[str, bool] = {
    "--dtype": True,
    "--quantization": True,
    "--max-num-seqs": True,
    "--max-num-batched-tokens": True,
    "--enforce-eager": False,
    "--kv-cache-dtype": True,
    "--swap-space": True,
    "--enable-prefix-caching": False,
    "--enable-chunked-prefill": False,
    "--pipeline-parallel-size": True,
    "--seed": True,
}
ALLOWED_FLAGS: dict[str, dict[str, bool]] = {"llama.cpp": LLAMA_CPP_FLAGS, "vllm": VLLM_FLAGS}
FLAG_VALUE = re.compile(r"^[A-Za-z0-9_.,:=+]{1,64}$")
MAX_EXTRA_FLAGS = 32


def flag_problem(flags: list[str]) -> str | None:
    """Why `flags` is not a list that some engine kind allows, or None."""
    known = {f: v for table in ALLOWED_FLAGS.values() for f, v in table.items()}
    return _problem(flags, known)


def flags_problem_for(kind: str, flags: list[str]) -> str | None:
    """Why `flags` is not allowed for engine `kind` (llama.cpp, vllm), or None."""
    return _problem(flags, ALLOWED_FLAGS.get(kind, {}))


def _problem(flags: list[str], table: dict[str, bool]) -> str | None:
    if len(flags) > MAX_EXTRA_FLAGS:
        return f"at most {MAX_EXTRA_FLAGS} extra flag tokens"
    at = 0
    while at < len(flags):
        flag = flags[at]
        if flag not in table:
            return f"{flag[:40]!r} is not an allowed engine flag (docs/engines.md lists them)"
        if table[flag]:
            value = flags[at + 1] if at + 1 < len(flags) else ""
            if not FLAG_VALUE.match(value):
                return f"{flag} needs one plain value (letters, digits, _ . , : = +)"
            at += 2
        else:
            at += 1
    return None


class EngineSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    threads: int | None = Field(default=None, ge=1, le=256)
    context: int | None = Field(default=None, ge=64, le=1 << 20)  # tokens (-c, --max-model-len)
    parallel: int | None = Field(default=None, ge=1, le=64)  # slots (-np, --max-num-seqs)
    gpu_layers: int | None = Field(default=None, ge=0, le=100_000)  # -ngl; 0: CPU only
    gpu_memory_utilization: float | None = Field(default=None, gt=0.0, le=1.0)  # vLLM
    extra_flags: list[str] | None = None

    @field_validator("extra_flags")
    @classmethod
    def _allowed(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        problem = flag_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    def merge(self, over: EngineSettings | None) -> EngineSettings:
        """These settings with every field `over` sets laid on top."""
        if over is None:
            return self
        return self.model_copy(update=over.model_dump(exclude_none=True))

    def shown(self) -> dict[str, object]:
        """The fields that are set (what status prints)."""
        return self.model_dump(exclude_none=True)
