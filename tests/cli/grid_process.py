"""Run `python -m grid` as a user does: a separate process, a clean environment (no GRID_*
variables from the caller) and a HOME of the test's choosing. Shared by the CLI, service and
end-to-end tests of issue 14."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRID_")}
    return {**env, "HOME": str(home), "COLUMNS": "200", **extra}


def grid(env: dict[str, str], *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grid", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=timeout,
    )
