"""This host's GPU devices as the node reports them: each device's memory in MB.

`nvidia-smi --query-gpu=memory.total` when it is installed; otherwise none (a CPU host, or a
host whose devices the operator lists with `--gpu-memory-mb`, which always wins)."""

from __future__ import annotations

import shutil
import subprocess

QUERY = ["--query-gpu=memory.total", "--format=csv,noheader,nounits"]
TIMEOUT_S = 5.0


def parse_memory_totals(text: str) -> list[int]:
    """One MiB figure per line (nvidia-smi's csv without header or units); odd lines skipped."""
    out: list[int] = []
    for line in text.splitlines():
        try:
            value = float(line.strip())
        except ValueError:
            continue
        if value >= 0:
            out.append(int(value))
    return out[:64]


def detect_gpu_memory_mb() -> list[int]:
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return []
    try:
        done = subprocess.run(
            [executable, *QUERY], capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_memory_totals(done.stdout) if done.returncode == 0 else []
