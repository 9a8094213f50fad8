"""Plan a portfolio snapshot and check it with the independent validator."""

from __future__ import annotations

from grid.fleet.models import FleetSnapshot, Plan
from grid.fleet.workloads import AdmissionRow, CandidateRow, PortfolioReport
from grid.planner.validate import violations
from tests.planner.portfolio.builders import plan_of


def planned(snap: FleetSnapshot, engine: str = "cpsat") -> tuple[Plan, PortfolioReport]:
    plan = plan_of(snap, engine)
    assert violations(snap, plan) == []
    assert plan.portfolio is not None
    return plan, plan.portfolio


def row(report: PortfolioReport, workload: str) -> AdmissionRow:
    return next(r for r in report.admission if r.workload == workload)


def candidate(report: PortfolioReport, workload: str, model_id: str) -> CandidateRow:
    return next(c for c in report.candidates if (c.workload, c.model_id) == (workload, model_id))


def hosts_of(plan: Plan, model_id: str) -> list[str]:
    return sorted(a.host_id for a in plan.assignments if a.model_id == model_id)
