"""Orders shared by the heuristic's greedy loop and its repair (pure).

`replica_level` ranks "the k-th replica of model m" exactly as the objective levels of
`levels.py` do (smaller is more important): pinned replicas, then per priority class from the
highest, required baseline replicas round by round (every model's k-th before any model's
(k+1)-th), then directly demanded replicas round by round (measured harm breaks a round's
ties), then inferred-only replicas. `CandidateOrder` picks the best
feasible host for a model's next replica from candidates pre-sorted by static quality.
"""

from __future__ import annotations

import heapq
import operator
from array import array
from collections import Counter
from collections.abc import Iterator, Mapping
from itertools import repeat

from grid.fleet import Evidence
from grid.planner.heuristic_ledger import PlacementState
from grid.planner.levels import model_scores, quality_scores
from grid.planner.problem import Candidate, PlacementProblem

STAGE_BASELINE = 0
STAGE_DIRECT = 1
STAGE_INFERRED = 2

# A new failure domain is worth more than any placement-quality difference while the model's
# domain goal is unmet (domain diversity outranks quality), and a modest preference otherwise
# (below cached weights, above hardware estimates, as the spec orders candidate preferences).
DOMAIN_REQUIRED_BONUS = 1_000_000
DOMAIN_SPREAD_BONUS = 150

LevelKey = tuple[int, int, int, int, int]
Head = tuple[int, int, str]  # (-static score, position in score order, failure domain)


def replica_stage(problem: PlacementProblem, model_id: str, k: int) -> int:
    target = problem.targets[model_id]
    if k <= target.baseline:
        return STAGE_BASELINE
    return STAGE_DIRECT if target.evidence is Evidence.DIRECT else STAGE_INFERRED


def replica_level(
    problem: PlacementProblem, model_id: str, k: int, *, pinned: bool = False
) -> LevelKey:
    """Importance of model_id's k-th replica (fixed replicas included); smaller wins."""
    if pinned:
        return (0, 0, 0, 0, 0)
    priority = problem.model_by_id[model_id].priority
    stage = replica_stage(problem, model_id, k)
    if stage == STAGE_DIRECT:
        return (1, -priority, stage, k, -problem.harm_rank[model_id])
    if stage == STAGE_BASELINE:
        return (1, -priority, stage, k, 0)
    return (1, -priority, stage, 0, 0)


def round_order_key(problem: PlacementProblem, model_id: str) -> tuple[int, int, int, str]:
    """Within one round: constrained first, then larger, then more harmed, then model_id."""
    model = problem.model_by_id[model_id]
    return (
        len(problem.candidates_of_model(model_id)),
        -model.memory_mb,
        -problem.harm_rank[model_id],
        model_id,
    )


