"""systemd units so a controller or a node survives a reboot: `grid up --install-service` and
`grid allocator node install-service` (also `grid node install-service`).

The unit runs the same foreground process `grid up` / `node start` run in the background
(`python -m grid.api.server --state-dir DIR`, `python -m grid.node.agent --state-dir DIR`) with
this interpreter, so a wheel install in a virtual environment works as it is. Secrets stay in
the state folders (config.json, node.token, both 0600): a unit file names folders, never a
token. Writing a unit starts nothing; the printed `systemctl` line does. As root the unit goes
to /etc/systemd/system, else to ~/.config/systemd/user (a user unit: `systemctl --user`).
Under systemd, stop and start with systemctl, not `grid down` / `node stop`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from grid.fleet import atomic_write_text

CONTROLLER_UNIT = "grid-controller.service"
NODE_UNIT = "grid-node.service"


def default_unit_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/etc/systemd/system")
    return Path.home() / ".config" / "systemd" / "user"


def _user_unit(unit_dir: Path) -> bool:
    return unit_dir.expanduser().absolute() != Path("/etc/systemd/system")


def unit_text(
    description: str, module: str, state_dir: Path, *, stop_timeout_s: int, user: bool
) -> str:
    """A simple-type unit running `python -m MODULE --state-dir DIR`, restarted on failure."""
    folder = state_dir.expanduser().absolute()
    return (
        "[Unit]\n"
        f"Description={description}\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"ExecStart={sys.executable} -m {module} --state-dir {folder}\n"
        f"WorkingDirectory={folder}\n"
        "Restart=on-failure\n"
        "RestartSec=5\n"
        # SIGTERM to the main process only: it drains and stops its own children first.
        "KillMode=mixed\n"
        f"TimeoutStopSec={stop_timeout_s}\n"
        "UMask=0077\n"
        "\n"
        "[Install]\n"
        f"WantedBy={'default.target' if user else 'multi-user.target'}\n"
    )


UNITS = {
    CONTROLLER_UNIT: ("Grid allocator controller", "grid.api.server", 30),
    NODE_UNIT: ("Grid node agent", "grid.node.agent", 90),
}


def install_unit(name: str, state_dir: Path, unit_dir: Path | None) -> tuple[Path, str]:
    """Write unit `name` for `state_dir`; returns its path and the command that enables and
    starts it."""
    folder = (unit_dir or default_unit_dir()).expanduser().absolute()
    user = _user_unit(folder)
    description, module, stop_s = UNITS[name]
    text = unit_text(description, module, state_dir, stop_timeout_s=stop_s, user=user)
    path = folder / name
    atomic_write_text(path, text, 0o644)
    flag = " --user" if user else ""
    return path, f"systemctl{flag} daemon-reload && systemctl{flag} enable --now {name}"
