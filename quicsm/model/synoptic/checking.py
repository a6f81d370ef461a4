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
from collections.abc import Callable, Container, Iterable, Sequence

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
    def _group_fails(self, g: PartitionGraph, adj: Adjacency, kind: int, key: int) -> bool:
        plabel = g.plabel
        nodes = g.nodes_with_label
        if kind == NFBY:
            bad = self.nfby[key]
            return _reach_label(adj, plabel, nodes(key), None, bad)
        if kind == AP:
            return _reach_label(adj, plabel, [INITIAL_ID], set(nodes(key)), self.ap[key])
        # AFBY keyed by b: an a node reaches TERMINAL avoiding b nodes
        sources = [u for a in sorted(self.afby[key]) for u in nodes(a)]
        return _reach_node(adj, sources, set(nodes(key)), TERMINAL_ID)

    def groups(self) -> list[tuple[int, int]]:
        out = [(NFBY, k) for k in sorted(self.nfby)]
        out += [(AP, k) for k in sorted(self.ap)]
        out += [(AFBY, k) for k in sorted(self.afby)]
        return out

    def satisfied(self, g: PartitionGraph, *, skip_nfby: bool = False) -> bool:
        adj = g.adjacency()
        groups = self.groups()
        if self._last_fail in groups:
            groups.remove(self._last_fail)
            groups.insert(0, self._last_fail)
        for kind, key in groups:
            if skip_nfby and kind == NFBY:
                continue
            if self._group_fails(g, adj, kind, key):
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
        return violates(g.adjacency(), g.plabel, inv, g.nodes_with_label)


def _reach_label(
    adj: Adjacency,
    plabel: Sequence[int],
    sources: Iterable[int],
    blocked: Container[int] | None,
    targets: Container[int],
) -> bool:
    """Whether a node with a label in ``targets`` is reachable from ``sources`` by a non-empty
    path whose nodes after the source are not ``blocked`` (stops at the first one found)."""
    seen = [False] * len(adj)
    queue = list(sources)
    i = 0
    while i < len(queue):
        for v in adj[queue[i]]:
            if not seen[v] and (blocked is None or v not in blocked):
                if plabel[v] in targets:
                    return True
                seen[v] = True
                queue.append(v)
        i += 1
    return False


def _reach_node(
    adj: Adjacency, sources: Iterable[int], blocked: Container[int], target: int
) -> bool:
    """Whether ``target`` is reachable from ``sources`` by a non-empty path whose nodes after
    the source are not ``blocked``."""
    seen = [False] * len(adj)
    queue = list(sources)
    i = 0
    while i < len(queue):
        for v in adj[queue[i]]:
            if not seen[v] and v not in blocked:
                if v == target:
                    return True
                seen[v] = True
                queue.append(v)
        i += 1
    return False


def violates(
    adj: Adjacency,
    plabel: Sequence[int],
    inv: Invariant,
    nodes_with: Callable[[int], Sequence[int]] | None = None,
) -> bool:
    """Whether ``inv`` fails on the graph ``adj`` with node labels ``plabel``;
    ``nodes_with(label)`` lists the nodes with a label (default: a scan of ``plabel``).

    - ``a NeverFollowedBy b`` fails iff an ``a`` node reaches a ``b`` node;
    - ``a AlwaysPrecedes b`` fails iff a ``b`` node is reachable from INITIAL avoiding ``a``
      nodes;
    - ``a AlwaysFollowedBy b`` fails iff an ``a`` node reaches TERMINAL avoiding ``b`` nodes.
    """
    if nodes_with is None:
        n = len(adj)

        def nodes_with(label: int) -> list[int]:
            return [u for u in range(n) if plabel[u] == label]

    if inv.kind == NFBY:
        return _reach_label(adj, plabel, nodes_with(inv.a), None, (inv.b,))
    if inv.kind == AP:
        return _reach_label(adj, plabel, [INITIAL_ID], set(nodes_with(inv.a)), (inv.b,))
    return _reach_node(adj, nodes_with(inv.a), set(nodes_with(inv.b)), TERMINAL_ID)


