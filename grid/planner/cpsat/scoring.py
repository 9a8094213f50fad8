"""levels.score_placement with its per-problem tables computed once.

The solver scores every hint and every stage's result; on a 1,000-host fleet recomputing the
quality table for each call costs more than a CP-SAT stage. `Scorer.score` returns exactly
levels.score_placement (a test holds them equal on random placements).
"""

from __future__ import annotations

from collections.abc import Iterable

from grid.planner.levels import disruption_cost, quality_scores, replica_values
from grid.planner.problem import PlacementProblem

Key = tuple[str, str]


class Scorer:
    def __init__(self, problem: PlacementProblem) -> None:
        self.problem = problem
        self.quality = quality_scores(problem)
        self.fixed_counts: dict[str, int] = {m.model_id: 0 for m in problem.models}
        self.fixed_domains: dict[str, set[str]] = {}
        for f in problem.fixed:
            self.fixed_counts[f.model_id] = self.fixed_counts.get(f.model_id, 0) + 1
            domain = problem.host_by_id[f.host_id].domain
            self.fixed_domains.setdefault(f.model_id, set()).add(domain)
        self.fixed_pinned = sum(
            1 for f in problem.fixed if f.host_id in problem.model_by_id[f.model_id].pinned_hosts
        )
        self.incumbent_costs = {
            (cand.model_id, cand.host_id): disruption_cost(problem, cand)
            for cand in problem.incumbent_candidates
        }
        self.total_disruption = sum(self.incumbent_costs.values())
        self.fixed_hosts = {f.host_id for f in problem.fixed}
        self.open_hosts = [
            h.host_id for h in problem.hosts if h.admitting and h.host_id not in self.fixed_hosts
        ]
        self.domain_goals = {
            m.model_id: m.min_failure_domains for m in problem.models if m.min_failure_domains > 1
        }

    def score(self, placed: Iterable[Key]) -> dict[str, int]:
        problem = self.problem
        chosen = set(placed)
        counts = dict(self.fixed_counts)
        for model_id, _host in chosen:
            counts[model_id] = counts.get(model_id, 0) + 1
        values = {
            "pinned": self.fixed_pinned + sum(1 for key in chosen if problem.candidates[key].pinned)
        }
        values.update(replica_values(problem, counts))
        values["domain_shortfall"] = self._domain_shortfall(chosen, counts)
        values["disruption"] = self.total_disruption - sum(
            cost for key, cost in self.incumbent_costs.items() if key in chosen
        )
        values["quality"] = sum(self.quality[key] for key in chosen)
        used = {h for _m, h in chosen}
        values["spare_hosts"] = sum(1 for h in self.open_hosts if h not in used)
        return values

    def replica_score(self, placed: Iterable[Key]) -> dict[str, int]:
        """Only the replica levels of `score` (pinned and the priority classes): all that
        `compare(..., replica_levels_only=True)` reads, without the per-candidate sums."""
        problem = self.problem
        counts = dict(self.fixed_counts)
        pinned = self.fixed_pinned
        for key in set(placed):
            counts[key[0]] = counts.get(key[0], 0) + 1
            pinned += problem.candidates[key].pinned
        values = {"pinned": pinned}
        values.update(replica_values(problem, counts))
        return values

    def _domain_shortfall(self, chosen: set[Key], counts: dict[str, int]) -> int:
        if not self.domain_goals:
            return 0
        domains: dict[str, set[str]] = {
            m: set(self.fixed_domains.get(m, ())) for m in self.domain_goals
        }
        for model_id, host_id in chosen:
            if model_id in domains:
                domains[model_id].add(self.problem.host_by_id[host_id].domain)
        return sum(
            max(0, min(goal, counts[m]) - len(domains[m])) for m, goal in self.domain_goals.items()
        )
