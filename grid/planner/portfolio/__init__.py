"""Workload → model portfolio joint with placement (issue 9, DESIGN.md "Portfolio contract").

Formulation, cpsat-primer style, one small module per part:
    context.py      sets, the fixed base plan, feasibility scan, utilities (PairInfo)
    evidence.py     outcome confidences and the optimism bonus
    gates.py        evidence gate, media canary band, weak-evidence cap, replica needs
    spare.py        the fleet spare-capacity proof
    assign.py       assignment literals a[w, m], one model per workload
    link.py         a[w, m] linked to the placement's replica variables; base fixed
    exploration.py  the exploration budget against the exploitation-only portfolio
    objective.py    one expression per level (score.py is the solver-agnostic scorer)
    solve.py        lexicographic CP-SAT stages, hinted with the coordinate search
    hosttypes.py    interchangeable hosts grouped into types; disaggregation onto hosts
    typed.py        the CP-SAT model over types: n[m, T] columns, per-type ledgers
    search.py       bounded coordinate search (≤4 candidates per workload, ≤64 portfolios)
    report.py       admission rows and candidate rows
    attach.py       the hook that adds the portfolio to a finished plan
"""

from grid.planner.portfolio.attach import attach_portfolio, decide
from grid.planner.portfolio.context import PortfolioContext, build_context
from grid.planner.portfolio.score import LEVELS, compare, evaluate
from grid.planner.portfolio.search import coordinate_search

__all__ = [
    "LEVELS",
    "PortfolioContext",
    "attach_portfolio",
    "build_context",
    "compare",
    "coordinate_search",
    "decide",
    "evaluate",
]
