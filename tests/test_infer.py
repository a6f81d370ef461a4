"""quicsm.infer: every algorithm gives a Model that accepts its traces, satisfies the mined
invariants, has outgoing probabilities summing to 1, and does not depend on trace order."""

from __future__ import annotations

import random

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transitions_strategies import frame_of, raw_traces

from quicsm.core.errors import InputError, ModelError
from quicsm.model.inference import ALGORITHMS, infer
from quicsm.model.synoptic import EventLog
from quicsm.model.synoptic.verify import rejected_traces, violated_invariants
from quicsm.model.tables import Model
from quicsm.render.dot import model_to_dot
from quicsm.testing.synthetic import generate_transitions


def _check_model(model: Model, df: pl.DataFrame) -> None:
    log = EventLog.from_transitions(df)
    assert rejected_traces(model.nodes, model.edges, log) == []
    if model.algorithm == "synoptic":  # ktails and the observed chain over-generalise
        broken = violated_invariants(model.nodes, model.edges, model.invariants, log.labels)
        assert broken.height == 0, broken
    out = model.edges.group_by("source").agg(pl.col("probability").sum())
    assert out["probability"].to_list() == pytest.approx([1.0] * out.height)
    assert 1 not in out["source"].to_list()  # TERMINAL has no successors
    n_traces = df["trace"].n_unique()
    assert model.nodes.filter(pl.col("id") < 2)["events"].to_list() == [n_traces, n_traces]
    assert model.nodes["state"][:2].to_list() == ["INITIAL", "TERMINAL"]
    assert model.nodes["id"].to_list() == list(range(model.nodes.height))
    # events of state nodes add up to the visits of the state
    events = model.nodes.filter(pl.col("id") >= 2).group_by("state").agg(pl.col("events").sum())
    visits = df.group_by(pl.col("state").cast(pl.String)).len()
    assert dict(events.iter_rows()) == dict(visits.iter_rows())


@pytest.fixture(scope="module")
def synthetic() -> pl.DataFrame:
    return generate_transitions(300, seed=11)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_each_algorithm_on_synthetic_traces(algorithm: str, synthetic: pl.DataFrame) -> None:
    model = infer(synthetic, algorithm=algorithm)
    assert model.algorithm == algorithm
    _check_model(model, synthetic)
    assert model.stats.traces == 300
    assert model.invariants.height > 0


def _chain_counts(df: pl.DataFrame) -> dict[tuple[str, str], int]:
    """First-order transition counts recomputed from the raw rows, in plain Python."""
    by_trace: dict[str, list[tuple[float, str]]] = {}
    rows_ = df.select("trace", "time_ms", pl.col("state").cast(pl.String)).rows()
    for trace, time_ms, state in rows_:
        by_trace.setdefault(trace, []).append((time_ms, state))
    counts: dict[tuple[str, str], int] = {}
    for rows in by_trace.values():
        seq = ["INITIAL", *(state for _, state in sorted(rows)), "TERMINAL"]
        for pair in zip(seq, seq[1:], strict=False):
            counts[pair] = counts.get(pair, 0) + 1
    return counts


def test_observed_model_is_the_first_order_chain(synthetic: pl.DataFrame) -> None:
    model = infer(synthetic, algorithm="observed")
    # one node per state observed
    states = synthetic["state"].cast(pl.String).unique().to_list()
    assert sorted(model.nodes["state"].to_list()[2:]) == sorted(states)
    # its edges are the chain's counts, and probabilities are counts over the source's total
    names = dict(model.nodes.select("id", "state").iter_rows())
    edges = {
        (names[s], names[t]): (c, p)
        for s, t, c, p in model.edges.select("source", "target", "count", "probability").iter_rows()
    }
    counts = _chain_counts(synthetic)
    out: dict[str, int] = {}
    for (a, _), c in counts.items():
        out[a] = out.get(a, 0) + c
    assert {e: c for e, (c, _) in edges.items()} == counts
    for (a, b), (_, p) in edges.items():
        assert p == pytest.approx(counts[(a, b)] / out[a])