# Tracing automata, as a table indexed by ``state * 4 + cls`` where ``cls`` is 1 when a
# node's label is ``a``, 2 when it is ``b``, 3 when both (``a NeverFollowedBy a``), else 0.
#   AlwaysFollowedBy: 0 no pending a, 1 an a not yet followed by b (fails)
#   NeverFollowedBy:  0 no a yet, 1 a seen, 2 b after a (fails)
#   AlwaysPrecedes:   0 neither yet, 1 a first (holds), 2 b first (fails)
def _table(step: Callable[[int, bool, bool], int]) -> tuple[int, ...]:
    return tuple(step(s, bool(c & 1), bool(c & 2)) for s in range(3) for c in range(4))


def _afby_step(s: int, is_a: bool, is_b: bool) -> int:
    return 1 if is_a else 0 if is_b else s


def _nfby_step(s: int, is_a: bool, is_b: bool) -> int:
    if is_b and s == 1:
        s = 2
    if is_a and s == 0:
        s = 1
    return s


def _ap_step(s: int, is_a: bool, is_b: bool) -> int:
    if s == 0:
        if is_a:
            return 1
        if is_b:
            return 2
    return s


_TABLES: dict[int, tuple[int, ...]] = {
    AFBY: _table(_afby_step),
    NFBY: _table(_nfby_step),
    AP: _table(_ap_step),
}


def counterexample(g: PartitionGraph, inv: Invariant, adj: Adjacency) -> list[int] | None:
    """Shortest path INITIAL→TERMINAL on which ``inv``'s automaton ends in its failure state,
    shortened like Synoptic's ``shorten``; ``None`` when ``inv`` holds."""
    path = failing_path(g.plabel, inv, adj)
    return None if path is None else shorten(path, inv, g.plabel)


def failing_path(plabel: Sequence[int], inv: Invariant, adj: Adjacency) -> list[int] | None:
    """The shortest path INITIAL→TERMINAL on which ``inv``'s automaton ends in its failure
    state, unshortened; ``None`` when there is none.

    A breadth-first search over (node, automaton state) with successors in increasing id
    order: among the shortest such paths it returns the lexicographically smallest sequence of
    node ids (by induction, each depth's queue is in the lexicographic order of the paths that
    reached it). Splitting a partition keeps that path whenever no node on it was split: every
    path of the split graph maps onto one of the same length and labels in the old graph by
    giving each new node its parent's (smaller) id, so no new path is shorter or smaller.
    """
    table = _TABLES[inv.kind]
    fail = 1 if inv.kind == AFBY else 2
    a, b = inv.a, inv.b
    lab = plabel[INITIAL_ID]
    start = INITIAL_ID * 3 + table[(lab == a) + 2 * (lab == b)]
    parent = [-2] * (3 * len(adj))
    parent[start] = -1
    goal = TERMINAL_ID * 3 + fail
    queue = [start]
    i = 0
    found = False
    while i < len(queue):
        x = queue[i]
        i += 1
        if x == goal:
            found = True
            break
        u, s = divmod(x, 3)
        if u == TERMINAL_ID:
            continue
        base = 4 * s
        for v in adj[u]:
            lv = plabel[v]
            y = 3 * v + table[base + (lv == a) + 2 * (lv == b)]
            if parent[y] == -2:
                parent[y] = x
                queue.append(y)
    if not found:
        return None
    path: list[int] = []
    x = goal
    while x != -1:
        path.append(x // 3)
        x = parent[x]
    path.reverse()
    return path


def shorten(path: list[int], inv: Invariant, plabel: Sequence[int]) -> list[int]:
    """Synoptic's ``shorten``: cut NeverFollowedBy / AlwaysPrecedes counter-examples after the
    first violating ``b``; AlwaysFollowedBy paths stay whole."""
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
