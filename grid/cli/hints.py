"""`Next:` hints that lead back to the same fleet.

A command run with a non-default `--state-dir`, `--node-dir` or `--run-dir` prints follow-up
commands that carry the same folder, so copying the hint talks to the same controller, node or
logical fleet. A folder equal to the default (or to the one its environment variable names) is
left out: the follow-up finds it by itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from grid.api import Settings

# Environment variables that move the default folders (README "Folders and credentials").
STATE_DIR_ENV = "GRID_STATE_DIR"  # the controller of `grid up` (default ~/.grid/allocator)
NODE_DIR_ENV = "GRID_NODE_DIR"  # this machine's node agent (default ~/.grid/node)
RUN_DIR_ENV = "GRID_TEST_DIR"  # the logical fleet of `grid test` (default ~/.grid/test)
CONTROL_TOKEN_ENV = "GRID_ALLOCATOR_CONTROL_TOKEN"  # the operator capability
NODE_TOKEN_ENV = "GRID_ALLOCATOR_NODE_TOKEN"  # a node's host-scoped credential

ENV_HELP = (
    f"Folders: ${STATE_DIR_ENV} (controller, default ~/.grid/allocator), ${NODE_DIR_ENV} "
    f"(node agent, default ~/.grid/node), ${RUN_DIR_ENV} (logical fleet, default ~/.grid/test). "
    f"Credentials: ${CONTROL_TOKEN_ENV} (operator capability), ${NODE_TOKEN_ENV} (node)."
)


def _same(a: Path, b: Path) -> bool:
    return a.expanduser().absolute() == b.expanduser().absolute()


def with_dirs(
    command: str,
    *,
    state_dir: Path | None = None,
    node_dir: Path | None = None,
    run_dir: Path | None = None,
) -> str:
    """`command` plus the folder flags whose value is not what the follow-up would default to."""
    parts = [command]
    chosen: tuple[tuple[str, Path | None, Callable[[], Path]], ...] = (
        ("--state-dir", state_dir, _default_state_dir),
        ("--node-dir", node_dir, default_node_dir),
        ("--run-dir", run_dir, _default_run_dir),
    )
    for flag, folder, default in chosen:
        if folder is not None and not _same(folder, default()):
            parts.append(f"{flag} {folder.expanduser().absolute()}")
    return " ".join(parts)


def _default_state_dir() -> Path:
    from grid.api import default_state_dir

    return default_state_dir()


def _default_run_dir() -> Path:
    from grid.lab import default_run_dir  # only when a --run-dir was given

    return default_run_dir()


def default_node_dir() -> Path:
    configured = os.environ.get(NODE_DIR_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".grid" / "node"


def current_command(default: str = "grid") -> str:
    """The command line's command path (`grid allocator model set`), for a retry hint."""
    try:
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - Typer without a vendored click
        from click import get_current_context  # type: ignore[no-redef]
    ctx = get_current_context(silent=True)
    return str(ctx.command_path) if ctx is not None else default


LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def serves_controller(grid_url: str, settings: Settings) -> bool:
    """Whether a node configured with `grid_url` talks to the controller of `settings`."""
    try:
        parts = urlsplit(grid_url)
        port = parts.port
    except ValueError:
        return False
    host = (parts.hostname or "").lower()
    local = host in LOOPBACK_NAMES or host == settings.host.lower()
    scheme = "https" if settings.tls_cert else "http"  # a TLS controller (docs/addressing.md)
    return parts.scheme == scheme and local and port == settings.port


# Which commands take which folder flag (a follow-up only gets a flag it accepts).
_FOLDER_FLAGS = (
    ("--state-dir", ("grid up", "grid down", "grid allocator")),
    ("--node-dir", ("grid allocator node", "grid down")),
    ("--run-dir", ("grid test",)),
)


def carry_dirs(next_command: str, argv: list[str]) -> str:
    """`next_command` with the folder flags the user passed on this command line (`argv`),
    where the follow-up accepts them and does not name them already."""
    if not next_command.startswith("grid "):
        return next_command
    text = next_command
    for flag, takers in _FOLDER_FLAGS:
        if flag in text or flag not in argv[:-1]:
            continue
        if flag == "--state-dir" and text.startswith("grid allocator node"):
            takers = ("grid allocator node start",)
        if any(text == t or text.startswith(t + " ") for t in takers):
            value = argv[argv.index(flag) + 1]
            text += f" {flag} {Path(value).expanduser().absolute()}"
    return text
