"""Model checking mined invariants over a partition graph.

Mirrors Synoptic's ``FsmModelChecker`` and the tracing state sets in
``synoptic/invariants/fsmcheck/`` (``AFbyTracingSet``, ``NFbyTracingSet``, ``APTracingSet``):
each invariant is a small automaton run over the graph from INITIAL; a path that reaches
TERMINAL in the automaton's failure state is a counter-example. As in Synoptic the shortest such
path is returned, then shortened the way ``NeverFollowedInvariant.shorten`` /
``AlwaysPrecedesInvariant.shorten`` do (AlwaysFollowedBy paths are kept whole).

For the yes/no question "does the graph satisfy these invariants" (asked after every tentative
split and merge) we do not run one automaton per invariant: because every partition lies on some
INITIAL→TERMINAL path, the three kinds reduce to reachability questions, answered for all
invariants of a kind with one search per label:

- ``a NeverFollowedBy b`` fails iff an ``a`` node reaches a ``b`` node by a non-empty path;
- ``a AlwaysPrecedes b`` fails iff a ``b`` node is reachable from INITIAL avoiding ``a`` nodes;
- ``a AlwaysFollowedBy b`` fails iff an ``a`` node reaches TERMINAL avoiding ``b`` nodes.

After a merge only paths through the merged node are new (see :meth:`Checker.nfby_through`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

from quicsm.model.synoptic.mining import AFBY, AP, NFBY, Invariant
from quicsm.model.synoptic.partitions import INITIAL_ID, TERMINAL_ID, PartitionGraph

Adjacency = list[list[int]]


def reverse(adj: Adjacency) -> Adjacency:
    radj: Adjacency = [[] for _ in adj]
    for u, vs in enumerate(adj):
        for v in vs:
            radj[v].append(u)
    return radj


def _reach(adj: Adjacency, sources: Iterable[int], blocked: Sequence[bool] | None) -> list[bool]:
    """Nodes reachable from ``sources`` by non-empty paths whose nodes after the source are
    not ``blocked``."""
    seen = [False] * len(adj)
    queue = deque(sources)
    while queue:
        u = queue.popleft()
        for v in adj[u]:
            if not seen[v] and (blocked is None or not blocked[v]):
                seen[v] = True
                queue.append(v)
    return seen


class Checker:
    """Reachability-based satisfaction checks for a fixed invariant set."""

    def __init__(self, invariants: Sequence[Invariant], n_labels: int) -> None:
        self.invariants = list(invariants)
        self.n_labels = n_labels
        self.nfby: dict[int, set[int]] = {}
        self.ap: dict[int, set[int]] = {}
        self.afby: dict[int, set[int]] = {}  # keyed by b: the a's
        for inv in self.invariants:
            if inv.kind == NFBY:
                self.nfby.setdefault(inv.a, set()).add(inv.b)
            elif inv.kind == AP:
                self.ap.setdefault(inv.a, set()).add(inv.b)
            else:
                self.afby.setdefault(inv.b, set()).add(inv.a)
        # the group that failed last is checked first (failed merges tend to repeat)
        self._last_fail: tuple[int, int] | None = None

    # each group: (kind, key label); returns True when some invariant of the group fails
    def _group_fails(
        self, g: PartitionGraph, adj: Adjacency, radj: Adjacency, kind: int, key: int
    ) -> bool:
        plabel = g.plabel
        alive = g.alive
        n = len(plabel)
        if kind == NFBY:
            srcs = [u for u in range(n) if alive[u] and plabel[u] == key]
            seen = _reach(adj, srcs, None)
            bad = self.nfby[key]
            return any(seen[v] and plabel[v] in bad for v in range(n))
        if kind == AP:
            blocked = [plabel[u] == key for u in range(n)]
            seen = _reach(adj, [INITIAL_ID], blocked)
            bad = self.ap[key]
            return any(seen[v] and plabel[v] in bad for v in range(n))
        # AFBY keyed by b: nodes that reach TERMINAL avoiding b nodes
        blocked = [plabel[u] == key for u in range(n)]
        ok = [False] * n
        ok[TERMINAL_ID] = True
        queue = deque([TERMINAL_ID])
        while queue:
            v = queue.popleft()
            for u in radj[v]:
                if not ok[u] and not blocked[u]:
                    ok[u] = True
                    queue.append(u)
        firsts = self.afby[key]
        for u in range(n):
            if alive[u] and plabel[u] in firsts and any(ok[v] for v in adj[u]):
                return True
        return False

    def groups(self) -> list[tuple[int, int]]:
        out = [(NFBY, k) for k in sorted(self.nfby)]
        out += [(AP, k) for k in sorted(self.ap)]
        out += [(AFBY, k) for k in sorted(self.afby)]
        return out

    def satisfied(self, g: PartitionGraph, *, skip_nfby: bool = False) -> bool:
        adj = g.adjacency()
        radj = reverse(adj)
        groups = self.groups()
        if self._last_fail in groups:
            groups.remove(self._last_fail)
            groups.insert(0, self._last_fail)
        for kind, key in groups:
            if skip_nfby and kind == NFBY:
                continue
            if self._group_fails(g, adj, radj, kind, key):
                self._last_fail = (kind, key)
                return False
        return True

    def nfby_through(self, g: PartitionGraph, m: int) -> bool:
        """Whether some NeverFollowedBy invariant fails on a path through node ``m``."""
        if not self.nfby:
            return False
        adj = g.adjacency()
        radj = reverse(adj)
        plabel = g.plabel
        n = len(plabel)
        anc1 = _reach(radj, [m], None)  # reach m by a non-empty path
        desc1 = _reach(adj, [m], None)  # reachable from m by a non-empty path
        before = {plabel[u] for u in range(n) if anc1[u]}
        after0 = {plabel[v] for v in range(n) if desc1[v]} | {plabel[m]}
        after1 = {plabel[v] for v in range(n) if desc1[v]}
        for a, bs in self.nfby.items():
            if a in before and bs & after0:
                return True
            if a == plabel[m] and bs & after1:
                return True
        return False

    def violates(self, g: PartitionGraph, inv: Invariant) -> bool:
        """Whether ``inv`` fails on ``g`` (one reachability search)."""
        return violates(g.adjacency(), g.plabel, inv)


def violates(adj: Adjacency, plabel: Sequence[int], inv: Invariant) -> bool:
    """Whether ``inv`` fails on the graph ``adj`` with node labels ``plabel``."""
    n = len(adj)
    if inv.kind == NFBY:
        seen = _reach(adj, [u for u in range(n) if plabel[u] == inv.a], None)
        return any(seen[v] and plabel[v] == inv.b for v in range(n))
    blocked_label = inv.a if inv.kind == AP else inv.b
    blocked = [plabel[u] == blocked_label for u in range(n)]
    if inv.kind == AP:
        seen = _reach(adj, [INITIAL_ID], blocked)
        return any(seen[v] and plabel[v] == inv.b for v in range(n))
    ok = _reach(reverse(adj), [TERMINAL_ID], blocked)
    ok[TERMINAL_ID] = True
    return any(plabel[u] == inv.a and any(ok[v] for v in adj[u]) for u in range(n))


def counterexample(g: PartitionGraph, inv: Invariant, adj: Adjacency) -> list[int] | None:
    """Shortest path INITIAL→TERMINAL on which ``inv``'s automaton ends in its failure state,
    shortened like Synoptic's ``shorten``; ``None`` when ``inv`` holds."""
    plabel = g.plabel

    def step(s: int, lab: int) -> int:
        if inv.kind == AFBY:  # 0: no pending a, 1: an a not yet followed by b (fails)
            if lab == inv.a:
                return 1
            if lab == inv.b:
                return 0
            return s
        if inv.kind == NFBY:  # 0: no a yet, 1: a seen, 2: b after a (fails)
            if lab == inv.b and s == 1:
                s = 2
            if lab == inv.a and s == 0:
                s = 1
            return s
        # AP: 0: neither yet, 1: a first (holds), 2: b first (fails)
        if s == 0:
            if lab == inv.a:
                return 1
            if lab == inv.b:
                return 2
        return s

    fail = 1 if inv.kind == AFBY else 2
    start = (INITIAL_ID, step(0, plabel[INITIAL_ID]))
    parent: dict[tuple[int, int], tuple[int, int] | None] = {start: None}
    queue = deque([start])
    goal: tuple[int, int] | None = None
    while queue:
        u, s = queue.popleft()
        if u == TERMINAL_ID:
            if s == fail:
                goal = (u, s)
                break
            continue
        for v in adj[u]:
            nxt = (v, step(s, plabel[v]))
            if nxt not in parent:
                parent[nxt] = (u, s)
                queue.append(nxt)
    if goal is None:
        return None
    path: list[int] = []
    node: tuple[int, int] | None = goal
    while node is not None:
        path.append(node[0])
        node = parent[node]
    path.reverse()
    return _shorten(path, inv, plabel)


def _shorten(path: list[int], inv: Invariant, plabel: Sequence[int]) -> list[int]:
    if inv.kind == AFBY:
        return path
    if inv.kind == NFBY:
        seen_a = False
        for i, p in enumerate(path):
            lab = plabel[p]
            if lab == inv.a and not seen_a:
                seen_a = True
            elif lab == inv.b and seen_a:
                return path[: i + 1]
        return path
    for i, p in enumerate(path):
        lab = plabel[p]
        if lab == inv.a:
            break
        if lab == inv.b:
            return path[: i + 1]
    return path
