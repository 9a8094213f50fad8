"""Where the newest scenario report lives (written by `grid test scenario --html`, served at
GET /ui/scenario): $GRID_SCENARIO_REPORT, else ~/.grid/scenario/last.html."""

from __future__ import annotations

import os
from pathlib import Path

SCENARIO_ENV = "GRID_SCENARIO_REPORT"


def scenario_report_path() -> Path:
    configured = os.environ.get(SCENARIO_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".grid" / "scenario" / "last.html"
