"""How the allocator commands reach a controller: its URL and the operator capability.

`--grid URL`; else, without `--state-dir`, the current controller (context.py: $GRID_URL, then
the context file `grid up` and `grid test start` write); else the local controller of
`--state-dir`. Admin commands take the operator capability from `--token-file`, then
GRID_ALLOCATOR_CONTROL_TOKEN, then the current controller's recorded config.json, then
`<state-dir>/config.json`; when none has it the refusal names the credential and the places.
Hints built here keep the same `--grid`, `--state-dir` and `--token-file`.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Annotated

import typer

from grid.api import config_path, default_state_dir, load_settings
from grid.cli.context import current_context
from grid.cli.hints import CONTROL_TOKEN_ENV, current_command, with_dirs
from grid.fleet import GridError
from grid.wire import AllocatorClient

TOKEN_ENV = CONTROL_TOKEN_ENV

GridOpt = Annotated[str | None, typer.Option("--grid", help="Controller URL (default: local).")]
StateOpt = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="Local controller folder (default $GRID_STATE_DIR, else ~/.grid/allocator).",
    ),
]
TokenFileOpt = Annotated[
    Path | None, typer.Option("--token-file", help="File holding the operator capability.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
CaFileOpt = Annotated[
    Path | None,
    typer.Option("--ca-file", help="CA that verifies an https controller (default: system store)."),
]


def token_file_unreadable(path: Path, exc: OSError) -> GridError:
    """The refusal for a --token-file that cannot be read."""
    return GridError(
        "token_file_unreadable",
        f"cannot read {path} ({exc.strerror})",
        fix="check the --token-file path and its permissions",
    )


def _read_token_file(path: Path) -> str:
    try:
        text = path.expanduser().read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise token_file_unreadable(path, exc) from None
    if text.startswith("{"):  # a controller config.json
        try:
            token = json.loads(text).get("operator_token", "")
        except (ValueError, AttributeError):
            token = ""
        text = token if isinstance(token, str) else ""
    if not text:
        raise GridError(
            "token_file_empty",
            f"{path} holds no operator capability",
            fix="point --token-file at the controller's config.json or a token file",
        )
    return text


def _operator_token(state_dir: Path, token_file: Path | None, url: str) -> str:
    """--token-file, then $GRID_ALLOCATOR_CONTROL_TOKEN, then `<state-dir>/config.json`."""
    if token_file is not None:
        return _read_token_file(token_file)
    from_env = os.environ.get(TOKEN_ENV, "").strip()
    if from_env:
        return from_env
    config = config_path(state_dir)
    if config.exists():
        return load_settings(state_dir).operator_token
    raise GridError(
        "no_operator_token",
        f"this command needs the operator capability of the controller at {url}; it was looked "
        f"for in --token-file (not given), ${TOKEN_ENV} (not set) and {config} (no such file)",
        fix="pass --token-file with that controller's config.json (`grid up` and `grid test "
        f"start` print its path), or set {TOKEN_ENV}",
        next_command=_token_hint(url),
    )


def _token_hint(url: str) -> str:
    """Retry with --token-file: the logical fleet's config when `url` is that fleet's."""
    from grid.lab import LogicalFleet

    fleet = LogicalFleet()
    config = config_path(fleet.controller_dir)
    found = config.exists() and fleet.url() == url.rstrip("/")
    where = str(config) if found else "STATE_DIR/config.json"
    return f"{current_command()} --grid {url} --token-file {where}"


def _url(grid: str | None, state_dir: Path) -> str:
    if grid:
        return grid
    try:
        return load_settings(state_dir).url
    except GridError as err:
        err.fix = "start the local controller, or pass --grid URL"
        err.next_command = with_dirs("grid up", state_dir=state_dir)
        raise


def client(
    grid: str | None,
    state_dir: Path | None,
    token_file: Path | None = None,
    *,
    admin: bool = True,
    ca_file: Path | None = None,
    operator_if_known: bool = False,
) -> AllocatorClient:
    """`admin`: the operator capability is required; `operator_if_known`: sent when one is
    found (a read then shows operator-only details), never required."""
    folder = (state_dir or default_state_dir()).expanduser()
    ctx = current_context() if grid is None and state_dir is None else None
    if ctx is not None:
        if token_file is None and ctx.token_file and not os.environ.get(TOKEN_ENV, "").strip():
            token_file = Path(ctx.token_file)
        token = _operator_token(folder, token_file, ctx.url) if admin else None
        chosen_ca = ca_file or (Path(ctx.ca_file) if ctx.ca_file else None)
        return AllocatorClient(ctx.url, operator_token=token, ca_file=chosen_ca)
    url = _url(grid, folder)  # no --grid and no local config: no controller to talk to
    token = _operator_token(folder, token_file, url) if admin else None
    if token is None and operator_if_known and token_file is not None:
        token = _operator_token(folder, token_file, url)  # a file named must be readable
    elif token is None and operator_if_known:
        with contextlib.suppress(GridError):
            token = _operator_token(folder, token_file, url)
    return AllocatorClient(url, operator_token=token, ca_file=ca_file or _local_ca(grid, folder))


def _local_ca(grid: str | None, state_dir: Path) -> str | None:
    """The CA `grid up --ca-file` recorded, when talking to this machine's controller (None:
    $GRID_CA_FILE, else the system store)."""
    if grid is not None or not config_path(state_dir).exists():
        return None
    try:
        return load_settings(state_dir).ca_file or None
    except GridError:
        return None


def _again(
    command: str, grid: str | None, state_dir: Path | None, token_file: Path | None = None
) -> str:
    """A follow-up command that talks to the same controller with the same credential."""
    text = with_dirs(command, state_dir=state_dir)
    if grid:
        text += f" --grid {grid}"
    if token_file is not None:
        text += f" --token-file {token_file.expanduser().absolute()}"
    return text
