"""The inferred model: one set of tables that every view (DOT, JSON, networkx, stats, diff,
report) reads.

Schemas (all polars frames):

``nodes``       id (Int64, stable: 0 = INITIAL, 1 = TERMINAL, then by state label, then by
                first occurrence), state (String: a canonical state name, "INITIAL" or
                "TERMINAL"), events (Int64: concrete events in the node, weights included)
``edges``       source (Int64), target (Int64), count (Int64), probability (Float64: share of
                the source's events whose successor is in target; sums to 1 per source,
                TERMINAL included)
``invariants``  kind (String: AlwaysFollowedBy | NeverFollowedBy | AlwaysPrecedes), a, b (String),
                support (Int64)
``stats``       :class:`quicsm.stats.descriptive.Stats` computed from the transitions frame
``node_time``   id, seconds, fraction (Float64: time spent in each node, pooled over traces;
                null for INITIAL/TERMINAL) — or None when visits cannot be attributed to
                nodes (:mod:`quicsm.model.replay`)

Details of the id rule: "by state label" orders canonical states as in
:data:`quicsm.core.states.CANONICAL_STATES` (Init first) and any other label after them,
alphabetically; "first occurrence" is the order the inference algorithm produced the nodes of one
label in. :func:`renumber` applies the rule to any (nodes, edges) pair. The dummy INITIAL node
has one event per trace; so has TERMINAL. Rows of ``nodes`` are sorted by id, ``edges`` by
(source, target), ``invariants`` by (kind, a, b).

``model.json`` (:meth:`Model.to_json`) is documented in ``docs/model.md``; it is deterministic:
fixed key order, rows sorted as above, floats rounded to 12 significant digits (so the
summation order of a multi-threaded group-by cannot change a byte), UTF-8, a final newline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import orjson
import polars as pl

from quicsm.core.errors import ModelError
from quicsm.core.frames import EDGES_SCHEMA, INVARIANTS_SCHEMA, NODES_SCHEMA
from quicsm.core.states import CANONICAL_STATES
from quicsm.model.replay import NODE_TIMES_SCHEMA
from quicsm.stats.descriptive import (
    DWELL_SUMMARY_SCHEMA,
    INITIAL,
    TERMINAL,
    TIME_IN_STATE_SUMMARY_SCHEMA,
    TRANSITION_PROBABILITIES_SCHEMA,
    Stats,
)

if TYPE_CHECKING:
    import networkx as nx

#: identifies the layout of model.json; bump the number on an incompatible change.
JSON_SCHEMA: Final[str] = "quicsm-model/1"

INVARIANT_KINDS: Final[tuple[str, ...]] = ("AlwaysFollowedBy", "NeverFollowedBy", "AlwaysPrecedes")

_RANK: Final[dict[str, int]] = {s: i for i, s in enumerate(CANONICAL_STATES)}


def label_rank(label: str) -> tuple[int, str]:
    """Sort key of a node label: INITIAL, TERMINAL, canonical states in order, then the rest."""
    if label == INITIAL:
        return (-2, "")
    if label == TERMINAL:
        return (-1, "")
    return (_RANK.get(label, len(_RANK)), label)


def renumber(nodes: pl.DataFrame, edges: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Apply the stable id rule (see the module docstring) to a (nodes, edges) pair.

    ``nodes`` needs id, state, events; ``edges`` source, target, count, probability, referring
    to the old ids. Exactly one INITIAL and one TERMINAL node are required.
    """
    nodes = nodes.select([pl.col(c).cast(t) for c, t in NODES_SCHEMA.items()])
    edges = edges.select([pl.col(c).cast(t) for c, t in EDGES_SCHEMA.items()])
    for dummy in (INITIAL, TERMINAL):
        n = nodes.filter(pl.col("state") == dummy).height
        if n != 1:
            raise ModelError(f"a model needs exactly one {dummy} node, got {n}")
    if nodes.get_column("id").n_unique() != nodes.height:
        raise ModelError("node ids are not unique")
    known = set(nodes.get_column("id").to_list())
    stray = {*edges.get_column("source").to_list(), *edges.get_column("target").to_list()} - known
    if stray:
        raise ModelError(f"edges refer to unknown node ids {sorted(stray)}")
    labels = sorted(set(nodes.get_column("state").to_list()), key=label_rank)
    order = pl.DataFrame(
        {"state": labels, "_rank": list(range(len(labels)))},
        schema={"state": pl.String(), "_rank": pl.Int64()},
    )
    ranked = nodes.join(order, on="state").sort("_rank", "id")
    mapping = ranked.select(
        pl.col("id").alias("_old"), pl.int_range(pl.len(), dtype=pl.Int64).alias("_new")
    )
    new_nodes = ranked.with_columns(mapping.get_column("_new").alias("id")).select(
        list(NODES_SCHEMA)
    )

    new_edges = edges
    for col in ("source", "target"):
        new_edges = (
            new_edges.join(mapping, left_on=col, right_on="_old")
            .with_columns(pl.col("_new").alias(col))
            .drop("_new")
        )
    return new_nodes, new_edges.select(list(EDGES_SCHEMA)).sort("source", "target")


