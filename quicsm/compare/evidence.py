"""Why did it change? The events behind a change, per trace, compared between the groups.

For a change found by :func:`quicsm.compare.diff.diff` — a significant finding, or one of the
largest outcome changes — :func:`explain` compares the traces of both groups (in the change's
stratum or scenario when it has one) on indicators read from the events behind the states:

- *spurious losses*: packets declared lost and later acknowledged (from the packets where the
  trace logs them, else ``spurious_loss`` events), and state changes the stack made because
  of one (transitions whose trigger is ``spurious_loss``: the undo of a congestion response);
- *loss detection*: packets declared lost by the time threshold and by the packet (reordering)
  threshold of RFC 9002 §6.1;
- *probe timeouts* (RFC 9002 §6.2), *Recovery episodes*, *cwnd cap hits* (entries into
  CongestionAvoidanceMaxed) and the share of time *application-limited*;
- the *outcomes* of the transfer (completion time, throughput), when the labels carry them.

The counts of losses, spurious losses, probe timeouts and Recovery episodes are the connection
account's (:mod:`quicsm.extract.account`), the same numbers every view shows, each with its
provenance (logged, from packets, from metrics, absent), which the sentences carry.

Indicators are ranked by how cleanly they separate the groups: Cliff's δ = P(B > A) − P(B < A)
over pairs of traces (1: every trace of B above every trace of A); among equally clean ones, a
cause before its consequences (:data:`CAUSAL_ORDER`: false losses before the Recovery they
start). They are evidence for an explanation, not further tests: their p-values would be part
of no error-control policy, so none are given. Each comes with example trace ids to open.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from quicsm.compare.diff import (
    DiffResult,
    Finding,
    fractions,
    keyed_transitions,
    outcome_name,
    split_key,
)
from quicsm.compare.grouping import OUTCOMES, Comparison, Group, label_text
from quicsm.core.frames import KEY_DTYPE
from quicsm.core.states import APP_LIMITED, APP_LIMITED_CAUSES

__all__ = [
    "Evidence",
    "Explanation",
    "Provenance",
    "explain",
    "group_account",
    "indicators",
    "loss_detection",
]

#: how many of the largest outcome changes are explained besides the significant findings
TOP_OUTCOMES = 2
#: smallest |Cliff's δ| for an indicator to count as evidence
MIN_DELTA = 0.3
#: most indicators shown per change
MAX_EVIDENCE = 5


@dataclass(frozen=True)
class Evidence:
    """One indicator compared between the groups."""

    indicator: str
    a_mean: float
    b_mean: float
    a_traces: int  # traces of A where the indicator is non-zero
    b_traces: int
    n_a: int
    n_b: int
    delta: float  # Cliff's δ of B against A
    example_a: str  # trace ids
    example_b: str
    unit: str = "per trace"
    #: the groups (``"A"``, ``"B"``) none of whose traces log this kind of event at all: a
    #: producer may not log it, so its 0 may mean "not logged" rather than "never happened"
    unlogged: tuple[str, ...] = ()
    #: where each group's values come from (:mod:`quicsm.extract.account`: ``logged``,
    #: ``packets``, ``metrics``, ``absent``; ``""``: not a fact of the account)
    sources: tuple[str, str] = ("", "")
    #: what each group's producer logged, when another source answered (or why absent)
    notes: tuple[str | None, str | None] = (None, None)


@dataclass
class Explanation:
    """The evidence behind one change: a significant finding, or an outcome change (its table
    row), compared on the traces of one stratum or scenario (its words are a view:
    :mod:`quicsm.render.findings`)."""

    significant: bool
    evidence: list[Evidence] = field(default_factory=list)
    kind: str = "outcome"  # or the kind of the finding explained (state, edge, ...)
    cell: str | None = None  # the stratum or scenario compared (None: every trace)
    #: traces compared per group, and whether they are the servers' only
    n_a: int = 0
    n_b: int = 0
    servers: bool = False
    finding: Finding | None = None
    #: the outcome row explained, when this is an outcome change
    outcome: dict[str, Any] | None = None
    #: index (in the list :func:`explain` returns) of the change explained earlier by the
    #: very same traces and indicators: shown once, there; None when this evidence is its own
    same_as: int | None = None


#: the mechanism indicators in causal order: whether declared losses were real and by which
#: threshold they were declared (RFC 9002 section 6.1), then the congestion response to them
#: (undo, Recovery), then all losses together (the sum of the two thresholds), timeouts
#: (section 6.2), window caps and the application's limits. Among indicators that separate the
#: groups equally cleanly, a cause is shown before its consequences.
CAUSAL_ORDER: tuple[str, ...] = (
    "spurious losses (declared lost, later acknowledged)",
    "losses by packet threshold",
    "losses by time threshold",
    "state changes undoing a spurious loss",
    "Recovery episodes",
    "packets declared lost",
    "probe timeouts",
    "RetransmissionTimeout episodes",
    "cwnd cap hits (entries into CongestionAvoidanceMaxed)",
    "time application-limited",
)
_CAUSAL_RANK = {name: i for i, name in enumerate(CAUSAL_ORDER)}


# -- per-trace indicators ---------------------------------------------------------------------

_Counter = Callable[[pl.DataFrame], pl.DataFrame]


def _entries(state: str) -> _Counter:
    def count(transitions: pl.DataFrame) -> pl.DataFrame:
        t = transitions.filter(pl.col("state").cast(pl.String) == state)
        return t.group_by("file", "trace").agg(pl.len().cast(pl.Float64).alias("value"))

    return count


def _triggered(trigger: str) -> _Counter:
    def count(transitions: pl.DataFrame) -> pl.DataFrame:
        t = transitions.filter(pl.col("trigger") == trigger)
        return t.group_by("file", "trace").agg(pl.len().cast(pl.Float64).alias("value"))

    return count


#: indicator name -> the fact of the connection account (:mod:`quicsm.extract.account`) that
#: answers it, when the group has an account
ACCOUNT_FACTS: dict[str, str] = {
    "spurious losses (declared lost, later acknowledged)": "spurious_losses",
    "packets declared lost": "losses",
    "losses by time threshold": "losses_time_threshold",
    "losses by packet threshold": "losses_packet_threshold",
    "probe timeouts": "ptos",
    "Recovery episodes": "recovery_episodes",
}

_TRANSITION_INDICATORS: tuple[tuple[str, _Counter], ...] = (
    ("state changes undoing a spurious loss", _triggered("spurious_loss")),
    ("Recovery episodes", _entries("Recovery")),
    ("cwnd cap hits (entries into CongestionAvoidanceMaxed)", _entries("CongestionAvoidanceMaxed")),
    ("RetransmissionTimeout episodes", _entries("RetransmissionTimeout")),
)


@dataclass(frozen=True)
class Provenance:
    """Where a group's values of one indicator come from: its traces' sources (one, or
    ``mixed``) and what the producer logged when another source answered."""

    source: str
    note: str | None = None


def _provenance(account: pl.DataFrame, fact: str, keys: Sequence[tuple[str, str]]) -> Provenance:
    rows = account.join(
        pl.DataFrame(
            {"file": [k[0] for k in keys], "trace": [k[1] for k in keys]},
            schema={"file": KEY_DTYPE, "trace": KEY_DTYPE},
        ),
        on=["file", "trace"],
        how="semi",
    )
    if rows.height == 0:
        return Provenance("")
    sources = rows.get_column(f"{fact}_from").unique().sort().to_list()
    source = sources[0] if len(sources) == 1 else "mixed"
    producers = ", ".join(rows.get_column("producer").unique().sort().to_list())
    if fact == "spurious_losses" and source == "packets":
        logged = float(rows.get_column("spurious_losses_logged").fill_null(0.0).sum()) / rows.height
        said = "none" if logged == 0 else f"{logged:.1f} per trace"
        return Provenance(source, f"{producers} logs {said}")
    notes = rows.get_column(f"{fact}_note").drop_nulls().unique().sort().to_list()
    return Provenance(source, notes[0] if len(notes) == 1 else None)


def group_account(group: Group) -> pl.DataFrame | None:
    """The connection account of the group's traces: the one read with the group
    (:mod:`quicsm.compare.load`), else made from its frames (no packets: facts that need them
    are absent); None when the group has no metrics."""
    if group.account is not None:
        return group.account
    if group.metrics is None:
        return None
    from quicsm.extract.account import account_frame

    labels = {
        str(t): d
        for t, d in zip(
            group.traces.get_column("trace").to_list(), group.label_dicts(), strict=True
        )
    }
    group.account = account_frame(group.transitions, group.metrics, labels)
    return group.account


@dataclass(frozen=True)
class GroupIndicators:
    """What :func:`indicators` reads of a group whatever the traces asked for: the connection
    account and transitions with their keys cast, each indicator's counts per trace, the
    application-limited share of every trace and the traces' labels (made once per group when
    one explanation after another asks, :func:`group_indicators`)."""

    account: pl.DataFrame | None
    #: per account fact: (indicator, fact, its counts per trace: file, trace, value)
    facts: list[tuple[str, str, pl.DataFrame]]
    #: per transition indicator: its counts per trace
    counters: list[tuple[str, pl.DataFrame]]
    app_limited: dict[str, float]
    labels: dict[tuple[str, str], dict[str, Any]]


def group_indicators(group: Group) -> GroupIndicators:
    """The pieces of :func:`indicators` that do not depend on the traces asked for."""
    tr = group.transitions.with_columns(
        pl.col("file").cast(KEY_DTYPE), pl.col("trace").cast(KEY_DTYPE)
    )
    account = group_account(group)
    acc = None
    facts = []
    if account is not None:
        acc = account.with_columns(pl.col("file").cast(KEY_DTYPE), pl.col("trace").cast(KEY_DTYPE))
        for name, fact in ACCOUNT_FACTS.items():
            counted = acc.select("file", "trace", pl.col(fact).alias("value")).drop_nulls()
            facts.append((name, fact, counted))
    from_facts = {name for name, _, _ in facts}
    counters = [
        (name, counter(tr)) for name, counter in _TRANSITION_INDICATORS if name not in from_facts
    ]
    # ApplicationLimited whole, or its causes summed when the model splits it
    ids, shares = fractions(keyed_transitions(tr), [APP_LIMITED, *APP_LIMITED_CAUSES])
    labels = {
        (str(f), str(t)): d
        for (f, t), d in zip(
            group.traces.select("file", "trace").iter_rows(), group.label_dicts(), strict=True
        )
    }
    return GroupIndicators(
        acc, facts, counters, dict(zip(ids, shares.sum(axis=1).tolist(), strict=True)), labels
    )


def indicators(
    group: Group,
    keys: Sequence[tuple[str, str]],
    provenance: dict[str, Provenance] | None = None,
    *,
    pieces: GroupIndicators | None = None,
) -> tuple[dict[str, tuple[str, np.ndarray]], set[str]]:
    """Every indicator's value for each trace of ``keys`` (in that order): name -> (unit,
    values), and the event indicators of which the group's traces log none at all. Event
    indicators only when the group has metrics; their counts are the connection account's
    (:mod:`quicsm.extract.account`), whose provenance per indicator goes to ``provenance``.
    ``pieces``: the group's :func:`group_indicators`, when already made."""
    if pieces is None:
        pieces = group_indicators(group)
    frame = pl.DataFrame(
        {"file": [k[0] for k in keys], "trace": [k[1] for k in keys]},
        schema={"file": KEY_DTYPE, "trace": KEY_DTYPE},
    )

    def per_trace(counted: pl.DataFrame) -> np.ndarray:
        joined = frame.join(
            counted.select(
                pl.col("file").cast(KEY_DTYPE), pl.col("trace").cast(KEY_DTYPE), "value"
            ),
            on=["file", "trace"],
            how="left",
            maintain_order="left",
        )
        return joined["value"].fill_null(0.0).to_numpy()

    out: dict[str, tuple[str, np.ndarray]] = {}
    unlogged: set[str] = set()
    for name, fact, counted in pieces.facts:
        wanted = counted.join(frame, on=["file", "trace"], how="semi")
        if wanted.height == 0:
            unlogged.add(name)
        out[name] = ("per trace", per_trace(counted))
        if provenance is not None and pieces.account is not None:
            provenance[name] = _provenance(pieces.account, fact, keys)
    for name, counted in pieces.counters:
        out[name] = ("per trace", per_trace(counted))
    share = pieces.app_limited
    out["time application-limited"] = (
        "share",
        np.array([share.get(f"{f}\x1f{t}", 0.0) for f, t in keys]),
    )
    labels = pieces.labels
    for metric in OUTCOMES:
        values = [labels.get(k, {}).get(metric) for k in keys]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values) and values:
            out[outcome_name(metric)] = (f"outcome:{metric}", np.array(values, dtype=float))
    return out, unlogged


