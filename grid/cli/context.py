"""The current controller: which controller the client commands talk to when no `--grid` and no
`--state-dir` is given, so `--grid` and `--token-file` are rarely typed.

In order: `$GRID_URL` (with `$GRID_ALLOCATOR_CONTROL_TOKEN` or `--token-file` for admin
commands, `$GRID_CA_FILE` for a private CA); else the context file `~/.grid/context.json`
(`$GRID_CONTEXT` moves it) that `grid up` and `grid test start` write — the controller's URL,
the path of its config.json (the operator capability, read only when an admin command needs
it) and its CA file; else this machine's controller of `$GRID_STATE_DIR`. `grid down` and
`grid test stop` remove the file when it names the controller they stopped. The file holds
paths, never a secret, and is owner-only.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from grid.fleet import atomic_write_text

URL_ENV = "GRID_URL"
CONTEXT_ENV = "GRID_CONTEXT"


@dataclass(frozen=True)
class Context:
    url: str
    token_file: str | None = None  # a controller's config.json or a token file
    ca_file: str | None = None
    source: str = ""  # what set it: GRID_URL, grid up, grid test start


def context_path() -> Path:
    configured = os.environ.get(CONTEXT_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".grid" / "context.json"


def read_context() -> Context | None:
    path = context_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str) or not data["url"]:
        return None
    text = {
        k: data.get(k) if isinstance(data.get(k), str) else None for k in ("token_file", "ca_file")
    }
    return Context(data["url"], text["token_file"], text["ca_file"], str(data.get("source", "")))


def current_context() -> Context | None:
    """$GRID_URL, else the context file (None: talk to this machine's controller)."""
    url = os.environ.get(URL_ENV, "").strip()
    if url:
        return Context(url.rstrip("/"), None, None, URL_ENV)
    return read_context()


def write_context(url: str, token_file: Path, ca_file: str | None, source: str) -> Path:
    path = context_path()
    doc = Context(url.rstrip("/"), str(token_file), ca_file or None, source)
    atomic_write_text(path, json.dumps(asdict(doc), indent=2) + "\n", 0o600)
    return path


def clear_context(url: str) -> bool:
    """Remove the context file when it names `url` (the controller just stopped)."""
    ctx = read_context()
    if ctx is None or ctx.url != url.rstrip("/"):
        return False
    context_path().unlink(missing_ok=True)
    return True
