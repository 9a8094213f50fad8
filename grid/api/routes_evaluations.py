"""POST /allocator/evaluations: an operator's labelled quality for one (model, workload).

Operator capability only (checked before the body is read). The controller-side rules and the
refusal codes (unknown_model, unknown_workload, invalid_quality, artifact_mismatch; nothing is
recorded on a refusal) live in grid/runtime/controller/evidence_store.py. A recorded evaluation
is a new input, so it marks the plan dirty and wakes the controller.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from grid.api.deps import Service, require_operator
from grid.fleet.operator import EvaluationReply
from grid.runtime.controller import EvaluationRequest

router = APIRouter(prefix="/allocator", tags=["allocator"])


@router.post("/evaluations", dependencies=[Depends(require_operator)])
def post_evaluation(body: EvaluationRequest, service: Service) -> EvaluationReply:
    recorded, revision = service.controller.record_evaluation(body, service.clock())
    service.notify()
    return EvaluationReply(evaluation=recorded, revision=revision)
