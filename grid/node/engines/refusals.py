"""The supervisor's refusals (grid/node/engines/llamacpp.py): each a code, a sentence, a fix
and, where one helps, the next command. Built here so the supervisor reads as its rules."""

from __future__ import annotations

from pathlib import Path

from grid.fleet import GridError


def _tail_command(log: Path) -> str:
    return f"tail -n 50 {log}"


def engine_stopping(model_id: str) -> GridError:
    return GridError(
        code="engine_stopping",
        message=f"The {model_id} engine is being stopped.",
        fix="Warm it again once the stop has finished.",
    )


def model_mismatch(model_id: str, running: str, wanted: Path) -> GridError:
    return GridError(
        code="engine_model_mismatch",
        message=f"{model_id} already runs from {running}, not {wanted}.",
        fix="Stop the running engine first, then warm the new artifact.",
    )


def model_missing(model_path: Path) -> GridError:
    return GridError(
        code="engine_model_missing",
        message=f"The weights file {model_path} does not exist.",
        fix="Load (fetch and verify) the artifact before warming it.",
        next_command=f"ls -l {model_path}",
    )


def not_identified(model_id: str, *, exited: bool, tail: str, log: Path) -> GridError:
    return GridError(
        code="engine_exited" if exited else "engine_identity_unreadable",
        message=f"The llama-server child for {model_id} could not be identified "
        f"right after spawn. {tail}",
        fix="Check the engine log in the state folder.",
        next_command=_tail_command(log),
    )


def state_write_failed(
    what: str, model_id: str, exc: OSError, pid: int, port: int, state_dir: Path
) -> GridError:
    return GridError(
        code="engine_state_write_failed",
        message=f"Could not persist the {what} of the {model_id} engine ({exc}); the child "
        "was stopped.",
        fix="Free disk space or fix permissions of the node state folder, then retry.",
        details={"pid": pid, "port": port},
        next_command=f"df -h {state_dir}",
    )


def stopped_while_warming(model_id: str) -> GridError:
    return GridError(
        code="engine_exited",
        message=f"The {model_id} engine stopped while it was warming.",
        fix="Retry the warm.",
    )


def exited_before_ready(model_id: str, why: str, tail: str, log: Path) -> GridError:
    return GridError(
        code="engine_exited",
        message=f"The {model_id} engine exited before it became ready: {why}. {tail}",
        fix="Check the engine log; a new warm starts a fresh child.",
        next_command=_tail_command(log),
    )


def not_ready(model_id: str, timeout_s: float, log: Path) -> GridError:
    return GridError(
        code="engine_not_ready",
        message=f"The {model_id} engine did not answer readiness within {timeout_s:.0f} s; "
        "it was stopped.",
        fix="Check the engine log, or raise the readiness timeout.",
        next_command=_tail_command(log),
    )


def stop_failed(model_id: str, pid: int) -> GridError:
    return GridError(
        code="engine_stop_failed",
        message=f"PID {pid} of {model_id} is still alive after SIGKILL.",
        fix="Inspect the process by hand.",
        next_command=f"ps -o pid,stat,args -p {pid}",
    )
