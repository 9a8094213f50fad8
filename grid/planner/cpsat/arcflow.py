"""Exact packing on a host type: the configuration graph (arc-flow) of one host's ledger.

Source: J. M. Valério de Carvalho, "Exact solution of bin-packing problems using column
generation and branch-and-bound", Annals of Operations Research 86 (1999) 629-659 (the
arc-flow model, equivalent in LP strength to the Gilmore-Gomory pattern model), and F. Brandão,
J. P. Pedroso, "Bin packing and related problems: general arc-flow formulation with graph
compression", Computers & Operations Research 69 (2016) 56-67 (VPSolver: nodes are vectors
of used capacity, so every per-host constraint becomes a dimension of the label).

Sets
    T        a host type (types.py): |T| interchangeable hosts, each with the room of an empty
             host (TypeRoom: footprint memory F, make-before-break memory N, model slots s,
             known free disk D); no live residency, so every candidate on T is new.
    C        item classes: the type's models grouped by everything one host's ledger reads of
             them (memory, new memory, artifact disk, colocation ceiling); a model with an
             exclusion partner on T, or that may take two or more replicas (open(m) ≥ 2), is a
             class of its own, *single-use* (at most one replica of a model per host). The other
             classes are *multi-use*: one-replica models of equal footprint.
Graph G = (V, A)
    V        states of one host's ledger: (memory used, new memory used, models, smallest
             colocation ceiling among them, disk used, single-use classes with an exclusion
             partner present), keeping only the dimensions that can bind on T, reached from
             the empty host by adding classes in one order: single-use classes in strictly
             increasing index, then multi-use classes in non-decreasing index (nodes of the
             multi-use part are merged by state, as in Valério de Carvalho's reduced graph).
    A        (u, v, c): v = u + one item of class c where the ledger admits it (the same rule
             as cpsat/ledger.py host_blockers: both memory ledgers, slots, own ceilings,
             exclusions, disk), plus a loss arc from every node to the sink.
    A source-sink path is exactly one feasible content of one host, listed in class order, and
    every feasible content is a path.
Variables f_a ∈ {0..|T|} per arc (`add_type_flow`).
Constraints
    flow conservation at every node but the source and the sink;
    Σ_{a leaving the source} f_a ≤ |T|;
    Σ_{a ∈ A_c} f_a = Σ_{m ∈ c} n[m,T] for every class c.
Exactness. The graph is acyclic (every arc adds a model), so a flow decomposes into at most |T|
paths (`decompose`), each one host's content; a class's models are dealt to its items, one
replica per model and host (single-use classes appear at most once per path, multi-use classes
hold one-replica models). Conversely every packing of T's hosts is a flow. So with this linking
the host-type model (aggregate.py) is exact on T, and its replica levels are the per-host
model's.
Given counts (`pack_type`, the disaggregation of a solved host-type model): with every n[m,T]
fixed, the type's memory slack S = |T|·F − Σ mem·n bounds every host's unused memory, so
loss arcs leave only nodes with at least F − S used, and nodes that reach none are dropped
(exact: every packing of those counts is still a flow). With S = 0 every host is full and
the model is a pure exact cover, solved without an objective; otherwise the objective is the
number of packed replicas (at most the counts), so a short answer is a partial packing and,
when OPTIMAL, a proof that the counts do not pack.
Size. The graph grows with the states a host can reach; a type whose graph would exceed
MAX_ARCS arcs is not modelled (`None`): its per-type sums stay a relaxation (type_ledgers.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from grid.planner.cpsat.type_ledgers import TypeRoom
from grid.planner.problem import PlacementProblem
from grid.planner.types import HostType

Key = tuple[str, str]
State = tuple[int, ...]
MAX_ARCS = 60_000  # a larger configuration graph is not built (its type stays relaxed)
UNLIMITED = 1 << 30
SEED = 20240611


@dataclass(frozen=True)
class ItemClass:
    models: tuple[str, ...]
    memory_mb: int
    new_mb: int
    disk_mb: int
    ceiling: int  # 0: none
    single_use: bool
    exclusive: bool  # has an exclusion partner on the type


@dataclass
class Graph:
    """The configuration graph of one host type (module docstring)."""

    classes: list[ItemClass]
    arcs: list[tuple[int, int, int]]  # (tail node, head node, class index); -1: loss arc
    nodes: int  # node 0 is the source, node `nodes - 1` the sink
    excluded: frozenset[tuple[int, int]] = field(default_factory=frozenset)


def item_classes(
    problem: PlacementProblem, htype: HostType, models: Iterable[str], multi: Mapping[str, bool]
) -> list[ItemClass]:
    """The classes of `models` on `htype` (module docstring); `multi[m]`: m may take two or
    more replicas on the type. Single-use classes first, each class's models by ID; larger
    memory first within each part."""
    first = htype.host_ids[0]
    partners = problem.exclusion_partners
    on_type = set(htype.models)
    wanted = sorted(set(models))
    groups: dict[tuple[int, int, int, int, bool, bool, str], list[str]] = {}
    for model_id in wanted:
        cand = problem.candidates[(model_id, first)]
        exclusive = bool(partners.get(model_id, frozenset()) & on_type)
        single = exclusive or multi.get(model_id, False)
        # A single-use class holds one model: its ID is part of the key.
        key = (
            cand.memory_mb,
            cand.new_mb,
            cand.disk_mb,
            problem.ceiling(model_id),
            single,
            exclusive,
            model_id if single else "",
        )
        groups.setdefault(key, []).append(model_id)
    out = [ItemClass(tuple(members), *key[:6]) for key, members in groups.items()]
    out.sort(key=lambda c: (not c.single_use, -c.memory_mb, -c.new_mb, -c.disk_mb, c.models))
    return out


class _Dimensions:
    """Which ledger dimensions can bind on this room for these classes, and the step rule."""

    def __init__(self, classes: Sequence[ItemClass], room: TypeRoom) -> None:
        self.classes = classes
        self.room = room
        self.footprint = room.footprint_mb
        self.same_new = all(c.new_mb == c.memory_mb for c in classes)
        if self.same_new:
            self.footprint = min(room.footprint_mb, room.new_mb)
        smallest = sorted(c.memory_mb for c in classes for _ in range(_copies(c)))
        most, used = 0, 0
        for size in smallest:  # the most items a host could hold by memory alone
            if used + size > self.footprint:
                break
            used += size
            most += 1
        self.most = most
        self.slots = room.slots if room.slots is not None else UNLIMITED
        self.count = self.slots < most or any(0 < c.ceiling < most for c in classes)
        self.count |= any(c.memory_mb <= 0 for c in classes)  # keeps every arc increasing
        disks = sorted((c.disk_mb for c in classes for _ in range(_copies(c))), reverse=True)
        self.disk = room.disk_mb is not None and sum(disks[:most]) > room.disk_mb

    def start(self) -> State:
        # (memory, new memory, models, smallest ceiling, disk, exclusive classes bitmask)
        return (0, 0, 0, UNLIMITED if self.count else 0, 0, 0)

    def step(self, state: State, index: int, excluded: Mapping[int, int]) -> State | None:
        """The state after adding one item of class `index`, or None if the ledger refuses."""
        cls = self.classes[index]
        mem, new, count, ceiling, disk, mask = state
        mem += cls.memory_mb
        if mem > self.footprint:
            return None
        if not self.same_new:
            new += cls.new_mb
            if new > self.room.new_mb:
                return None
        if self.count:
            count += 1
            if cls.ceiling:
                ceiling = min(ceiling, cls.ceiling)
            if count > self.slots or count > ceiling:
                return None
        if self.disk:
            disk += cls.disk_mb
            assert self.room.disk_mb is not None
            if disk > self.room.disk_mb:
                return None
        if cls.exclusive:
            if mask & excluded.get(index, 0):
                return None
            mask |= 1 << index
        return (mem, new, count, ceiling, disk, mask)


def _copies(cls: ItemClass) -> int:
    return 1 if cls.single_use else len(cls.models)


def build_graph(
    problem: PlacementProblem,
    htype: HostType,
    classes: list[ItemClass],
    *,
    min_used_mb: int = 0,
    max_arcs: int = MAX_ARCS,
) -> Graph | None:
    """The configuration graph (module docstring) or None when it exceeds `max_arcs`; loss
    arcs only from nodes with at least `min_used_mb` memory used (`pack_type`'s slack)."""
    room = TypeRoom.of(problem.host_by_id[htype.host_ids[0]])
    dims = _Dimensions(classes, room)
    index_of = {m: i for i, c in enumerate(classes) for m in c.models}
    excluded: dict[int, int] = {}
    for i, cls in enumerate(classes):
        if cls.exclusive:
            for partner in problem.exclusion_partners.get(cls.models[0], frozenset()):
                j = index_of.get(partner)
                if j is not None:
                    excluded[i] = excluded.get(i, 0) | (1 << j)
    # Node keys: (state, next class allowed) in the single-use part; (state, -1) in the
    # multi-use part, whose allowed classes start at the smallest index of an arc into it.
    start = (dims.start(), 0)
    ids: dict[tuple[State, int], int] = {start: 0}
    lowest: dict[int, int] = {0: 0}  # node -> first class index it may add
    heap: list[tuple[State, int, int]] = [(start[0], 0, 0)]
    arcs: list[tuple[int, int, int]] = []
    states: list[State] = [start[0]]
    while heap:
        state, _next, node = heapq.heappop(heap)
        for index in range(lowest[node], len(classes)):
            after = dims.step(state, index, excluded)
            if after is None:
                continue
            single = classes[index].single_use
            key = (after, index + 1) if single else (after, -1)
            head = ids.get(key)
            if head is None:
                head = ids[key] = len(states)
                states.append(after)
                lowest[head] = index + 1 if single else index
                heapq.heappush(heap, (after, key[1], head))
            elif not single:
                lowest[head] = min(lowest[head], index)
            arcs.append((node, head, index))
            if len(arcs) > max_arcs:
                return None
    sink = len(states)
    useful = _reaching(arcs, {n for n, s in enumerate(states) if s[0] >= min_used_mb})
    kept = [(u, v, c) for u, v, c in arcs if u in useful and v in useful]
    # A node that adds nothing more is the sink itself: its arcs end there (a separate full
    # node with only a loss arc made the exact cover of t249 instances 10x slower).
    extends = {u for u, _v, _c in kept}
    kept = [(u, v if v in extends else sink, c) for u, v, c in kept]
    kept += [(n, sink, -1) for n in sorted(extends) if states[n][0] >= min_used_mb]
    if min_used_mb <= 0 and 0 not in extends:
        kept.append((0, sink, -1))
    pairs = frozenset(
        (i, j) for i, mask in excluded.items() for j in range(len(classes)) if mask >> j & 1
    )
    return Graph(classes, kept, sink + 1, pairs)


def _reaching(arcs: Sequence[tuple[int, int, int]], terminals: set[int]) -> set[int]:
    """The nodes from which some terminal node is reachable (terminals included)."""
    into: dict[int, list[int]] = {}
    for u, v, _c in arcs:
        into.setdefault(v, []).append(u)
    seen = set(terminals)
    stack = list(terminals)
    while stack:
        v = stack.pop()
        for u in into.get(v, ()):
            if u not in seen:
                seen.add(u)
                stack.append(u)
    return seen


@dataclass
class TypeFlow:
    """The arc-flow variables of one type in a CP-SAT model, and their class sums."""

    graph: Graph
    flows: list[cp_model.IntVar]
    by_class: list[list[cp_model.IntVar]]


def add_type_flow(
    model: cp_model.CpModel, graph: Graph, count: int, most: Sequence[int]
) -> TypeFlow:
    """Flow variables, conservation and the host count on one type's graph (module docstring);
    `most[c]`: the most replicas class c can take on the type (an arc's flow is at most that).
    The caller links `by_class[c]`'s sum to its class's replicas."""
    flows = [
        model.new_int_var(0, count if c < 0 else min(count, most[c]), "")
        for _u, _v, c in graph.arcs
    ]
    out: list[list[cp_model.IntVar]] = [[] for _ in range(graph.nodes)]
    into: list[list[cp_model.IntVar]] = [[] for _ in range(graph.nodes)]
    by_class: list[list[cp_model.IntVar]] = [[] for _ in graph.classes]
    for (u, v, c), var in zip(graph.arcs, flows, strict=True):
        out[u].append(var)
        into[v].append(var)
        if c >= 0:
            by_class[c].append(var)
    model.add(cp_model.LinearExpr.sum(out[0]) <= count)
    for node in range(1, graph.nodes - 1):
        if out[node] or into[node]:
            model.add(cp_model.LinearExpr.sum(into[node]) == cp_model.LinearExpr.sum(out[node]))
    return TypeFlow(graph, flows, by_class)


def decompose(graph: Graph, values: Sequence[int]) -> list[list[int]]:
    """Source-sink paths of an integral flow, each the class indices of one host (empty
    paths left out)."""
    left = list(values)
    out_arcs: dict[int, list[int]] = {}
    for a, (u, _v, _c) in enumerate(graph.arcs):
        out_arcs.setdefault(u, []).append(a)
    sink = graph.nodes - 1
    paths: list[list[int]] = []
    while True:
        node, path = 0, []
        while node != sink:
            arc = next((a for a in out_arcs.get(node, ()) if left[a] > 0), None)
            if arc is None:
                break
            left[arc] -= 1
            _u, node, cls = graph.arcs[arc]
            if cls >= 0:
                path.append(cls)
        if node != sink:
            break
        if path:
            paths.append(path)
    return paths


def deal(
    htype: HostType, graph: Graph, paths: Sequence[Sequence[int]], counts: Mapping[str, int]
) -> set[Key] | None:
    """Hosts of the type (by ID) for the paths, each class's models dealt to its items: a
    model's replicas on distinct hosts. None when the paths ask for more than the counts."""
    if len(paths) > htype.count:
        return None
    queues: list[list[str]] = []
    for cls in graph.classes:
        queue = [m for m in cls.models for _ in range(counts.get(m, 0))]
        queues.append(queue[::-1])
    placed: set[Key] = set()
    for host_id, path in zip(htype.host_ids, paths, strict=False):
        for index in path:
            if not queues[index]:
                return None
            placed.add((queues[index].pop(), host_id))
    return placed


@dataclass
class PackResult:
    placed: set[Key]  # on the type's hosts
    complete: bool  # every counted replica is placed
    infeasible: bool  # proven: the counts do not pack on the type
    status: str  # PACKED, SHORT, INFEASIBLE, UNKNOWN, TOO_LARGE


def pack_type(
    problem: PlacementProblem,
    htype: HostType,
    counts: Mapping[str, int],
    *,
    time_limit_s: float,
    hint: Iterable[Key] = (),
    deterministic: bool = True,
) -> PackResult:
    """Pack `counts[m]` replicas of each model onto the type's hosts, exactly (module
    docstring: the slack-reduced graph); `hint`: a placement on the type to start from."""
    wanted = {m: n for m, n in counts.items() if n > 0}
    if not wanted:
        return PackResult(set(), True, False, "PACKED")
    multi = {m: n > 1 for m, n in wanted.items()}
    classes = item_classes(problem, htype, wanted, multi)
    room = TypeRoom.of(problem.host_by_id[htype.host_ids[0]])
    footprint = (
        min(room.footprint_mb, room.new_mb)
        if all(c.new_mb == c.memory_mb for c in classes)
        else room.footprint_mb
    )
    first = htype.host_ids[0]
    used = sum(problem.candidates[(m, first)].memory_mb * n for m, n in wanted.items())
    slack = htype.count * footprint - used
    if slack < 0:
        return PackResult(set(), False, True, "INFEASIBLE")
    graph = build_graph(problem, htype, classes, min_used_mb=footprint - slack)
    if graph is None:
        return PackResult(set(), False, False, "TOO_LARGE")
    model = cp_model.CpModel()
    demand = [sum(wanted.get(m, 0) for m in cls.models) for cls in classes]
    flow = add_type_flow(model, graph, htype.count, demand)
    exact = slack == 0
    for vars_, need in zip(flow.by_class, demand, strict=True):
        if not vars_:
            if exact and need:
                return PackResult(set(), False, True, "INFEASIBLE")
            continue
        if exact:
            model.add(cp_model.LinearExpr.sum(vars_) == need)
        else:
            model.add(cp_model.LinearExpr.sum(vars_) <= need)
    if not exact:
        model.maximize(cp_model.LinearExpr.sum([v for vs in flow.by_class for v in vs]))
    _hint_flow(model, graph, flow, htype, hint)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, time_limit_s)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = SEED
    solver.parameters.linearization_level = 2
    if deterministic:
        solver.parameters.max_deterministic_time = max(0.01, time_limit_s)
    status = solver.solve(model)
    if status == cp_model.INFEASIBLE:
        return PackResult(set(), False, True, "INFEASIBLE")
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return PackResult(set(), False, False, "UNKNOWN")
    paths = decompose(graph, [solver.value(v) for v in flow.flows])
    placed = deal(htype, graph, paths, wanted) or set()
    complete = len(placed) == sum(wanted.values())
    infeasible = not complete and status == cp_model.OPTIMAL
    return PackResult(placed, complete, infeasible, "PACKED" if complete else "SHORT")