def _empty_stats() -> Stats:
    return Stats(
        traces=0,
        visits=0,
        duration_ms=0.0,
        time_in_state=pl.DataFrame(schema=TIME_IN_STATE_SUMMARY_SCHEMA),
        transition_probabilities=pl.DataFrame(schema=TRANSITION_PROBABILITIES_SCHEMA),
        dwell=pl.DataFrame(schema=DWELL_SUMMARY_SCHEMA),
    )


@dataclass(frozen=True, eq=False)
class Model:
    """An inferred state machine with its statistics. Build one with :func:`quicsm.infer`.

    ``nodes``, ``edges`` and ``invariants`` follow the schemas of the module docstring (they are
    cast and sorted on construction); ``stats`` are the aggregated statistics of the traces the
    model was inferred from; ``algorithm``, ``k`` and ``seed`` record how. ``node_time``
    (id, seconds, fraction) is the time spent in each node when every visit could be attributed
    to a node (:mod:`quicsm.model.replay`), else None.
    """

    nodes: pl.DataFrame
    edges: pl.DataFrame
    invariants: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=INVARIANTS_SCHEMA))
    stats: Stats = field(default_factory=_empty_stats)
    algorithm: str = "observed"
    k: int = 1
    seed: int = 0
    node_time: pl.DataFrame | None = None

    def __post_init__(self) -> None:
        try:
            nodes = self.nodes.select([pl.col(c).cast(t) for c, t in NODES_SCHEMA.items()])
            edges = self.edges.select([pl.col(c).cast(t) for c, t in EDGES_SCHEMA.items()])
            invariants = self.invariants.select(
                [pl.col(c).cast(t) for c, t in INVARIANTS_SCHEMA.items()]
            )
        except pl.exceptions.PolarsError as exc:
            raise ModelError(f"model tables do not match their schemas: {exc}") from None
        object.__setattr__(self, "nodes", nodes.sort("id"))
        object.__setattr__(self, "edges", edges.sort("source", "target"))
        object.__setattr__(self, "invariants", invariants.sort("kind", "a", "b"))
        if self.node_time is not None:
            try:
                node_time = self.node_time.select(
                    [pl.col(c).cast(t) for c, t in NODE_TIMES_SCHEMA.items()]
                )
            except pl.exceptions.PolarsError as exc:
                raise ModelError(f"node_time does not match its schema: {exc}") from None
            ids = nodes.select("id").join(node_time, on="id", how="left", maintain_order="left")
            object.__setattr__(self, "node_time", ids.select(list(NODE_TIMES_SCHEMA)))

    # -- derived views ---------------------------------------------------------------------

    def node_fractions(self) -> pl.DataFrame:
        """``nodes`` with ``fraction``: the pooled fraction of time spent in the node (null for
        INITIAL/TERMINAL). Without :attr:`node_time` it is the fraction of the node's *state*,
        which a state split into several nodes shows on each of them."""
        if self.node_time is not None:
            per_node = self.node_time.select("id", "fraction")
            return self.nodes.join(per_node, on="id", how="left", maintain_order="left")
        tis = self.stats.time_in_state.select(pl.col("state").cast(pl.String), pl.col("fraction"))
        return self.nodes.join(tis, on="state", how="left", maintain_order="left")

    def states_with_several_nodes(self) -> list[str]:
        counts = self.nodes.group_by("state").len().filter(pl.col("len") > 1)
        return sorted(counts.get_column("state").to_list(), key=label_rank)

    def states_sharing_a_fraction(self) -> list[str]:
        """States drawn as several nodes whose nodes can only show the state's total time."""
        return [] if self.node_time is not None else self.states_with_several_nodes()

    # -- exports ---------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The model as plain data, in the layout of model.json (see docs/model.md)."""
        s = self.stats
        return {
            "schema": JSON_SCHEMA,
            "algorithm": self.algorithm,
            "k": self.k,
            "seed": self.seed,
            "traces": s.traces,
            "visits": s.visits,
            "duration_seconds": _round(s.duration_ms / 1000.0),
            "nodes": _rows(self._nodes_with_time()),
            "edges": _rows(self.edges),
            "invariants": _rows(self.invariants),
            "time_in_state": _rows(
                s.time_in_state.select("state", "fraction", "seconds", "mean_fraction", "traces")
            ),
            "transition_probabilities": _rows(s.transition_probabilities),
            "dwell": _rows(s.dwell),
        }

    def _nodes_with_time(self) -> pl.DataFrame:
        if self.node_time is None:
            return self.nodes.with_columns(
                pl.lit(None, pl.Float64).alias("seconds"),
                pl.lit(None, pl.Float64).alias("fraction"),
            )
        return self.nodes.join(self.node_time, on="id", how="left", maintain_order="left")

    def to_json(self) -> str:
        """model.json text: deterministic for the same model (see the module docstring)."""
        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2).decode() + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Model:
        if not isinstance(data, dict):
            raise ModelError(f"expected a model.json object, got {type(data).__name__}")
        if data.get("schema") != JSON_SCHEMA:
            raise ModelError(f"expected schema {JSON_SCHEMA!r}, got {data.get('schema')!r}")
        required = ("nodes", "edges", "invariants", "time_in_state", "transition_probabilities")
        missing = [k for k in (*required, "dwell", "traces", "visits") if k not in data]
        if missing:
            raise ModelError(f"model.json lacks {missing}")
        try:
            stats = Stats(
                traces=int(data["traces"]),
                visits=int(data["visits"]),
                duration_ms=float(data.get("duration_seconds", 0.0)) * 1000.0,
                time_in_state=_frame(data["time_in_state"], TIME_IN_STATE_SUMMARY_SCHEMA),
                transition_probabilities=_frame(
                    data["transition_probabilities"], TRANSITION_PROBABILITIES_SCHEMA
                ),
                dwell=_frame(data["dwell"], DWELL_SUMMARY_SCHEMA),
            )
            nodes = _frame(data["nodes"], {**NODES_SCHEMA, **NODE_TIMES_SCHEMA})
            timed = nodes.get_column("fraction").is_not_null().any()
            return cls(
                nodes=nodes.select(list(NODES_SCHEMA)),
                node_time=nodes.select(list(NODE_TIMES_SCHEMA)) if timed else None,
                edges=_frame(data["edges"], EDGES_SCHEMA),
                invariants=_frame(data["invariants"], INVARIANTS_SCHEMA),
                stats=stats,
                algorithm=str(data.get("algorithm", "observed")),
                k=int(data.get("k", 1)),
                seed=int(data.get("seed", 0)),
            )
        except (pl.exceptions.PolarsError, TypeError, ValueError, KeyError) as exc:
            raise ModelError(f"model.json does not match its schema: {exc}") from None

    @classmethod
    def from_json(cls, text: str | bytes) -> Model:
        """Read model.json text back (``Model.from_json(m.to_json()).to_json() == m.to_json()``)."""
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise ModelError(f"model.json is not valid JSON: {exc}") from None
        return cls.from_dict(data)

    def to_networkx(self) -> nx.DiGraph:
        """A :class:`networkx.DiGraph`: node attributes state, events, fraction; edge attributes
        count, probability; graph attributes algorithm, k, seed, traces. Needs networkx (the
        ``networkx`` extra: ``pip install 'quicsm[networkx]'``)."""
        try:
            import networkx as nx
        except ImportError:
            raise ModelError(
                "Model.to_networkx needs networkx: install quicsm with its networkx extra "
                "(pip install 'quicsm[networkx]')"
            ) from None

        g = nx.DiGraph(algorithm=self.algorithm, k=self.k, seed=self.seed, traces=self.stats.traces)
        for row in self.node_fractions().iter_rows(named=True):
            g.add_node(
                row["id"], state=row["state"], events=row["events"], fraction=row["fraction"]
            )
        for row in self.edges.iter_rows(named=True):
            g.add_edge(
                row["source"], row["target"], count=row["count"], probability=row["probability"]
            )
        return g

    def __repr__(self) -> str:
        return (
            f"Model(algorithm={self.algorithm!r}, nodes={self.nodes.height}, "
            f"edges={self.edges.height}, invariants={self.invariants.height}, "
            f"traces={self.stats.traces})"
        )


def _round(x: Any) -> Any:
    if isinstance(x, float):
        if x != x or x in (float("inf"), float("-inf")):
            return None
        return float(f"{x:.12g}")
    return x


def _rows(df: pl.DataFrame) -> list[dict[str, Any]]:
    cast = df.with_columns(pl.col(pl.Enum, pl.Categorical).cast(pl.String))
    return [{k: _round(v) for k, v in row.items()} for row in cast.iter_rows(named=True)]


def _frame(rows: Any, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    if not isinstance(rows, list):
        raise TypeError(f"expected a list of rows, got {type(rows).__name__}")
    if not rows:
        return pl.DataFrame(schema=schema)
    strings = {c: pl.String() if isinstance(t, pl.Enum) else t for c, t in schema.items()}
    df = pl.DataFrame(rows, schema=strings)
    return df.cast(schema)  # type: ignore[arg-type]
