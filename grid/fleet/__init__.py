"""The vocabulary: fleet models, actions, the wire, refusals, snapshot load/save (DESIGN.md).

The face lists what other packages use; each name is imported on first use (grid/fleet/faces.py),
so `grid --version`, which needs only `GridError`, loads none of the models.
"""

from typing import TYPE_CHECKING

from grid.fleet.faces import lazy_face

if TYPE_CHECKING:
    from grid.fleet.actions import (
        CONSTRUCTIVE_KINDS,
        DESTRUCTIVE_KINDS,
        Action,
        ActionKind,
        ActionRecord,
        Deferral,
        Mode,
        Receipt,
        ReceiptStatus,
        ReconcileResult,
        RecordStatus,
        Tombstone,
        Urgency,
        Withdrawal,
        action_id,
        apply_receipt,
        parse_history,
    )
    from grid.fleet.engine_settings import EngineSettings, flags_problem_for
    from grid.fleet.errors import GridError, SnapshotError, refuse_unknown
    from grid.fleet.externals import (
        NAME_PATTERN,
        ExternalEndpoint,
        ExternalHealth,
        ExternalSpec,
        base_url,
        url_problem,
    )
    from grid.fleet.files import (
        MAX_JSON_DEPTH,
        atomic_write_text,
        fsync_dir,
        json_depth,
        loads_bounded,
        read_json_file,
    )
    from grid.fleet.generation import PlanGeneration
    from grid.fleet.models import (
        ADMITTING_STATES,
        LIVE_STATES,
        MAX_MODEL_ID,
        REUSABLE_STATES,
        Assignment,
        Binding,
        DemandEntry,
        Evidence,
        FleetSnapshot,
        Host,
        HostState,
        LearnedStartup,
        LevelValue,
        ModelProfile,
        Ownership,
        Plan,
        Policy,
        Preemption,
        Residency,
        ResidencyState,
        SolverReport,
        Unsatisfied,
    )
    from grid.fleet.prefetch import (
        CacheEviction,
        Prediction,
        PredictiveEntry,
        PrefetchAdvisory,
        PrefetchPolicy,
        PrefetchReport,
        PrefetchSkip,
    )
    from grid.fleet.procstat import ProcStat, process_state, read_stat, start_ticks
    from grid.fleet.routes import Route
    from grid.fleet.snapshot import load_snapshot, parse_snapshot, snapshot_error_from
    from grid.fleet.wire import (
        ACK_STATUSES,
        ADDRESS_PATTERN,
        DEFAULT_ENGINE_ADDRESS,
        MAX_ROWS,
        MAX_TEXT,
        NODE_COMMAND_KINDS,
        NODE_HEADER,
        OPERATOR_HEADER,
        REPLY_SIGNATURE_HEADER,
        AckAnswer,
        CommandBrief,
        NodeCommandKind,
        NodeReply,
        NodeStatus,
        NodeUpdate,
        ReplyAllocator,
        StatusReceipt,
        StatusResidency,
        WireAck,
        WireAllocator,
        WireCommand,
        WireLaunch,
        WireLoad,
        WirePredictiveEntry,
        WireResidency,
        WireResources,
        WireRoute,
        reply_is_signed,
        reply_key_path,
        reply_signature,
        wire_json,
    )
    from grid.fleet.workloads import (
        DEFAULT_WORKLOAD_VOCABULARY,
        AdmissionRow,
        AdmissionState,
        CandidateRow,
        Modality,
        Outcome,
        PortfolioLevel,
        PortfolioPolicy,
        PortfolioReport,
        PortfolioSolver,
        ReplacementAuthorization,
        WorkloadForecast,
    )