class CandidateOrder:
    """Each model's candidates sorted once by static quality (host_id breaks ties).

    During the greedy pass capacity only shrinks, so a candidate that is refused once stays
    refused: `best(..., greedy=True)` skips the refused prefix of each list for good (the
    first-fit pile-up on a large uniform fleet would otherwise be rescanned per replica).
    The repair removes placements, so it scans from the start.

    A domain bonus is the same for every candidate of one domain, so among equal static
    scores the single list would be scanned past every full host looking for a host in a new
    domain; the greedy pass keeps one list and refused prefix per domain instead, and the
    domains' head candidates in two heaps (domains the model covers, domains it does not: the
    bonus is equal within each), so a pick costs a heap step per refused candidate and the
    pass is linear in candidates at any number of domains (the same candidate wins: highest
    total, then the earliest in the single list).
    """

    def __init__(self, problem: PlacementProblem, scores: dict[tuple[str, str], int]) -> None:
        self.scores = scores
        # Per model: its candidates (the problem's shared list, by host ID), the positions in
        # that list by static score (highest first, then host ID) and the static scores in that
        # order. Positions rather than a sorted copy of the candidates: a copy takes a
        # reference to every candidate object, one cache miss each at millions of candidates.
        self._cands: dict[str, list[Candidate]] = {}
        self.order: dict[str, array[int]] = {}
        self.sorted_scores: dict[str, list[int]] = {}
        self._start = {m.model_id: 0 for m in problem.models}
        self._host_domain = {h.host_id: h.domain for h in problem.hosts}
        # The failure domains a model can reach: once its placements cover them all, no
        # candidate can earn a domain bonus, and the scan stops at the first feasible one
        # of the best static score instead of checking every equal-score host for a bonus.
        domain_of = self._host_domain.__getitem__
        self.domains: dict[str, frozenset[str]] = {}
        # Each candidate's domain, in score order: read once more to index the domains
        # (`_indices_by_domain`), then dropped.
        self._domain_seq: dict[str, list[str]] = {}
        for m in problem.models:
            model_id = m.model_id
            cands, hosts, order, ordered_scores = _by_quality(problem, model_id, scores)
            # 4 bytes a position instead of an int object each (3.65 M at 10,000 hosts)
            self._cands[model_id], self.order[model_id] = cands, array("i", order)
            self.sorted_scores[model_id] = ordered_scores
            seq = self._domain_seq[model_id] = list(map(domain_of, map(hosts.__getitem__, order)))
            self.domains[model_id] = frozenset(seq)
        self._by_domain: dict[str, dict[str, list[int]]] = {}
        self._domain_start: dict[str, dict[str, int]] = {}
        # Per model: heaps of (-static score, position, domain) of each domain's head, one for
        # the domains the model covers and one for the others (`_best_by_domain`).
        self._heads: dict[str, tuple[list[Head], list[Head]]] = {}
        # Per model and domain: the head position last found feasible and its host ledger's
        # version then (a host's feasibility changes only when its ledger does).
        self._feasible: dict[str, dict[str, tuple[int, int]]] = {}

    def in_order(self, model_id: str) -> Iterator[Candidate]:
        """The model's candidates by static score, highest first, then host ID."""
        return map(self._cands[model_id].__getitem__, self.order[model_id])

    @property
    def sorted(self) -> Mapping[str, list[Candidate]]:
        """Per model: `in_order` as a list (built on each lookup)."""
        return _SortedView(self)

    def best(
        self,
        state: PlacementState,
        model_id: str,
        *,
        skip_host: str | None = None,
        greedy: bool = False,
    ) -> Candidate | None:
        """The feasible candidate with the highest quality plus failure-domain bonus."""
        if not state.has_room_for_model(model_id):
            return None
        if state.domains[model_id].keys() >= self.domains[model_id]:
            max_bonus = 0  # every reachable domain is covered: no bonus left to find
        elif state.domain_shortfall(model_id):
            max_bonus = DOMAIN_REQUIRED_BONUS
        else:
            max_bonus = DOMAIN_SPREAD_BONUS
        if greedy and max_bonus and skip_host is None:
            return self._best_by_domain(state, model_id, max_bonus)
        cands, order = self._cands[model_id], self.order[model_id]
        static_of = self.sorted_scores[model_id]
        start = self._start[model_id] if greedy else 0
        refused_prefix = greedy
        best: Candidate | None = None
        best_total = 0
        for index in range(start, len(order)):
            cand = cands[order[index]]
            static = static_of[index]
            if best is not None and static + max_bonus <= best_total:
                break  # sorted by static score: nothing further can win (ties: earlier wins)
            if cand.host_id == skip_host or not state.allowed(cand) or not state.fits(cand):
                if refused_prefix and cand.host_id != skip_host:
                    self._start[model_id] = index + 1
                continue
            refused_prefix = False
            total = static + (max_bonus if max_bonus and state.is_new_domain(cand) else 0)
            if best is None or total > best_total:
                best, best_total = cand, total
        return best

    def _best_by_domain(
        self, state: PlacementState, model_id: str, max_bonus: int
    ) -> Candidate | None:
        cands, order = self._cands[model_id], self.order[model_id]
        static_of = self.sorted_scores[model_id]
        covered = state.domains[model_id]
        lists = self._by_domain.get(model_id)
        if lists is None:
            seq = self._domain_seq.pop(model_id)
            lists = self._by_domain[model_id] = _indices_by_domain(seq)
            self._domain_start[model_id] = dict.fromkeys(lists, 0)
            self._feasible[model_id] = {}
            heads: tuple[list[Head], list[Head]] = ([], [])
            for domain, indices in lists.items():
                heads[domain in covered].append((-static_of[indices[0]], indices[0], domain))
            for heap in heads:
                heapq.heapify(heap)
            self._heads[model_id] = heads
        starts = self._domain_start[model_id]
        feasible = self._feasible[model_id]
        ledgers = state.ledgers
        # `state.allowed` for this model during one call (`best` checked the model's room):
        # a pinned candidate is allowed, any other one while the pin reservation leaves room.
        unpinned_allowed = state.nonpinned[model_id] < state.nonpinned_allowance[model_id]
        fits = state.fits
        found: list[tuple[int, int]] = []  # (total, position) of each heap's feasible head
        for in_covered, heap in enumerate(self._heads[model_id]):
            other = self._heads[model_id][1 - in_covered]
            while heap:
                _neg, index, domain = heap[0]
                if (domain in covered) != bool(in_covered):
                    heapq.heappush(other, heapq.heappop(heap))  # newly covered: no bonus now
                    continue
                cand = cands[order[index]]
                pos = starts[domain]
                if unpinned_allowed or cand.pinned:
                    version = ledgers[cand.host_id].version
                    if feasible.get(domain) == (pos, version) or fits(cand):
                        feasible[domain] = (pos, version)
                        bonus = 0 if in_covered else max_bonus
                        found.append((static_of[index] + bonus, index))
                        break
                # refused once, refused for the rest of the greedy pass: the next head
                heapq.heappop(heap)
                indices = lists[domain]
                starts[domain] = pos + 1
                if pos + 1 < len(indices):
                    nxt = indices[pos + 1]
                    heapq.heappush(heap, (-static_of[nxt], nxt, domain))
        if not found:
            return None
        _total, index = min(found, key=lambda tp: (-tp[0], tp[1]))
        return cands[order[index]]


