"""The greedy schedule: the CP-SAT model's hint, its fallback, and the bench's baseline.

Minute by minute, with perfect foresight over a short window (several window lengths are tried
and the best schedule kept): while some model's next replica
would serve more over the window (from t + load on) than it costs, load it where it fits best
(fastest host first), unloading, if room is needed, the resident replicas that serve least over
the window and may already be unloaded (hold satisfied). Nothing is unloaded except to make
room, so the schedule mutates little. Deterministic: ties break on indices. A replica's value is
its marginal service: per model on the contract's own traces; with demand classes or host
speeds, the change in what the minute's flow serves (flow.py), assuming today's replicas stay.
"""

from __future__ import annotations

from grid.lab.oracle.flow import flow_total, minute_flow
from grid.lab.oracle.replay import Action, replay, schedule_from_residency
from grid.lab.oracle.trace import Problem

WINDOWS = (3, 4, 5, 6, 8, 10, 15, 20, 30)  # foresights tried (minutes); the best one wins


class _State:
    def __init__(self, problem: Problem) -> None:
        self.p = problem
        first = -(problem.load + problem.hold)
        self.present: list[dict[int, int]] = [{} for _ in problem.host_ids]
        for m, h in problem.initial:
            self.present[h][m] = first
        self.count = [0] * len(problem.model_ids)
        for m, _h in problem.initial:
            self.count[m] += 1
        # the contract's own problems keep the per-model marginal values; others route (flow.py)
        self.classic = problem.classic
        self.cache: dict[tuple[int, tuple[int, ...]], int] = {}
        self.version = 0  # bumped whenever `present` changes (invalidates `caps`)
        self.caps: dict[int, tuple[int, list[int]]] = {}

    def used(self, h: int) -> int:
        return sum(self.p.memory[m] for m in self.present[h])

    def drop_down(self, t: int) -> None:
        for h, row in enumerate(self.p.up):
            if not row[t] and self.present[h]:
                for m in self.present[h]:
                    self.count[m] -= 1
                self.present[h].clear()
                self.version += 1

    def capacity(self, u: int) -> list[int]:
        """Each model's capacity at minute u if today's replicas stay (a copy)."""
        known = self.caps.get(u)
        if known is None or known[0] != self.version:
            out = [0] * len(self.p.model_ids)
            for h, resident in enumerate(self.present):
                for m in resident:
                    out[m] += self.p.cap(m, h, u)
            known = self.caps[u] = (self.version, out)
        return list(known[1])

    def served(self, u: int, capacity: list[int]) -> int:
        key = (u, tuple(capacity))
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = flow_total(minute_flow(self.p, u, capacity))
        return found

    def add_value(self, m: int, h: int | None, start: int, end: int) -> int:
        """What one more replica of m (on h; None: its best capacity) serves over [start, end)."""
        if self.classic:
            return self.value(m, self.count[m] + 1, start, end)
        total = 0
        for u in range(start, min(end, self.p.minutes)):
            cap = self.capacity(u)
            before = self.served(u, cap)
            cap[m] += self.p.conc[m] if h is None else self.p.cap(m, h, u)
            total += self.served(u, cap) - before
        return total

    def drop_value(self, m: int, h: int, start: int, end: int) -> int:
        """What the replica of m on h serves over [start, end) that the others would not."""
        if self.classic:
            return self.value(m, self.count[m], start, end)
        total = 0
        for u in range(start, min(end, self.p.minutes)):
            cap = self.capacity(u)
            before = self.served(u, cap)
            cap[m] -= self.p.cap(m, h, u)
            total += before - self.served(u, cap)
        return total

    def value(self, m: int, k: int, start: int, end: int) -> int:
        """What the k-th replica of m serves over [start, end) (its marginal value)."""
        c, d = self.p.conc[m], self.p.demand[m]
        lo = c * (k - 1)
        return sum(min(c, max(0, d[u] - lo)) for u in range(start, min(end, self.p.minutes)))

    def survives(self, h: int, start: int, end: int) -> bool:
        row = self.p.up[h]
        return all(row[u] for u in range(start, min(end, self.p.minutes)))

    def removable(self, h: int, t: int) -> list[int]:
        need = self.p.load + self.p.hold
        return [m for m, s in self.present[h].items() if t - s >= need]