def cliffs_delta(a: np.ndarray, b: np.ndarray) -> float:
    """P(B > A) − P(B < A) over all pairs (0 when a group is empty)."""
    if a.size == 0 or b.size == 0:
        return 0.0
    diff = b[:, None] - a[None, :]
    return float((np.count_nonzero(diff > 0) - np.count_nonzero(diff < 0)) / diff.size)


# -- scopes and explanations ------------------------------------------------------------------


def _keys(group: Group, cell: str | None, comp: Comparison) -> list[tuple[str, str]]:
    """The group's traces in ``cell`` (its stratum, or scenario), servers only when it has them."""
    servers = _servers(group)
    out = []
    for (file, trace), labels in zip(
        group.traces.select("file", "trace").iter_rows(), group.label_dicts(), strict=True
    ):
        key = (str(file), str(trace))
        if servers and key not in servers:
            continue
        if cell is not None:
            if comp.strata is not None:
                if comp.strata.get(key) != cell:
                    continue
            elif label_text(labels.get("scenario")) != cell:
                continue
        out.append(key)
    return sorted(out)


def _servers(group: Group) -> set[tuple[str, str]]:
    if "vantage" not in group.transitions.columns:
        return set()
    s = group.transitions.filter(pl.col("vantage").cast(pl.String) == "server")
    return {(str(f), str(t)) for f, t in s.select("file", "trace").unique().iter_rows()}