def test_synoptic_splits_states_that_the_observed_model_merges(synthetic: pl.DataFrame) -> None:
    # the synthetic profile has a hidden "tail" phase: refinement must tell it apart
    syn = infer(synthetic, algorithm="synoptic")
    obs = infer(synthetic, algorithm="observed")
    assert syn.nodes.height > obs.nodes.height
    assert syn.states_with_several_nodes() != []


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_same_seed_same_bytes_and_trace_order_does_not_matter(
    algorithm: str, synthetic: pl.DataFrame
) -> None:
    keep = synthetic["trace"].unique().sort()[:80].implode()
    small = synthetic.filter(pl.col("trace").is_in(keep))
    a = infer(small, algorithm=algorithm, seed=3).to_json()
    assert infer(small, algorithm=algorithm, seed=3).to_json() == a
    shuffled = small.sample(fraction=1.0, shuffle=True, seed=5)  # rows and traces shuffled
    assert infer(shuffled, algorithm=algorithm, seed=3).to_json() == a


@settings(max_examples=40, deadline=None)
@given(raw_traces(max_traces=5, max_len=6), st.sampled_from(ALGORITHMS), st.integers(0, 3))
def test_properties_on_random_logs(traces: list, algorithm: str, seed: int) -> None:
    df = frame_of(traces)
    model = infer(df, algorithm=algorithm, seed=seed)
    _check_model(model, df)
    shuffled = list(traces)
    random.Random(seed).shuffle(shuffled)
    assert infer(frame_of(shuffled), algorithm=algorithm, seed=seed).to_json() == model.to_json()


def test_k_reaches_ktails(synthetic: pl.DataFrame) -> None:
    k1 = infer(synthetic, algorithm="ktails", k=1)
    k2 = infer(synthetic, algorithm="ktails", k=2)
    assert k2.k == 2 and k2.nodes.height >= k1.nodes.height


def test_lazy_input_is_accepted(synthetic: pl.DataFrame) -> None:
    assert (
        infer(synthetic.lazy(), algorithm="observed").to_json()
        == infer(synthetic, algorithm="observed").to_json()
    )


# -- errors -----------------------------------------------------------------------------------


def test_unknown_algorithm_lists_the_choices(synthetic: pl.DataFrame) -> None:
    with pytest.raises(
        InputError, match=r"unknown algorithm 'perfume'; choose one of synoptic, ktails, observed"
    ):
        infer(synthetic, algorithm="perfume")


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "2"])
@pytest.mark.parametrize("algorithm", ["synoptic", "ktails"])
def test_bad_k_is_one_error_everywhere(k: object, algorithm: str, synthetic: pl.DataFrame) -> None:
    # the model entry point and the engine's own entry points word it alike, as an InputError
    from quicsm.model.synoptic import EventLog, infer_graph
    from quicsm.model.synoptic.coarsen import coarsen
    from quicsm.model.synoptic.ktails import ktails_graph

    match = r"k \(the k-tails depth\) must be a positive integer"
    with pytest.raises(InputError, match=match):
        infer(synthetic, algorithm=algorithm, k=k)  # type: ignore[arg-type]
    log = EventLog.from_transitions(synthetic)
    with pytest.raises(InputError, match=match):
        infer_graph(log, algorithm=algorithm, k=k)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=match):
        ktails_graph(log, k=k)  # type: ignore[arg-type]
    graph = ktails_graph(log, k=1)
    with pytest.raises(InputError, match=match):
        coarsen(graph, [], k=k)  # type: ignore[arg-type]


def test_empty_input_is_an_error() -> None:
    empty = pl.DataFrame(schema={"trace": pl.String, "time_ms": pl.Float64, "state": pl.String})
    with pytest.raises(ModelError, match="no transitions to infer a model from"):
        infer(empty)


# -- time per node ----------------------------------------------------------------------------


def test_split_states_get_their_own_time(synthetic: pl.DataFrame) -> None:
    model = infer(synthetic, algorithm="synoptic")
    assert model.states_with_several_nodes() != []
    assert model.node_time is not None
    per_node = model.node_fractions().filter(pl.col("id") >= 2)
    by_state = per_node.group_by("state").agg(pl.col("fraction").sum())
    state_total = model.stats.time_in_state.select(pl.col("state").cast(pl.String), "fraction")
    joined = by_state.join(state_total, on="state", suffix="_state")
    assert joined["fraction"].to_list() == pytest.approx(joined["fraction_state"].to_list())
    assert per_node["fraction"].sum() == pytest.approx(1.0)
    assert model.states_sharing_a_fraction() == []
    assert "(x)" not in model_to_dot(model)


