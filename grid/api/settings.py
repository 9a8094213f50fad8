"""The controller's owner-only config file: `<state-dir>/config.json` (mode 0600).

It holds the operator capability (`operator_token`), the node-signing key, and where the server
listens. The server reads it at startup, so no secret ever appears in a process's arguments; the
CLI reads the capability from it for admin commands on this machine.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from grid.api.auth import Credentials, new_secret
from grid.fleet import GridError, atomic_write_text, read_json_file

CONFIG_NAME = "config.json"
STATE_NAME = "state.json"
DEFAULT_PORT = 22101
DEFAULT_HOST = "127.0.0.1"
STATE_DIR_ENV = "GRID_STATE_DIR"


HA_FIELDS = ("store", "etcd_ca_file", "etcd_cert_file", "etcd_key_file", "advertise_url")


def default_state_dir() -> Path:
    configured = os.environ.get(STATE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".grid" / "allocator"


@dataclass(frozen=True)
class Settings:
    operator_token: str
    node_signing_key: str
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    instance: str = ""
    controller: dict[str, Any] = field(default_factory=dict)  # ControllerConfig overrides
    breaker: dict[str, Any] = field(default_factory=dict)  # BreakerPolicy overrides (router)
    # TLS (docs/addressing.md): the server's certificate chain and key; `ca_file` is what this
    # machine's CLI verifies it with ("" = the system store). `insecure_http` records that a
    # non-loopback plain-HTTP bind was asked for explicitly.
    tls_cert: str = ""
    tls_key: str = ""
    ca_file: str = ""
    insecure_http: bool = False
    # /v1 without a client key (grid/api/client_keys.py): an explicit choice, loopback only.
    open_access: bool = False
    # High availability (docs/high-availability.md): `store` "" keeps the state file beside
    # this config; "etcd://HOST:PORT,..." keeps state and lease in etcd, reached with the
    # optional CA and client certificate. `advertise_url`: how nodes and the other controllers
    # reach this one ("" = `url`).
    store: str = ""
    etcd_ca_file: str = ""
    etcd_cert_file: str = ""
    etcd_key_file: str = ""
    advertise_url: str = ""

    @property
    def credentials(self) -> Credentials:
        return Credentials(self.operator_token, self.node_signing_key)

    @property
    def url(self) -> str:
        scheme = "https" if self.tls_cert else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"


def config_path(state_dir: Path) -> Path:
    return state_dir / CONFIG_NAME


def _config_document(path: Path, state_dir: Path) -> dict[str, Any]:
    """The controller config file as a JSON object, or a refusal that says why not."""
    try:
        data: Any = read_json_file(path)  # depth-checked like state.json
    except FileNotFoundError:
        raise GridError(
            "no_controller_config",
            f"no controller config at {path}",
            fix="start the controller first",
            next_command=f"grid up --state-dir {state_dir}",
        ) from None
    except (OSError, ValueError) as exc:
        raise GridError(
            "invalid_controller_config",
            f"the controller config at {path} cannot be read ({type(exc).__name__})",
            fix="restore the file or move it aside and run `grid up` again",
            next_command=f"grid up --state-dir {state_dir}",
        ) from None
    if not isinstance(data, dict):
        raise GridError(
            "invalid_controller_config",
            f"{path} is not a JSON object",
            fix="move it aside and run `grid up` again",
            next_command=f"grid up --state-dir {state_dir}",
        )
    return data


def _refuse_bad_paths(path: Path, state_dir: Path, data: dict[str, Any]) -> None:
    """The TLS and store file names must be text, and a certificate comes with its key."""
    tls = [data.get(name, "") for name in ("tls_cert", "tls_key", "ca_file")]
    if not all(isinstance(v, str) for v in tls) or bool(tls[0]) != bool(tls[1]):
        raise GridError(
            "invalid_controller_config",
            f"{path} names tls_cert without tls_key (or the reverse), or a non-text path",
            fix="pass both --tls-cert and --tls-key to `grid up`, or neither",
            next_command=f"grid up --state-dir {state_dir} --tls-cert CERT --tls-key KEY",
        )
    if not all(isinstance(data.get(name, ""), str) for name in HA_FIELDS):
        raise GridError(
            "invalid_controller_config",
            f"{path} names a store or etcd file that is not text",
            fix="give --store and the --etcd-* files to `grid up` again",
            next_command=f"grid up --state-dir {state_dir} --store etcd://HOST:PORT",
        )


def load_settings(state_dir: Path) -> Settings:
    path = config_path(state_dir)
    data = _config_document(path, state_dir)
    token, key = data.get("operator_token"), data.get("node_signing_key")
    port, host = data.get("port", DEFAULT_PORT), data.get("host", DEFAULT_HOST)
    if not (isinstance(token, str) and token and isinstance(key, str) and key):
        raise GridError(
            "invalid_controller_config",
            f"{path} lacks operator_token or node_signing_key",
            fix="move it aside and run `grid up` again",
            next_command=f"grid up --state-dir {state_dir}",
        )
    if not isinstance(port, int) or not 0 < port < 65536 or not isinstance(host, str):
        raise GridError(
            "invalid_controller_config",
            f"{path} has an invalid host or port",
            fix="correct host and port in the file",
        )
    _owner_only(path)
    instance = data.get("instance", "")
    controller = data.get("controller", {})
    breaker = data.get("breaker", {})
    if not isinstance(breaker, dict):
        raise GridError(
            "invalid_breaker_config",
            f"{path}: `breaker` must be an object of circuit-breaker settings",
            fix='write it as {"failures_to_open": 2, ...} or remove it',
        )
    _refuse_bad_paths(path, state_dir, data)
    return Settings(
        token,
        key,
        host,
        port,
        instance if isinstance(instance, str) else "",
        controller if isinstance(controller, dict) else {},
        breaker,
        insecure_http=data.get("insecure_http") is True,
        open_access=data.get("open_access") is True,
        **{name: data.get(name, "") for name in ("tls_cert", "tls_key", "ca_file", *HA_FIELDS)},
    )


def write_settings(state_dir: Path, settings: Settings) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(state_dir, 0o700)
    atomic_write_text(config_path(state_dir), json.dumps(asdict(settings), indent=2), 0o600)


def load_or_create_settings(
    state_dir: Path,
    *,
    port: int | None = None,
    listen: dict[str, Any] | None = None,
    secrets_from: tuple[str, str] | None = None,
) -> Settings:
    """The existing config (a new port or `listen` fields are recorded), or a fresh one with new
    secrets (or `secrets_from`: the operator token and node-signing key a controller cluster
    shares). `listen` holds the given ones of host, tls_cert, tls_key, ca_file, insecure_http,
    open_access and the store fields (HA_FIELDS)."""
    changes: dict[str, Any] = dict(listen or {})
    if port is not None:
        changes["port"] = port
    if config_path(state_dir).exists():
        current = load_settings(state_dir)
        moved = replace(current, **changes)
        if moved != current:
            # Only where it listens moves: secrets, instance and controller tuning are kept.
            write_settings(state_dir, moved)
        return moved
    token, key = secrets_from or (new_secret(), new_secret())
    settings = Settings(
        operator_token=token,
        node_signing_key=key,
        port=port or DEFAULT_PORT,
        instance=secrets.token_hex(8),
        **{k: v for k, v in changes.items() if k != "port"},
    )
    write_settings(state_dir, settings)
    return settings


def _owner_only(path: Path) -> None:
    # A config readable by others leaks the capability: tighten it rather than keep going.
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        os.chmod(path, 0o600)
