"""The stateful controller: durable state, lease, generations, timings, the control loop.

The face other packages use: `Controller` (and its `ControllerConfig`), the `ControllerService`
that owns its clock and thread, the stores and lease file it is built with, the wire model of a
node update, the status document and the published views (`RoutingTable`, `PlanView`,
`MetricsView`). The state object and collaborators are exported for
readers and tests; other packages act through `Controller`.
"""

from grid.fleet.generation import PlanGeneration
from grid.runtime.controller.authority import Grace, LeaseKeeper
from grid.runtime.controller.config import ControllerConfig
from grid.runtime.controller.core import Controller
from grid.runtime.controller.engine_restarts import serving_view, stage_restarts
from grid.runtime.controller.evidence_store import EvaluationRequest, RequestSignals, keeper_for
from grid.runtime.controller.host_drains import set_host_drain
from grid.runtime.controller.key_records import update_client_keys
from grid.runtime.controller.lease import LeaseFile, process_marker
from grid.runtime.controller.live_state import ControllerState, restore_state
from grid.runtime.controller.outbox import Outbox
from grid.runtime.controller.prefetch_inputs import snapshot_demand
from grid.runtime.controller.reports import Delivery, NodeReply, TickReport
from grid.runtime.controller.service import ControllerService
from grid.runtime.controller.state import ClientKeyRecord
from grid.runtime.controller.status import StatusView, percentile, status_document
from grid.runtime.controller.store import MemoryStore, StateStore, Store
from grid.runtime.controller.timings import TimingTable
from grid.runtime.controller.trust import Attestor, RouteJudge
from grid.runtime.controller.views import MetricsView, PlanView, RoutingTable
from grid.runtime.controller.wire import NodeUpdate
from grid.runtime.controller.workload_inputs import mapped_inputs, prewarm_demand, with_mapping

__all__ = [
    "Attestor",
    "ClientKeyRecord",
    "Controller",
    "ControllerConfig",
    "ControllerService",
    "ControllerState",
    "Delivery",
    "EvaluationRequest",
    "Grace",
    "LeaseFile",
    "LeaseKeeper",
    "MemoryStore",
    "MetricsView",
    "NodeReply",
    "NodeUpdate",
    "Outbox",
    "PlanGeneration",
    "PlanView",
    "RequestSignals",
    "RouteJudge",
    "RoutingTable",
    "StateStore",
    "StatusView",
    "Store",
    "TickReport",
    "TimingTable",
    "keeper_for",
    "mapped_inputs",
    "percentile",
    "prewarm_demand",
    "process_marker",
    "restore_state",
    "serving_view",
    "set_host_drain",
    "snapshot_demand",
    "stage_restarts",
    "status_document",
    "update_client_keys",
    "with_mapping",
]