def _hand_model(edges: list[tuple[int, int]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    nodes = pl.DataFrame(
        {
            "id": [0, 1, 2, 3, 4, 5],
            "state": ["INITIAL", "TERMINAL", "Init", "SlowStart", "SlowStart", "Recovery"],
            "events": [0] * 6,
        }
    )
    e = pl.DataFrame(
        {
            "source": [s for s, _ in edges],
            "target": [t for _, t in edges],
            "count": [1] * len(edges),
            "probability": [1.0] * len(edges),
        }
    )
    return nodes, e


def _chains(chains: dict[str, list[str]]) -> pl.DataFrame:
    from quicsm.core.frames import normalize_transitions

    rows = [
        {"trace": t, "time_ms": float(i), "state": s}
        for t, states in chains.items()
        for i, s in enumerate(states)
    ]
    return normalize_transitions(pl.DataFrame(rows))


def test_replay_looks_ahead_through_nondeterministic_nodes() -> None:
    from quicsm.model.replay import replay
    from quicsm.stats.descriptive import Visits

    # Init has two SlowStart successors; only the rest of the trace says which one it was
    nodes, edges = _hand_model([(0, 2), (2, 3), (2, 4), (3, 5), (5, 1), (4, 1)])
    df = _chains({"a": ["Init", "SlowStart", "Recovery"], "b": ["Init", "SlowStart"]})
    node = replay(Visits(df), nodes, edges)
    assert node is not None and node.tolist() == [2, 3, 5, 2, 4]


def test_ambiguous_paths_are_not_attributed() -> None:
    from quicsm.model.replay import replay
    from quicsm.stats.descriptive import Visits

    # both SlowStart nodes lead to TERMINAL: the model cannot say which one a visit was in
    nodes, edges = _hand_model([(0, 2), (2, 3), (2, 4), (3, 1), (4, 1), (5, 1)])
    df = _chains({"a": ["Init", "SlowStart"]})
    assert replay(Visits(df), nodes, edges) is None
    # and a trace the model rejects is not attributed either
    df = _chains({"a": ["Init", "Recovery"]})
    assert replay(Visits(df), nodes, edges) is None


def test_real_synoptic_models_get_node_times(synthetic: pl.DataFrame) -> None:
    for algorithm in ("synoptic", "ktails"):
        model = infer(synthetic, algorithm=algorithm, k=2)
        assert model.node_time is not None, algorithm
        assert model.node_time["fraction"].drop_nulls().sum() == pytest.approx(1.0)
        assert model.states_sharing_a_fraction() == []


def test_replay_follows_the_only_path(synthetic: pl.DataFrame) -> None:
    from quicsm.model.replay import replay
    from quicsm.stats.descriptive import Visits

    model = infer(synthetic, algorithm="observed")
    v = Visits(synthetic)
    node = replay(v, model.nodes, model.edges)
    assert node is not None
    ids = dict(model.nodes.select("state", "id").iter_rows())
    expected = [ids[s] for s in synthetic.sort("trace", "time_ms")["state"].cast(pl.String)]
    assert node.tolist() == expected


@pytest.mark.parametrize("trace_file", ["quic-go-v0.65.0.qlog", "aioquic-1.7.2.qlog"])
def test_synoptic_diagram_reads_at_page_width(trace_file: str, tmp_path: object) -> None:
    """`quicsm infer --algorithm synoptic` on a shipped file, drawn by Graphviz: scaled to a
    page about 1,000 px wide, its smallest text (names, shares, probabilities, caption) is at
    least 12 px, measured in the SVG (font sizes and width in the same units)."""
    import re
    from pathlib import Path

    from click.testing import CliRunner

    from quicsm.cli import main

    out = Path(str(tmp_path))
    path = Path(__file__).parents[1] / "traces" / trace_file
    result = CliRunner().invoke(
        main, ["infer", str(path), "--where", "vantage=server", "--algorithm", "synoptic",
               "--format", "svg", "-o", str(out), "-q"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    svg = (out / "model.svg").read_text()
    width = float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+)', svg).group(1))  # type: ignore[union-attr]
    sizes = [float(x) for x in re.findall(r'font-size="([\d.]+)"', svg)]
    assert len(sizes) > 20 and svg.count('class="node"') > 12  # a split model, many labels
    assert min(sizes) * 1000 / max(width, 1000) >= 12, (width, min(sizes))
