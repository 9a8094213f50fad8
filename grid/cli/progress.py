"""Progress for long commands, on stderr and only on a terminal (pipes and --json stay clean).

`plan_spinner` shows the planner's current stage while `grid plan` runs. The planner records
each finished phase in its `Deadline.spent` (build, heuristic, solve); the stage shown is the
one after the last finished phase, read by a small polling thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from rich.console import Console

# Phase recorded by the planner -> the stage that runs next, in order.
STAGES = (
    ("", "loading the snapshot"),
    ("load", "building the placement model"),
    ("build", "heuristic placement (the fallback and the hint)"),
    ("heuristic", "CP-SAT search"),
    ("solve", "explanations, staging and checks"),
)


def current_stage(spent: Mapping[str, float]) -> str:
    """The stage after the last finished phase in `spent` (pure)."""
    stage = STAGES[0][1]
    for phase, label in STAGES[1:]:
        if phase in spent:
            stage = label
    return stage


@contextmanager
def plan_spinner(deadline: Any, what: str, console: Console | None = None) -> Iterator[None]:
    """A spinner with the current planner stage and the time used of the budget."""
    err = console or Console(stderr=True, highlight=False)
    if not err.is_terminal:
        yield
        return
    stop = threading.Event()
    with err.status(f"{what}: {current_stage(deadline.spent)}") as status:

        def poll() -> None:
            while not stop.wait(0.1):
                stage = current_stage(deadline.spent)
                used = f"{deadline.elapsed():.1f} s of {deadline.limit_s:g} s"
                status.update(f"{what}: {stage} ({used})")

        thread = threading.Thread(target=poll, name="plan-spinner", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