# module -> the names it gives the face, separated by spaces
_EXPORTS: dict[str, str] = {
    "grid.fleet.actions": (
        "Action ActionKind ActionRecord CONSTRUCTIVE_KINDS DESTRUCTIVE_KINDS Deferral"
        " Mode Receipt ReceiptStatus ReconcileResult RecordStatus Tombstone Urgency"
        " Withdrawal action_id apply_receipt parse_history"
    ),
    "grid.fleet.engine_settings": "EngineSettings flags_problem_for",
    "grid.fleet.errors": "GridError SnapshotError refuse_unknown",
    "grid.fleet.externals": (
        "ExternalEndpoint ExternalHealth ExternalSpec NAME_PATTERN base_url url_problem"
    ),
    "grid.fleet.files": "MAX_JSON_DEPTH atomic_write_text fsync_dir json_depth loads_bounded"
    " read_json_file",
    "grid.fleet.generation": "PlanGeneration",
    "grid.fleet.models": (
        "ADMITTING_STATES Assignment Binding DemandEntry Evidence FleetSnapshot Host"
        " HostState LIVE_STATES LearnedStartup LevelValue MAX_MODEL_ID ModelProfile"
        " Ownership Plan Policy Preemption REUSABLE_STATES Residency ResidencyState"
        " SolverReport Unsatisfied"
    ),
    "grid.fleet.prefetch": (
        "CacheEviction Prediction PredictiveEntry PrefetchAdvisory PrefetchPolicy"
        " PrefetchReport PrefetchSkip"
    ),
    "grid.fleet.procstat": "ProcStat process_state read_stat start_ticks",
    "grid.fleet.routes": "Route",
    "grid.fleet.snapshot": "load_snapshot parse_snapshot snapshot_error_from",
    "grid.fleet.wire": (
        "ACK_STATUSES ADDRESS_PATTERN AckAnswer CommandBrief DEFAULT_ENGINE_ADDRESS"
        " MAX_ROWS MAX_TEXT NODE_COMMAND_KINDS NODE_HEADER NodeCommandKind NodeReply"
        " NodeStatus NodeUpdate OPERATOR_HEADER REPLY_SIGNATURE_HEADER ReplyAllocator"
        " StatusReceipt StatusResidency WireAck WireAllocator WireCommand WireLaunch WireLoad"
        " WirePredictiveEntry"
        " WireResidency WireResources WireRoute reply_is_signed reply_key_path"
        " reply_signature wire_json"
    ),
    "grid.fleet.workloads": (
        "AdmissionRow AdmissionState CandidateRow DEFAULT_WORKLOAD_VOCABULARY Modality"
        " Outcome PortfolioLevel PortfolioPolicy PortfolioReport PortfolioSolver"
        " ReplacementAuthorization WorkloadForecast"
    ),
}

__all__ = [
    "ACK_STATUSES",
    "ADDRESS_PATTERN",
    "ADMITTING_STATES",
    "CONSTRUCTIVE_KINDS",
    "DEFAULT_ENGINE_ADDRESS",
    "DEFAULT_WORKLOAD_VOCABULARY",
    "DESTRUCTIVE_KINDS",
    "LIVE_STATES",
    "MAX_JSON_DEPTH",
    "MAX_MODEL_ID",
    "MAX_ROWS",
    "MAX_TEXT",
    "NAME_PATTERN",
    "NODE_COMMAND_KINDS",
    "NODE_HEADER",
    "OPERATOR_HEADER",
    "REPLY_SIGNATURE_HEADER",
    "REUSABLE_STATES",
    "AckAnswer",
    "Action",
    "ActionKind",
    "ActionRecord",
    "AdmissionRow",
    "AdmissionState",
    "Assignment",
    "Binding",
    "CacheEviction",
    "CandidateRow",
    "CommandBrief",
    "Deferral",
    "DemandEntry",
    "EngineSettings",
    "Evidence",
    "ExternalEndpoint",
    "ExternalHealth",
    "ExternalSpec",
    "FleetSnapshot",
    "GridError",
    "Host",
    "HostState",
    "LearnedStartup",
    "LevelValue",
    "Modality",
    "Mode",
    "ModelProfile",
    "NodeCommandKind",
    "NodeReply",
    "NodeStatus",
    "NodeUpdate",
    "Outcome",
    "Ownership",
    "Plan",
    "PlanGeneration",
    "Policy",
    "PortfolioLevel",
    "PortfolioPolicy",
    "PortfolioReport",
    "PortfolioSolver",
    "Prediction",
    "PredictiveEntry",
    "Preemption",
    "PrefetchAdvisory",
    "PrefetchPolicy",
    "PrefetchReport",
    "PrefetchSkip",
    "ProcStat",
    "Receipt",
    "ReceiptStatus",
    "ReconcileResult",
    "RecordStatus",
    "ReplacementAuthorization",
    "ReplyAllocator",
    "Residency",
    "ResidencyState",
    "Route",
    "SnapshotError",
    "SolverReport",
    "StatusReceipt",
    "StatusResidency",
    "Tombstone",
    "Unsatisfied",
    "Urgency",
    "WireAck",
    "WireAllocator",
    "WireCommand",
    "WireLaunch",
    "WireLoad",
    "WirePredictiveEntry",
    "WireResidency",
    "WireResources",
    "WireRoute",
    "Withdrawal",
    "WorkloadForecast",
    "action_id",
    "apply_receipt",
    "atomic_write_text",
    "base_url",
    "flags_problem_for",
    "fsync_dir",
    "json_depth",
    "load_snapshot",
    "loads_bounded",
    "parse_history",
    "parse_snapshot",
    "process_state",
    "read_json_file",
    "read_stat",
    "refuse_unknown",
    "reply_is_signed",
    "reply_key_path",
    "reply_signature",
    "snapshot_error_from",
    "start_ticks",
    "url_problem",
    "wire_json",
]

__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)
