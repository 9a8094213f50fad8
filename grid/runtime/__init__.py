"""The runtime: the pure reconciler and the stateful controller (DESIGN.md "Layers").

The face lists what other packages use: the controller, its config, service, store and lease
file, the request signals, the status document, and the reconciler. Names are imported on first
use (grid/fleet/faces.py): importing the face loads no planner or OR-Tools. The `reconcile`
function is read from grid.runtime.reconcile: the name is also that subpackage's.
"""

from typing import TYPE_CHECKING

from grid.fleet.faces import lazy_face

if TYPE_CHECKING:
    from grid.runtime.controller.config import ControllerConfig
    from grid.runtime.controller.core import Controller
    from grid.runtime.controller.evidence_store import EvaluationRequest, RequestSignals, keeper_for
    from grid.runtime.controller.lease import LeaseFile, process_marker
    from grid.runtime.controller.service import ControllerService
    from grid.runtime.controller.status import percentile, status_document
    from grid.runtime.controller.store import StateStore
    from grid.runtime.reconcile import result_document
    from grid.runtime.reconcile.codes import DEFERRAL_TEXT
    from grid.runtime.reconcile.modes import parse_mode

# module -> the names it gives the face, separated by spaces
_EXPORTS: dict[str, str] = {
    "grid.runtime.controller.config": "ControllerConfig",
    "grid.runtime.controller.core": "Controller",
    "grid.runtime.controller.evidence_store": "EvaluationRequest RequestSignals keeper_for",
    "grid.runtime.controller.lease": "LeaseFile process_marker",
    "grid.runtime.controller.service": "ControllerService",
    "grid.runtime.controller.status": "percentile status_document",
    "grid.runtime.controller.store": "StateStore",
    "grid.runtime.reconcile": "result_document",
    "grid.runtime.reconcile.codes": "DEFERRAL_TEXT",
    "grid.runtime.reconcile.modes": "parse_mode",
}

__all__ = [
    "DEFERRAL_TEXT",
    "Controller",
    "ControllerConfig",
    "ControllerService",
    "EvaluationRequest",
    "LeaseFile",
    "RequestSignals",
    "StateStore",
    "keeper_for",
    "parse_mode",
    "percentile",
    "process_marker",
    "result_document",
    "status_document",
]

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
