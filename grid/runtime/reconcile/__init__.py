"""Pure reconciliation: a solved plan and the actual fleet in, staged safe actions out."""

from grid.runtime.reconcile.cache import EXPIRED_REASON, REPLACED_REASON
from grid.runtime.reconcile.codes import DEFERRAL_TEXT, withdrawal_text
from grid.runtime.reconcile.core import reconcile, result_document
from grid.runtime.reconcile.gates import (
    Candidate,
    DeliveryLeases,
    GateContext,
    Lease,
    Path,
    delivery_blocker,
)
from grid.runtime.reconcile.history import (
    HistoryIndex,
    dangling_destructive,
    start_failures,
    with_failures,
)
from grid.runtime.reconcile.modes import parse_mode
from grid.runtime.reconcile.view import FleetView, route_proven

__all__ = [
    "DEFERRAL_TEXT",
    "EXPIRED_REASON",
    "REPLACED_REASON",
    "Candidate",
    "DeliveryLeases",
    "FleetView",
    "GateContext",
    "HistoryIndex",
    "Lease",
    "Path",
    "dangling_destructive",
    "delivery_blocker",
    "parse_mode",
    "reconcile",
    "result_document",
    "route_proven",
    "start_failures",
    "with_failures",
    "withdrawal_text",
]
