"""Small wording helpers shared by the CLI's views: plurals, local times with their age.

Presentation only. Functions that depend on the clock take `now` explicitly.
"""

from __future__ import annotations

import time


def plural(count: int | float, word: str, many: str | None = None) -> str:
    """`1 replica`, `2 replicas`, `0 replicas` (`many` for irregular words)."""
    shown = f"{count:g}" if isinstance(count, float) else str(count)
    return f"{shown} {word if count == 1 else (many or word + 's')}"


def duration(seconds: float) -> str:
    """A short human duration: `10 s`, `4 min`, `2 h 5 min`, `3 d`."""
    s = abs(seconds)
    if s < 90:
        return f"{s:.0f} s"
    if s < 90 * 60:
        return f"{s / 60:.0f} min"
    if s < 48 * 3600:
        hours, rest = divmod(int(s), 3600)
        return f"{hours} h {rest // 60} min" if rest >= 60 else f"{hours} h"
    return f"{s / 86400:.0f} d"


def relative(ts: float, now: float) -> str:
    """`5 s ago`, `in 10 s`, or `now`."""
    delta = ts - now
    if abs(delta) < 0.5:
        return "now"
    return f"in {duration(delta)}" if delta > 0 else f"{duration(delta)} ago"


def local_time(ts: float, now: float) -> str:
    """A Unix time as local wall-clock time with its age: `14:03:07 (12 s ago)`; the date is
    added when it is not today."""
    moment, today = time.localtime(ts), time.localtime(now)
    same_day = moment[:3] == today[:3]
    clock = time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", moment)
    return f"{clock} ({relative(ts, now)})"
