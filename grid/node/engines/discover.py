"""Finding this node's own llama-server children when the engine state cannot tell (issue 15).

A child is this node's when all of these hold, read from /proc: it runs in the node's engine run
folder (its working directory, where every child is started), its command line names the node's
own key file after `--api-key-file` (a path unique to the node) and carries `--alias` and
`--port`, and its birth marker and executable are readable (so it can be proved later exactly as
a recorded child is). Nothing else is ever treated as ours.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from grid.node.engines.proc import PROC, ProcessIdentity, is_alive, read_identity


@dataclass(frozen=True)
class FoundChild:
    identity: ProcessIdentity
    model_id: str
    port: int
    model_path: str


def _flag(argv: tuple[str, ...], flag: str) -> str | None:
    if flag not in argv:
        return None
    at = argv.index(flag)
    return argv[at + 1] if at + 1 < len(argv) else None


def _cwd(pid: int) -> str | None:
    try:
        return os.readlink(PROC / str(pid) / "cwd")
    except OSError:
        return None


def find_own_children(run_dir: Path, key_file: Path) -> list[FoundChild]:
    """Live processes provably started by the node whose engine run folder is `run_dir`."""
    run, key = str(run_dir.absolute()), str(key_file.absolute())
    found: list[FoundChild] = []
    try:
        pids = sorted(int(p.name) for p in PROC.iterdir() if p.name.isdigit())
    except OSError:
        return []
    for pid in pids:
        if pid == os.getpid() or _cwd(pid) != run or not is_alive(pid):
            continue
        identity = read_identity(pid)
        if identity is None or _flag(identity.argv, "--api-key-file") != key:
            continue
        alias, port, model = (_flag(identity.argv, f) for f in ("--alias", "--port", "-m"))
        if not alias or not model or not port or not port.isdigit():
            continue
        found.append(FoundChild(identity, alias, int(port), model))
    return found
