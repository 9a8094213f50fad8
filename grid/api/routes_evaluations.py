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
from grid.runtime.controller.evidence_store import EvaluationRequest, keeper_for

router = APIRouter(prefix="/allocator", tags=["allocator"])


@router.post("/evaluations", dependencies=[Depends(require_operator)])
def post_evaluation(body: EvaluationRequest, service: Service) -> EvaluationReply:
    ctl = service.controller
    with ctl.lock:  # the profiles and the policy cannot change under the check
        recorded = keeper_for(ctl).record_evaluation(
            body,
            profiles=ctl.profiles,
            vocabulary=ctl.policy.workload_vocabulary,
            policy=ctl.policy.portfolio,
            now=service.clock(),
        )
        revision = ctl.request_tick()
    service.notify()
    return EvaluationReply(evaluation=recorded, revision=revision)
