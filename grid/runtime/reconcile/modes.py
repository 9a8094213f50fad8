"""Modes: the same decision, three levels of authority (pure).

observe    plan and forecast; every action it would take is recorded as a deferral with code
           `observe_mode` (and nothing yields a slot), so drift stays visible;
recommend  proposes the actions, none executable;
automatic  the same actions, executable within the governors.
"""

from __future__ import annotations

from grid.fleet import Action, Deferral, GridError, Mode
from grid.runtime.reconcile.codes import deferral_text

MODES = tuple(m.value for m in Mode)


def parse_mode(value: str | Mode) -> Mode:
    if isinstance(value, Mode):
        return value
    try:
        return Mode(str(value).strip().lower())
    except ValueError:
        raise GridError(
            "unknown_mode",
            f"mode {str(value)[:64]!r} is not one of {', '.join(MODES)}",
            fix="use observe, recommend or automatic",
        ) from None


def apply_mode(
    mode: Mode, actions: list[Action], deferred: list[Deferral], *, retry_at: float
) -> tuple[list[Action], list[Deferral]]:
    if mode is Mode.OBSERVE:
        drift = [
            Deferral(
                kind=a.kind,
                host_id=a.host_id,
                model_id=a.model_id,
                code="observe_mode",
                message=f"{deferral_text('observe_mode')}: {a.reason}",
                retry_at=retry_at,
            )
            for a in actions
        ]
        return [], drift + deferred
    executable = mode is Mode.AUTOMATIC
    return [a.model_copy(update={"executable": executable}) for a in actions], deferred
