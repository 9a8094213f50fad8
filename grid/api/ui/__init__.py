"""The live dashboard (`/ui`): its routes, the view document and the operator actions it adds.

The page itself (static/index.html, app.js, app.css) ships in this package as package data:
no build step, and nothing is fetched from elsewhere at run time. The face is lazy
(grid/fleet/faces.py): the lab reads `scenario_report_path` without loading FastAPI.
"""

from typing import TYPE_CHECKING

from grid.fleet.faces import lazy_face

if TYPE_CHECKING:
    from grid.api.ui.paths import SCENARIO_ENV, scenario_report_path
    from grid.api.ui.view import desired_reason, fleet_view

_EXPORTS: dict[str, str] = {
    "grid.api.ui.paths": "SCENARIO_ENV scenario_report_path",
    "grid.api.ui.view": "desired_reason fleet_view",
}

__all__ = [
    "SCENARIO_ENV",
    "desired_reason",
    "fleet_view",
    "scenario_report_path",
]

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