def _hint_flow(
    model: cp_model.CpModel, graph: Graph, flow: TypeFlow, htype: HostType, hint: Iterable[Key]
) -> None:
    """Hint the flows of a concrete placement's hosts whose content is a path of the graph."""
    index_of = {m: i for i, c in enumerate(graph.classes) for m in c.models}
    contents: dict[str, list[int]] = {}
    on_type = set(htype.host_ids)
    for model_id, host_id in hint:
        if host_id in on_type and model_id in index_of:
            contents.setdefault(host_id, []).append(index_of[model_id])
    arc_of: dict[tuple[int, int], int] = {}
    for a, (u, _v, c) in enumerate(graph.arcs):
        arc_of.setdefault((u, c), a)
    values = [0] * len(graph.arcs)
    for path in contents.values():
        node, arcs = 0, []
        for index in sorted(path):
            found = arc_of.get((node, index))
            if found is None:
                break
            arcs.append(found)
            node = graph.arcs[found][1]
        else:
            loss = arc_of.get((node, -1))
            if loss is None and node != graph.nodes - 1:
                continue
            for a in [*arcs, *([loss] if loss is not None else [])]:
                values[a] += 1
    if any(values):
        for var, value in zip(flow.flows, values, strict=True):
            model.add_hint(var, value)
