"""`--engine-override MODEL:KEY=VALUE` and `--engine-ports LOW-HIGH` of `grid allocator node
start` (docs/engines.md).

KEY is an engine setting (threads, context, parallel, gpu_layers, gpu_memory_utilization,
extra_flags; extra_flags takes comma-separated tokens); MODEL is a model id or `*` for every
model. Overrides add to the ones node.json already holds; the result is validated by
`EngineSettings` (an unknown key or a flag off the allow-list is refused with its field).
"""

from __future__ import annotations

from typing import Any

from grid.fleet import GridError

NUMBERS = {"threads": int, "context": int, "parallel": int, "gpu_layers": int,
           "gpu_memory_utilization": float}  # fmt: skip


def _bad(text: str, why: str) -> GridError:
    return GridError(
        "invalid_engine_override",
        f"--engine-override {text!r}: {why}",
        fix="write MODEL:KEY=VALUE, e.g. smollm2-135m:threads=4 or '*:context=2048'",
        next_command="grid allocator node start --help",
    )


def engine_overrides(
    given: list[str] | None, existing: dict[str, Any]
) -> dict[str, dict[str, Any]] | None:
    """node.json's `engine_overrides` with the flags' laid on top (None: no flag given)."""
    if not given:
        return None
    out: dict[str, dict[str, Any]] = {
        k: dict(v) for k, v in (existing.get("engine_overrides") or {}).items()
    }
    for text in given:
        model, sep, setting = text.partition(":")
        key, eq, value = setting.partition("=")
        if not (sep and eq and model and key):
            raise _bad(text, "it is not MODEL:KEY=VALUE")
        if key == "extra_flags":
            parsed: Any = [t for t in value.split(",") if t]
        elif key in NUMBERS:
            try:
                parsed = NUMBERS[key](value)
            except ValueError:
                raise _bad(text, f"{key} takes a number") from None
        else:
            raise _bad(
                text, f"{key!r} is not an engine setting ({', '.join([*NUMBERS, 'extra_flags'])})"
            )
        out.setdefault(model, {})[key] = parsed
    return out


def port_range(text: str | None) -> tuple[int, int] | None:
    """`--engine-ports LOW-HIGH` as a pair (None: the flag was not given); node.json checks
    the bounds."""
    if text is None:
        return None
    low, sep, high = text.partition("-")
    try:
        if not sep:
            raise ValueError
        return int(low), int(high)
    except ValueError:
        raise GridError(
            "invalid_option",
            f"--engine-ports {text!r} is not LOW-HIGH",
            fix="pass a port range such as 39100-39199",
        ) from None
