"""What one minute serves: demand classes routed to ready capacity (pure, exact integers).

A minute's ready replicas give each model a capacity K[m] (the sum of its ready replicas'
`Problem.cap`). Class c's demand D[c] may be served by any model of `class_models[c]`; a model's
capacity is shared by every class it serves. What the minute serves is the maximum flow of this
transportation problem (source → class: D[c]; class → model: unbounded; model → sink: K[m]);
for a solo class (one model, serving no other class) it is min(D, K), the contract's
served(m, t). The flow itself prefers each class's models in their listed order (a greedy fill
in class order, then augmenting paths), so ties go to the preferred model; its value is the
maximum either way.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from grid.lab.oracle.trace import Problem

Flow = dict[tuple[int, int], int]  # (class, model) -> scaled units served, positive entries only


def max_flow(
    demand: Sequence[int],
    members: Sequence[Sequence[int]],
    cap: Sequence[int],
    users: dict[int, list[int]] | None = None,
) -> Flow:
    """The maximum flow (preferred models first) of classes `demand` onto model capacities;
    `users[m]`: the classes that may use model m (derived from `members` when not given)."""
    left = list(cap)
    unmet = list(demand)
    flow: Flow = {}
    for c in range(len(demand)):
        for m in members[c]:
            if unmet[c] <= 0:
                break
            x = min(unmet[c], left[m])
            if x > 0:
                flow[c, m] = flow.get((c, m), 0) + x
                left[m] -= x
                unmet[c] -= x
    if users is None:
        users = {}
        for c, ms in enumerate(members):
            for m in ms:
                users.setdefault(m, []).append(c)
    for c0 in range(len(demand)):
        while unmet[c0] > 0 and _augment(c0, members, users, left, unmet, flow):
            pass
    return flow


def _augment(
    c0: int,
    members: Sequence[Sequence[int]],
    users: dict[int, list[int]],
    left: list[int],
    unmet: list[int],
    flow: Flow,
) -> bool:
    """One augmenting path from class c0 to a model with spare capacity (BFS); False if none."""
    came: dict[int, int] = {}  # model -> the class it was reached from
    seen_class = {c0}
    via_class: dict[int, int] = {}  # class -> model whose reverse edge reached it
    queue = deque([c0])
    end = -1
    while queue and end < 0:
        c = queue.popleft()
        for m in members[c]:
            if m in came:
                continue
            came[m] = c
            if left[m] > 0:
                end = m
                break
            for c2 in users.get(m, ()):
                if c2 not in seen_class and flow.get((c2, m), 0) > 0:
                    seen_class.add(c2)
                    via_class[c2] = m
                    queue.append(c2)
    if end < 0:
        return False
    path: list[tuple[int, int, int]] = []  # (class, model, +1 forward / -1 reverse)
    m = end
    while True:
        c = came[m]
        path.append((c, m, +1))
        if c == c0:
            break
        m_prev = via_class[c]
        path.append((c, m_prev, -1))
        m = m_prev
    push = min(unmet[c0], left[end])
    for c, mm, sign in path:
        if sign < 0:
            push = min(push, flow[c, mm])
    for c, mm, sign in path:
        value = flow.get((c, mm), 0) + sign * push
        if value:
            flow[c, mm] = value
        else:
            flow.pop((c, mm), None)
    left[end] -= push
    unmet[c0] -= push
    return True


def minute_flow(problem: Problem, t: int, capacity: Sequence[int]) -> Flow:
    """The flow of minute t given each model's ready capacity."""
    demand = [series[t] for series in problem.demand]
    if all(problem.solo):
        out: Flow = {}
        for c, members in enumerate(problem.class_models):
            if not members:
                continue
            m = members[0]
            x = min(demand[c], capacity[m])
            if x > 0:
                out[c, m] = x
        return out
    users = {m: list(cs) for m, cs in enumerate(problem.model_classes)}
    return max_flow(demand, problem.class_models, capacity, users)


def flow_total(flow: Flow) -> int:
    return sum(flow.values())
