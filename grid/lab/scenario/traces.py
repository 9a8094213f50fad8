"""`--workload-trace WORKLOAD=CSV`: a real request-rate series as one workload's curve (pure
but for reading the file).

The CSV is headerless: `timestamp_seconds,request_rate` in the first two columns (further
columns are ignored). Bounds: at most 5 MiB and 100,000 rows; every rate finite and >= 0;
timestamps finite and strictly increasing; at least one row. A violation is a `GridError`
(`invalid_workload_trace`) that names the row (1-based) — the CLI exits 2 with it.

Mapping: the trace's span [first, last timestamp] is stretched onto the run's minutes (minute t
takes the trace rate at first + (t + 0.5)/minutes × span, linearly interpolated; a one-row
trace is constant), then scaled so that its mean equals the built-in curve's mean. A trace whose
rates are all zero gives a zero curve (the workload has no demand).
"""

from __future__ import annotations

import bisect
import math
from pathlib import Path

from grid.fleet import GridError

MAX_BYTES = 5 * 1024 * 1024
MAX_ROWS = 100_000
NEXT = "grid test scenario --help"


def _bad(message: str, fix: str, path: str) -> GridError:
    return GridError("invalid_workload_trace", message, fix=fix, path=path, next_command=NEXT)


def parse_option(text: str, vocabulary: tuple[str, ...]) -> tuple[str, Path]:
    word, sep, path = text.partition("=")
    if not sep or not word or not path:
        raise _bad(
            f"--workload-trace {text!r} is not WORKLOAD=CSV",
            "pass e.g. --workload-trace coding=traces/code.csv",
            "--workload-trace",
        )
    if word not in vocabulary:
        raise _bad(
            f"workload {word!r} is not one of {', '.join(vocabulary)}",
            "name a workload of the vocabulary",
            "--workload-trace",
        )
    return word, Path(path)


def read_trace(path: Path) -> list[tuple[float, float]]:
    """The validated (timestamp, rate) rows of a trace file."""
    where = str(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise _bad(
            f"cannot read trace {where}: {exc.strerror}", "pass an existing CSV", where
        ) from None
    if size > MAX_BYTES:
        raise _bad(
            f"trace {where} is {size} bytes, more than the 5 MiB limit",
            "resample the trace to fewer rows (e.g. one per minute)",
            where,
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad(f"cannot read trace {where}: {exc}", "pass a UTF-8 CSV file", where) from None
    return parse_rows(text, where)


def parse_rows(text: str, where: str = "trace") -> list[tuple[float, float]]:
    rows: list[tuple[float, float]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(rows) >= MAX_ROWS:
            raise _bad(
                f"{where} has more than {MAX_ROWS} rows (row {number})",
                "resample the trace to at most 100,000 rows",
                f"{where}:{number}",
            )
        cells = line.split(",")
        fix = "each row is timestamp_seconds,request_rate with finite numbers, rate >= 0"
        if len(cells) < 2:
            raise _bad(
                f"row {number} of {where} has fewer than two columns", fix, f"{where}:{number}"
            )
        try:
            stamp, rate = float(cells[0]), float(cells[1])
        except ValueError:
            raise _bad(
                f"row {number} of {where} is not two numbers: {line[:60]!r}",
                fix,
                f"{where}:{number}",
            ) from None
        if not math.isfinite(stamp) or not math.isfinite(rate) or rate < 0:
            raise _bad(
                f"row {number} of {where}: the rate must be a finite number >= 0 and the "
                f"timestamp finite (got {cells[0].strip()}, {cells[1].strip()})",
                fix,
                f"{where}:{number}",
            )
        if rows and stamp <= rows[-1][0]:
            raise _bad(
                f"row {number} of {where}: timestamp {stamp:g} is not after the previous "
                f"row's {rows[-1][0]:g} (timestamps must strictly increase)",
                "sort the trace by timestamp and drop duplicate timestamps",
                f"{where}:{number}",
            )
        rows.append((stamp, rate))
    if not rows:
        raise _bad(f"{where} has no rows", "pass a trace with at least one row", where)
    return rows


def map_curve(rows: list[tuple[float, float]], minutes: int, builtin: list[float]) -> list[float]:
    """One multiplier per minute: the trace's shape with the built-in curve's mean."""
    stamps = [r[0] for r in rows]
    first, span = stamps[0], stamps[-1] - stamps[0]
    raw: list[float] = []
    for t in range(minutes):
        if span <= 0:
            raw.append(rows[0][1])
            continue
        x = first + (t + 0.5) / minutes * span
        i = bisect.bisect_right(stamps, x)
        if i <= 0:
            raw.append(rows[0][1])
        elif i >= len(rows):
            raw.append(rows[-1][1])
        else:
            (x0, y0), (x1, y1) = rows[i - 1], rows[i]
            raw.append(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
    mean = sum(raw) / minutes
    target = sum(builtin) / max(1, len(builtin))
    if mean <= 0:
        return [0.0] * minutes
    return [v * target / mean for v in raw]
