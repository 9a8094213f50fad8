"""The greedy schedule: the CP-SAT model's hint, its fallback, and the bench's baseline.

Minute by minute, with perfect foresight over a short window (several window lengths are tried
and the best schedule kept): while some model's next replica
would serve more over the window (from t + load on) than it costs, load it where it fits best,
unloading, if room is needed, the resident replicas that serve least over the window and may
already be unloaded (hold satisfied). Nothing is unloaded except to make room, so the schedule
mutates little. Deterministic: ties break on indices.
"""

from __future__ import annotations

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

    def used(self, h: int) -> int:
        return sum(self.p.memory[m] for m in self.present[h])

    def drop_down(self, t: int) -> None:
        for h, row in enumerate(self.p.up):
            if not row[t]:
                for m in self.present[h]:
                    self.count[m] -= 1
                self.present[h].clear()

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
    best: tuple[int, int, int, int, list[int]] | None = None
    for h in range(len(p.host_ids)):
        if not p.eligible[m][h] or m in st.present[h] or not st.survives(h, t, t + p.load + 1):
            continue
        used, n = st.used(h), len(st.present[h])
        evict: list[int] = []
        cost = 0
        if not _fits(p, used, n, h, m):
            losses = {v: st.value(v, st.count[v], t, t + window) for v in st.removable(h, t)}
            for v in sorted(losses, key=lambda v: (losses[v], v)):
                evict.append(v)
                cost += losses[v]
                used -= p.memory[v]
                n -= 1
                if _fits(p, used, n, h, m):
                    break
            if not _fits(p, used, n, h, m) or cost >= gain:
                continue
        option = (cost, len(evict), p.capacity[h] - used - p.memory[m], h, evict)
        if best is None or option[:4] < best[:4]:
            best = option
    return None if best is None else (best[3], best[4])


def greedy_residency(problem: Problem, window: int) -> list[list[set[int]]]:
    """rows[t][h]: the models held on host h during minute t, judging moves over `window`."""
    st = _State(problem)
    rows: list[list[set[int]]] = []
    for t in range(problem.minutes):
        st.drop_down(t)
        tried: set[int] = set()
        for _step in range(len(problem.model_ids) * len(problem.host_ids) + 1):
            start = t + problem.load
            gains = [
                (st.value(m, st.count[m] + 1, start, start + window), m)
                for m in range(len(problem.model_ids))
                if m not in tried
            ]
            gains = [g for g in gains if g[0] > 0]
            if not gains:
                break
            gain, m = max(gains, key=lambda g: (g[0], -g[1]))
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
        rows.append([set(r) for r in st.present])
    return rows


def best_greedy(problem: Problem) -> list[list[set[int]]]:
    """The greedy residency over every foresight in WINDOWS with the most served, then the
    fewest mutations (measured: no single foresight is best on every trace)."""
    best: tuple[tuple[int, int, int], list[list[set[int]]]] | None = None
    for window in WINDOWS:
        rows = greedy_residency(problem, window)
        result = replay(problem, schedule_from_residency(problem, rows))
        key = (result.total, -result.mutations, -window)
        if best is None or key > best[0]:
            best = (key, rows)
    assert best is not None
    return best[1]


def greedy_schedule(problem: Problem) -> list[Action]:
    return schedule_from_residency(problem, best_greedy(problem))