def _fits(p: Problem, used: int, count: int, h: int, m: int) -> bool:
    slots_ok = not p.slots[h] or count + 1 <= p.slots[h]
    return slots_ok and used + p.memory[m] <= p.capacity[h]


def _best_move(st: _State, t: int, m: int, gain: int, window: int) -> tuple[int, list[int]] | None:
    """(host, evictions) of the cheapest way to place m's next replica at t, if it pays."""
    p = st.p
    best: tuple[int, int, int, int, int, list[int]] | None = None
    for h in range(len(p.host_ids)):
        if not p.eligible[m][h] or m in st.present[h] or not st.survives(h, t, t + p.load + 1):
            continue
        used, n = st.used(h), len(st.present[h])
        evict: list[int] = []
        cost = 0
        if not _fits(p, used, n, h, m):
            losses = {v: st.drop_value(v, h, t, t + window) for v in st.removable(h, t)}
            for v in sorted(losses, key=lambda v: (losses[v], v)):
                evict.append(v)
                cost += losses[v]
                used -= p.memory[v]
                n -= 1
                if _fits(p, used, n, h, m):
                    break
            if not _fits(p, used, n, h, m) or cost >= gain:
                continue
        option = (cost, len(evict), -p.cap(m, h, t), p.capacity[h] - used - p.memory[m], h, evict)
        if best is None or option[:5] < best[:5]:
            best = option
    return None if best is None else (best[4], best[5])


def greedy_residency(
    problem: Problem, window: int, cache: dict[tuple[int, tuple[int, ...]], int] | None = None
) -> list[list[set[int]]]:
    """rows[t][h]: the models held on host h during minute t, judging moves over `window`.

    Gains are evaluated lazily: a gain computed before the last move is an upper bound (a
    replica's marginal service only shrinks as capacity grows), so only the leader is
    recomputed until a fresh gain leads; the choice is the same as recomputing every gain."""
    st = _State(problem)
    if cache is not None:
        st.cache = cache
    rows: list[list[set[int]]] = []
    models = range(len(problem.model_ids))
    for t in range(problem.minutes):
        st.drop_down(t)
        tried: set[int] = set()
        start = t + problem.load
        known: dict[int, tuple[int, int]] = {}  # model -> (gain, version it was computed at)
        for _step in range(len(problem.model_ids) * len(problem.host_ids) + 1):
            m = -1
            while True:
                left = [x for x in models if x not in tried]
                if not left:
                    break
                for x in left:
                    if x not in known:
                        known[x] = (st.add_value(x, None, start, start + window), st.version)
                m = max(left, key=lambda x: (known[x][0], -x))
                if known[m][1] == st.version:
                    break
                known[m] = (st.add_value(m, None, start, start + window), st.version)
            if m < 0 or known[m][0] <= 0:
                break
            gain = known[m][0]
            move = _best_move(st, t, m, gain, window)
            if move is None:
                tried.add(m)
                continue
            h, evict = move
            for v in evict:
                del st.present[h][v]
                st.count[v] -= 1
            st.present[h][m] = t
            st.count[m] += 1
            st.version += 1
        rows.append([set(r) for r in st.present])
    return rows


def best_greedy(problem: Problem) -> list[list[set[int]]]:
    """The greedy residency over every foresight in WINDOWS with the most served, then the
    fewest mutations (measured: no single foresight is best on every trace)."""
    best: tuple[tuple[int, int, int], list[list[set[int]]]] | None = None
    cache: dict[tuple[int, tuple[int, ...]], int] = {}  # (minute, capacities) -> served
    for window in WINDOWS:
        rows = greedy_residency(problem, window, cache)
        result = replay(problem, schedule_from_residency(problem, rows))
        key = (result.total, -result.mutations, -window)
        if best is None or key > best[0]:
            best = (key, rows)
    assert best is not None
    return best[1]


def greedy_schedule(problem: Problem) -> list[Action]:
    return schedule_from_residency(problem, best_greedy(problem))
