"""How the CLI reports refusals and crashes: one format, on stderr, with a stable exit code.

A `GridError` is the user's problem to fix, so it prints the code, the field path, the sentence,
the fix and the next command, and exits 2 (like a usage error). Anything else is Grid's bug: one
line and exit 1, with the traceback only when GRID_DEBUG=1 (users should not have to read one).
"""

from __future__ import annotations

import os
import sys
import traceback

from rich.console import Console
from rich.text import Text

from grid.fleet import GridError

EXIT_REFUSED = 2  # bad input or a refused request: the user can fix it
EXIT_INTERNAL = 1  # unexpected failure inside Grid


def debug_enabled() -> bool:
    return os.environ.get("GRID_DEBUG", "").strip().lower() in {"1", "true", "yes", "on"}


def _stderr() -> Console:
    # Created per call: test runners swap sys.stderr between invocations.
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def grid_error_lines(err: GridError) -> list[str]:
    """The plain-text lines printed for a refusal (also used by tests and JSON-less callers)."""
    where = f" at {err.path}" if err.path else ""
    lines = [f"Error [{err.code}]{where}: {err.message}"]
    if err.fix:
        lines.append(f"To fix: {err.fix}")
    if err.next_command:
        lines.append(f"Next: {err.next_command}")
    return lines


def report_grid_error(err: GridError) -> int:
    console = _stderr()
    styles = ["bold red", "yellow", "cyan"]
    for index, line in enumerate(grid_error_lines(err)):
        style = styles[0] if index == 0 else styles[1] if line.startswith("To fix") else styles[2]
        console.print(Text(line, style=style))
    return EXIT_REFUSED


def report_unexpected(exc: BaseException) -> int:
    if isinstance(exc, BrokenPipeError):
        # The reader went away (`grid --help | head`): nothing is wrong and nothing to say.
        # Point stdout at /dev/null so the interpreter's final flush cannot fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    console = _stderr()
    if debug_enabled():
        # Print the real traceback as Python formats it, for a bug report.
        sys.stderr.write("".join(traceback.format_exception(exc)))
        sys.stderr.flush()
        hint = ""
    else:
        hint = " (run again with GRID_DEBUG=1 for the traceback)"
    detail = str(exc).splitlines()[0] if str(exc) else ""
    summary = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    console.print(Text(f"Internal error: {summary}{hint}", style="bold red"))
    return EXIT_INTERNAL