def _example(keys: Sequence[tuple[str, str]], values: np.ndarray, *, high: bool) -> str:
    if not keys:
        return "–"
    order = np.argsort(values, kind="stable")
    i = int(order[-1]) if high else int(order[len(order) // 2])
    return keys[i][1]


def _evidence(
    comp: Comparison,
    cell: str | None,
    *,
    outcomes: bool = True,
    pieces: Callable[[], tuple[GroupIndicators, GroupIndicators]] | None = None,
) -> tuple[_Scope, list[Evidence]]:
    ka, kb = _keys(comp.a, cell, comp), _keys(comp.b, cell, comp)
    pa: dict[str, Provenance] = {}
    pb: dict[str, Provenance] = {}
    ga, gb = pieces() if pieces is not None else (None, None)
    (ia, none_a) = indicators(comp.a, ka, pa, pieces=ga)
    (ib, none_b) = indicators(comp.b, kb, pb, pieces=gb)
    rows: list[Evidence] = []
    for name, (unit, va) in ia.items():
        if name not in ib or (not outcomes and unit.startswith("outcome:")):
            continue
        vb = ib[name][1]
        if va.size == 0 or vb.size == 0:
            continue
        delta = cliffs_delta(va, vb)
        if abs(delta) < MIN_DELTA:
            continue
        b_up = float(vb.mean()) > float(va.mean())
        rows.append(
            Evidence(
                indicator=name,
                a_mean=float(va.mean()),
                b_mean=float(vb.mean()),
                a_traces=int(np.count_nonzero(va)),
                b_traces=int(np.count_nonzero(vb)),
                n_a=int(va.size),
                n_b=int(vb.size),
                delta=delta,
                example_a=_example(ka, va, high=not b_up),
                example_b=_example(kb, vb, high=b_up),
                unit=unit,
                unlogged=tuple(g for g, none in (("A", none_a), ("B", none_b)) if name in none),
                sources=(pa.get(name, _NONE).source, pb.get(name, _NONE).source),
                notes=(pa.get(name, _NONE).note, pb.get(name, _NONE).note),
            )
        )
    # cleanest separation first; among equals, the largest relative change, mechanisms before
    # outcomes
    rows.sort(
        key=lambda e: (
            -abs(e.delta),
            e.unit.startswith("outcome:"),
            _CAUSAL_RANK.get(e.indicator, len(CAUSAL_ORDER)),
            -abs(e.b_mean - e.a_mean) / max(abs(e.a_mean), abs(e.b_mean), 1e-12),
            e.indicator,
        )
    )
    return _Scope(len(ka), len(kb), bool(_servers(comp.a) or _servers(comp.b))), rows[:MAX_EVIDENCE]


_NONE = Provenance("")


@dataclass(frozen=True)
class _Scope:
    n_a: int
    n_b: int
    servers: bool


def explain(
    comp: Comparison, result: DiffResult, *, top_outcomes: int = TOP_OUTCOMES
) -> list[Explanation]:
    """Evidence for every significant finding, and for the ``top_outcomes`` largest outcome
    changes (by relative change, among cells with at least 3 traces per group) whether
    significant or not — said which."""
    out: list[Explanation] = []
    made: list[tuple[GroupIndicators, GroupIndicators]] = []

    def pieces() -> tuple[GroupIndicators, GroupIndicators]:
        """Both groups' :func:`group_indicators`, made at the first explanation that asks."""
        if not made:
            made.append((group_indicators(comp.a), group_indicators(comp.b)))
        return made[0]

    outcomes = result.outcomes.filter(
        (pl.col("n_a") >= 3) & (pl.col("n_b") >= 3) & pl.col("change").is_not_nan()
    )
    # the first outcome (completion time) speaks for its cell: throughput moves with it
    ranked = outcomes.with_columns(
        pl.col("change").abs().alias("_size"), (pl.col("metric") == OUTCOMES[0]).alias("_first")
    ).sort(
        ["significant", "_first", "_size", "metric", "cell"],
        descending=[True, True, True, False, False],
    )
    cells_seen: set[str] = set()
    for r in ranked.iter_rows(named=True):
        if not r["significant"] and len(cells_seen) >= top_outcomes:
            continue
        if r["cell"] in cells_seen:
            continue  # one explanation per cell (completion time and throughput move together)
        cells_seen.add(r["cell"])
        cell = None if r["cell"] == "all" else r["cell"]
        scope, rows = _evidence(comp, cell, outcomes=False, pieces=pieces)
        out.append(
            Explanation(
                bool(r["significant"]),
                rows,
                cell=cell,
                n_a=scope.n_a,
                n_b=scope.n_b,
                servers=scope.servers,
                outcome=r,
            )
        )
    for f in result.findings():
        if f.kind == "outcome":
            continue
        cell = _cell_of_largest_change(comp, f.kind, f.subject)
        scope, rows = _evidence(comp, cell, pieces=pieces)
        out.append(
            Explanation(
                True,
                rows,
                kind=f.kind,
                cell=cell,
                n_a=scope.n_a,
                n_b=scope.n_b,
                servers=scope.servers,
                finding=f,
            )
        )
    # one stratum's evidence is shown once: a later change explained by the same traces and
    # the same indicators refers to the first
    first: dict[tuple[str | None, tuple[Evidence, ...]], int] = {}
    for i, e in enumerate(out):
        key = (e.cell, tuple(e.evidence))
        if e.evidence and key in first:
            e.same_as = first[key]
        else:
            first.setdefault(key, i)
    return out


def _cells(comp: Comparison, group: Group) -> dict[tuple[str, str], str]:
    """(file, trace) -> its stratum, or scenario; empty when traces have neither."""
    if comp.strata is not None:
        return dict(comp.strata)
    out = {}
    for (f, t), labels in zip(
        group.traces.select("file", "trace").iter_rows(), group.label_dicts(), strict=True
    ):
        if "scenario" in labels:
            out[(str(f), str(t))] = label_text(labels["scenario"])
    return out


def _per_trace(group: Group, kind: str, subject: str) -> dict[tuple[str, str], float]:
    """The finding's quantity per trace: a state's time share, or a transition's share of its
    source's exits (traces that leave the source)."""
    tr = keyed_transitions(group.transitions)
    if kind == "state":
        ids, m = fractions(tr, [subject])
        return {split_key(k): float(v) for k, v in zip(ids, m[:, 0].tolist(), strict=True)}
    if kind == "edge":
        from quicsm.stats.descriptive import transition_counts

        source, _, target = subject.partition(" -> ")
        tc = transition_counts(tr).with_columns(
            pl.col("source").cast(pl.String), pl.col("target").cast(pl.String)
        )
        exits = (
            tc.filter(pl.col("source") == source)
            .group_by("trace")
            .agg(
                pl.col("count").sum().alias("n"),
                pl.col("count").filter(pl.col("target") == target).sum().alias("y"),
            )
        )
        return {split_key(k): y / n for k, n, y in exits.select("trace", "n", "y").iter_rows()}
    return {}


def _cell_of_largest_change(comp: Comparison, kind: str, subject: str) -> str | None:
    """The stratum (or scenario) in which the finding's quantity moves most between the
    groups, where it is measured on at least 2 traces of each; None to use every trace."""
    va, vb = _per_trace(comp.a, kind, subject), _per_trace(comp.b, kind, subject)
    ca, cb = _cells(comp, comp.a), _cells(comp, comp.b)
    if not va or not vb or not ca or not cb:
        return None
    best: tuple[float, str] | None = None
    for cell in sorted(set(ca.values()) & set(cb.values())):
        xa = [v for k, v in va.items() if ca.get(k) == cell]
        xb = [v for k, v in vb.items() if cb.get(k) == cell]
        if len(xa) < 2 or len(xb) < 2:
            continue
        size = abs(float(np.mean(xb)) - float(np.mean(xa)))
        if best is None or size > best[0]:
            best = (size, cell)
    return None if best is None else best[1]


#: the loss-detection indicators of :func:`loss_detection`, in the order shown
LOSS_INDICATORS = (
    "packets declared lost",
    "losses by packet threshold",
    "losses by time threshold",
    "spurious losses (declared lost, later acknowledged)",
    "probe timeouts",
)


def loss_detection(comp: Comparison, cell: str | None = None) -> pl.DataFrame:
    """How each group's losses were detected (RFC 9002 §6.1: packet and time threshold; §6.2:
    probe timeouts) and how many were spurious: the mean per trace over the groups' traces
    (servers only when there are any; in ``cell`` when given), from the connection account. A
    group none of whose traces has a value of a kind has ``logged`` false (no source holds
    it: its mean is then no evidence of zero); ``a_from``/``b_from`` say where the values
    come from, ``a_note``/``b_note`` what the producer logged. Empty when neither group has
    metrics."""
    ka, kb = _keys(comp.a, cell, comp), _keys(comp.b, cell, comp)
    pa: dict[str, Provenance] = {}
    pb: dict[str, Provenance] = {}
    (ia, none_a), (ib, none_b) = indicators(comp.a, ka, pa), indicators(comp.b, kb, pb)
    rows = []
    for name in LOSS_INDICATORS:
        if name not in ia and name not in ib:
            continue
        va = ia.get(name, ("", np.zeros(0)))[1]
        vb = ib.get(name, ("", np.zeros(0)))[1]
        rows.append(
            {
                "indicator": name,
                "a_mean": float(va.mean()) if va.size else None,
                "b_mean": float(vb.mean()) if vb.size else None,
                "a_logged": name in ia and name not in none_a,
                "b_logged": name in ib and name not in none_b,
                "n_a": len(ka),
                "n_b": len(kb),
                "a_from": pa.get(name, _NONE).source,
                "b_from": pb.get(name, _NONE).source,
                "a_note": pa.get(name, _NONE).note,
                "b_note": pb.get(name, _NONE).note,
            }
        )
    schema = {
        "indicator": pl.String,
        "a_mean": pl.Float64,
        "b_mean": pl.Float64,
        "a_logged": pl.Boolean,
        "b_logged": pl.Boolean,
        "n_a": pl.Int64,
        "n_b": pl.Int64,
        "a_from": pl.String,
        "b_from": pl.String,
        "a_note": pl.String,
        "b_note": pl.String,
    }
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