class _SortedView(Mapping[str, list[Candidate]]):
    def __init__(self, order: CandidateOrder) -> None:
        self._order = order

    def __getitem__(self, model_id: str) -> list[Candidate]:
        return list(self._order.in_order(model_id))

    def __iter__(self) -> Iterator[str]:
        return iter(self._order.order)

    def __len__(self) -> int:
        return len(self._order.order)


_HOST = operator.itemgetter(1)


def _by_quality(
    problem: PlacementProblem, model_id: str, scores: dict[tuple[str, str], int]
) -> tuple[list[Candidate], list[str], list[int], list[int]]:
    """The model's candidates (by host ID), their host IDs, their positions by static score
    (highest first, then host ID) and the scores in that order. C-level maps and one stable
    sort by score of the positions in host-ID order (`reverse` keeps stability) instead of a
    Python key per candidate; the candidate objects are read once (for their host IDs)."""
    cands = problem.candidates_of_model(model_id)  # by host ID
    hosts = list(map(_HOST, cands))
    if scores is quality_scores(problem):
        values = model_scores(problem, cands, hosts)
    else:
        values = list(map(scores.__getitem__, zip(repeat(model_id), hosts)))
    order = sorted(range(len(cands)), key=values.__getitem__, reverse=True)
    return cands, hosts, order, list(map(values.__getitem__, order))


def _indices_by_domain(domains: list[str]) -> dict[str, list[int]]:
    """Per failure domain, the positions holding it in `domains` (a model's candidates'
    domains in their order), ascending."""
    positions = sorted(range(len(domains)), key=domains.__getitem__)  # stable: ascending
    out: dict[str, list[int]] = {}
    start = 0
    for domain, count in sorted(Counter(domains).items()):
        out[domain] = positions[start : start + count]
        start += count
    return out
