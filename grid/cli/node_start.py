"""How `grid node start` finds its credential and builds the node's configuration.

The credential comes from $GRID_ALLOCATOR_NODE_TOKEN (token and reply key), --token-file, or
the controller on this machine, which writes a host-scoped one into the node folder (reused
while the controller lists it as valid). The configuration is the saved one, or the shipped
catalog, with the flags given on top.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from grid.api import config_path as config_path_of_controller
from grid.api import default_state_dir, load_settings
from grid.cli.connection import token_file_unreadable
from grid.cli.credential_cmd import write_credential_file
from grid.cli.hints import NODE_TOKEN_ENV, serves_controller, with_dirs
from grid.fleet import GridError
from grid.node.agent import (
    CatalogEntry,
    NodeConfig,
    config_path,
    credential_id,
    load_config,
    no_reply_key,
    parse_config,
    parse_credential,
    read_credential_file,
    reusable,
    token_claims,
)
from grid.wire import AllocatorClient

TOKEN_ENV = NODE_TOKEN_ENV
LOCAL_TOKEN_NAME = "node.token"  # a credential the local controller wrote, in the node folder


def credential_host(token: str) -> str | None:
    """The host id a node credential names (read, not verified: the controller verifies)."""
    return token_claims(token)[0]


def _read_token_file(path: Path) -> str:
    """The token of a credential file, which must also carry its reply key."""
    try:
        token, key = read_credential_file(path)
    except OSError as exc:
        raise token_file_unreadable(path, exc) from None
    if key is None:
        raise no_reply_key(str(path))
    return token


def _catalog(values: list[str] | None, existing: list[CatalogEntry]) -> list[CatalogEntry]:
    entries = {e.model_id: e for e in existing}
    for raw in values or []:
        model_id, sep, rest = raw.partition("=")
        path, _at, digest = rest.partition("@")
        if not sep or not model_id or not path:
            raise GridError(
                "invalid_option",
                f"--model {raw!r} is not MODEL_ID=/absolute/path.gguf[@sha256]",
                fix="name each pre-pulled GGUF as MODEL_ID=PATH, optionally with @SHA256",
            )
        entries[model_id] = CatalogEntry(
            model_id=model_id, path=str(Path(path).expanduser().absolute()), sha256=digest or None
        )
    return list(entries.values())


def _shipped_catalog() -> list[CatalogEntry]:
    """The SmolLM2 weights shipped with the install, when present."""
    from grid.node.artifacts import SMOLLM2_MODEL_ID, SMOLLM2_SHA256, smollm2_path

    try:
        path = smollm2_path()
    except GridError:
        return []
    return [CatalogEntry(model_id=SMOLLM2_MODEL_ID, path=str(path), sha256=SMOLLM2_SHA256)]


def _state(state_dir: Path | None) -> Path:
    return (state_dir or default_state_dir()).expanduser()


def _remote_fix() -> str:
    return (
        "on the controller's machine run `grid allocator token write node.token --host-id ID`, "
        "copy the file here, then pass --grid URL --token-file node.token "
        f"(or set {TOKEN_ENV})"
    )


def _local_credential(folder: Path, host: str, grid: str | None, state_dir: Path | None) -> Path:
    """With no credential given: the controller on this machine mints one for `host` and it is
    written to the node folder (mode 0600). A remote controller cannot be asked this way."""
    state = _state(state_dir)
    if not config_path_of_controller(state).exists():
        raise GridError(
            "no_node_credential",
            f"no node credential was given and no controller runs from {state} on this machine",
            fix="start the local controller first (then no flag is needed), or " + _remote_fix(),
            next_command=with_dirs("grid up", state_dir=state_dir),
        )
    settings = load_settings(state)
    if grid is not None and not serves_controller(grid, settings):
        raise GridError(
            "no_node_credential",
            f"no node credential was given for the controller at {grid}, which is not the one "
            f"on this machine ({settings.url})",
            fix=_remote_fix(),
        )
    target = folder / LOCAL_TOKEN_NAME
    with AllocatorClient(
        settings.url, operator_token=settings.operator_token, ca_file=settings.ca_file or None
    ) as api:
        if _still_valid(api, target, host):
            typer.echo(f"Reusing the credential for host {host} in {target}")
            return target
        minted = api.node_credential(host)
    folder.mkdir(parents=True, exist_ok=True)
    write_credential_file(target, minted, force=True)
    typer.echo(f"The local controller wrote a credential for host {host} to {target} (mode 0600)")
    return target


def _still_valid(api: AllocatorClient, target: Path, host: str) -> bool:
    """A credential file the controller may keep honouring: it names `host`, carries its
    reply key, lives past a day, and the controller lists it as valid (not revoked)."""
    token = reusable(target, host, time.time())
    if token is None:
        return False
    wanted = credential_id(token)
    return any(r.credential_id == wanted and r.state == "valid" for r in api.node_credentials(host))


def _start_credential(
    folder: Path,
    existing: dict[str, Any],
    env_token: str | None,
    token_file: Path | None,
    host_id: str | None,
    grid: str | None,
    state_dir: Path | None,
) -> tuple[str | None, Path | None, str]:
    """(the node token, its file, the host id) for `start`: the environment's credential, the
    --token-file, or a host-scoped one the local controller writes; a credential for another
    host than --host-id is refused."""
    token = env_token or (_read_token_file(token_file) if token_file else None)
    if token is None and token_file is None and not existing.get("token_file"):
        wanted = host_id or existing.get("host_id") or f"host-{socket.gethostname()}"
        token_file = _local_credential(folder, wanted, grid, state_dir)
        token = _read_token_file(token_file)
    named = credential_host(token) if token else None
    chosen_host = host_id or named or existing.get("host_id") or f"host-{socket.gethostname()}"
    if named is not None and chosen_host != named:
        raise GridError(
            "wrong_host",
            f"the credential is for host {named!r}, not {chosen_host!r}",
            fix="use the credential written for this host, or drop --host-id",
        )
    return token, token_file, chosen_host


@dataclass(frozen=True)
class StartSource:
    """What `start` resolved before any flag is applied."""

    existing: dict[str, Any]  # the saved configuration, as JSON ({} on a first start)
    env_text: str | None  # the whole credential text of $GRID_ALLOCATOR_NODE_TOKEN
    env_token: str | None
    token: str | None
    token_file: Path | None
    host: str
    url: str
    ca_file: Path | None

    def base_updates(self, controllers: list[str] | None) -> dict[str, Any]:
        """The configuration keys every start sets: the controller(s), the host, the token."""
        updates: dict[str, Any] = {"grid_url": self.url, "host_id": self.host}
        if controllers:
            updates["controllers"] = [c for c in dict.fromkeys(controllers) if c != self.url]
        if self.token_file is not None and self.env_token is None:
            updates["token_file"] = str(self.token_file.expanduser().absolute())
        elif self.env_token is not None:
            updates["token_file"] = None
        return updates


def start_source(
    folder: Path,
    token_file: Path | None,
    host_id: str | None,
    grid: str | None,
    state_dir: Path | None,
    ca_file: Path | None,
) -> StartSource:
    """The saved configuration, the credential, the host id, the controller URL and its CA."""
    env_text = os.environ.get(TOKEN_ENV, "").strip() or None
    env_token = None
    if env_text is not None:
        env_token, env_key = parse_credential(env_text)
        if env_key is None:
            raise no_reply_key(TOKEN_ENV)
    existing: dict[str, Any] = {}
    if config_path(folder).exists():
        existing = load_config(folder).model_dump(mode="json")
    token, token_file, chosen_host = _start_credential(
        folder, existing, env_token, token_file, host_id, grid, state_dir
    )
    local = None  # the controller's settings on this machine, read once
    if grid is None and not existing.get("grid_url"):
        local = load_settings(_state(state_dir))  # no URL given or saved: this machine's
    url = grid or existing.get("grid_url") or (local.url if local is not None else "")
    if ca_file is None and not existing.get("ca_file") and grid is None:
        if local is None:
            with contextlib.suppress(GridError):  # a TLS controller on this machine: its own CA
                local = load_settings(_state(state_dir))
        recorded = local.ca_file if local is not None else None
        ca_file = Path(recorded) if recorded else None
    return StartSource(existing, env_text, env_token, token, token_file, chosen_host, url, ca_file)


def merged_config(
    existing: dict[str, Any], updates: dict[str, Any], model: list[str] | None
) -> NodeConfig:
    """The saved configuration (or the shipped catalog) with the flags' `updates` on top and
    each --model entry added to the catalog."""
    base = existing or {"catalog": [e.model_dump() for e in _shipped_catalog()]}
    merged = {**base, **updates}
    current = [CatalogEntry.model_validate(e) for e in merged.get("catalog", [])]
    merged["catalog"] = [e.model_dump() for e in _catalog(model, current)]
    return parse_config(merged, "the node start flags")
