"""The Model and its views: JSON (golden + round trip), DOT (golden), networkx, rendering."""

from __future__ import annotations

import os
import re
from pathlib import Path

import orjson
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from quicsm.core.errors import ModelError, QuicsmError
from quicsm.core.frames import normalize_transitions
from quicsm.core.numbers import short_pct
from quicsm.model.inference import infer
from quicsm.model.tables import JSON_SCHEMA, Model, renumber
from quicsm.render.colours import state_colour
from quicsm.render.dot import model_svg, model_to_dot, node_names, render_model

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("QUICSM_UPDATE_GOLDEN") == "1"

#: six hand-written connections in the spirit of the paper's Fig. 13 (times in ms)
FIG13_TRACES: dict[str, list[tuple[float, str]]] = {
    "desktop-1": [(0, "SlowStart"), (40, "CongestionAvoidance"), (400, "Recovery"),
                  (430, "CongestionAvoidance"), (900, "ApplicationLimited")],
    "desktop-2": [(0, "SlowStart"), (35, "CongestionAvoidance"), (300, "TailLossProbe"),
                  (310, "Recovery"), (350, "CongestionAvoidance")],
    "desktop-3": [(0, "SlowStart"), (50, "Recovery"), (80, "CongestionAvoidance"),
                  (700, "CongestionAvoidanceMaxed"), (760, "CongestionAvoidance")],
    "mobile-1": [(0, "SlowStart"), (60, "ApplicationLimited"), (500, "CongestionAvoidance"),
                 (560, "ApplicationLimited")],
    "mobile-2": [(0, "SlowStart"), (45, "ApplicationLimited"), (800, "SlowStart"),
                 (830, "RetransmissionTimeout"), (1100, "SlowStart")],
    "mobile-3": [(0, "SlowStart"), (70, "CongestionAvoidance"), (200, "Recovery"),
                 (260, "ApplicationLimited")],
}  # fmt: skip
FIG13_ENDS = {t: 1000.0 + 100 * i for i, t in enumerate(FIG13_TRACES)}
FIG13_ENDS["mobile-2"] = 1200.0


def fig13_transitions() -> pl.DataFrame:
    rows = [
        {"trace": t, "time_ms": float(ms), "state": s, "end_ms": FIG13_ENDS[t]}
        for t, events in FIG13_TRACES.items()
        for ms, s in events
    ]
    return normalize_transitions(pl.DataFrame(rows))


@pytest.fixture(scope="module")
def model() -> Model:
    return infer(fig13_transitions(), algorithm="observed")


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden file {path.name}: run with QUICSM_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"{path.name} changed; if intended, regenerate with QUICSM_UPDATE_GOLDEN=1 and review"
    )


# -- golden files -----------------------------------------------------------------------------


def test_dot_matches_golden(model: Model) -> None:
    _golden("fig13_observed.dot", model_to_dot(model))


def test_json_matches_golden(model: Model) -> None:
    _golden("fig13_observed.json", model.to_json())


# -- JSON -------------------------------------------------------------------------------------


def test_json_has_the_documented_layout(model: Model) -> None:
    data = orjson.loads(model.to_json())
    assert data["schema"] == JSON_SCHEMA
    assert list(data) == [
        "schema", "algorithm", "k", "seed", "traces", "visits", "duration_seconds", "nodes",
        "edges", "invariants", "time_in_state", "transition_probabilities", "dwell",
    ]  # fmt: skip
    dummy = {"seconds": None, "fraction": None}
    assert data["nodes"][0] == {"id": 0, "state": "INITIAL", "events": 6, **dummy}
    assert data["nodes"][1] == {"id": 1, "state": "TERMINAL", "events": 6, **dummy}
    # in the observed model a node is a state: its time is the state's
    node_frac = {n["state"]: n["fraction"] for n in data["nodes"][2:]}
    assert node_frac == {r["state"]: r["fraction"] for r in data["time_in_state"]}
    assert set(data["edges"][0]) == {"source", "target", "count", "probability"}
    assert {i["kind"] for i in data["invariants"]} <= {
        "AlwaysFollowedBy",
        "NeverFollowedBy",
        "AlwaysPrecedes",
    }
    assert set(data["invariants"][0]) == {"kind", "a", "b", "support"}
    tis = {r["state"]: r for r in data["time_in_state"]}
    assert set(tis["SlowStart"]) >= {"state", "fraction", "seconds"}
    assert sum(r["fraction"] for r in data["time_in_state"]) == pytest.approx(1.0)
    # the two SlowStart visits of mobile-2 after Init: 45 + 30 + 100 ms, plus 35..70 ms
    assert tis["SlowStart"]["seconds"] == pytest.approx(
        (40 + 35 + 50 + 60 + 45 + 70 + 30 + 100) / 1000
    )


def test_json_round_trips(model: Model) -> None:
    text = model.to_json()
    again = Model.from_json(text)
    assert again.to_json() == text
    assert model_to_dot(again) == model_to_dot(model)
    assert Model.from_json(text.encode()).to_json() == text
    assert again.node_time is not None and model.node_time is not None
    assert_frame_equal(again.node_time, model.node_time, check_exact=False, rel_tol=1e-11)
    untimed = Model(nodes=model.nodes, edges=model.edges, stats=model.stats)
    assert Model.from_json(untimed.to_json()).node_time is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "expected a model.json object, got list"),
        ('{"schema": "other/9"}', "expected schema 'quicsm-model/1', got 'other/9'"),
        ('{"schema": "quicsm-model/1", "nodes": []}', "model.json lacks"),
    ],
)
def test_bad_json_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(ModelError, match=message):
        Model.from_json(text)


def test_json_with_wrong_types_is_a_clear_error(model: Model) -> None:
    data = orjson.loads(model.to_json())
    data["nodes"][2]["events"] = "many"
    with pytest.raises(ModelError, match="does not match its schema"):
        Model.from_json(orjson.dumps(data))


# -- other views ------------------------------------------------------------------------------


def test_networkx_is_an_extra(model: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without networkx installed, the view says which extra brings it."""
    import sys

    monkeypatch.setitem(sys.modules, "networkx", None)  # import networkx -> ImportError
    with pytest.raises(ModelError, match=r"pip install 'quicsm\[networkx\]'"):
        model.to_networkx()


def test_networkx_view(model: Model) -> None:
    g = model.to_networkx()
    assert g.number_of_nodes() == model.nodes.height
    assert g.number_of_edges() == model.edges.height
    assert g.nodes[0]["state"] == "INITIAL" and g.nodes[1]["state"] == "TERMINAL"
    for n in g.nodes:
        out = [d["probability"] for _, _, d in g.out_edges(n, data=True)]
        if n != 1:
            assert sum(out) == pytest.approx(1.0)
        else:
            assert out == []
    slow = next(n for n, d in g.nodes(data=True) if d["state"] == "SlowStart")
    assert g.nodes[slow]["fraction"] == pytest.approx(model.stats.fraction_of("SlowStart"))
    assert g.graph["algorithm"] == "observed"


def test_dot_is_fig13_style(model: Model) -> None:
    dot = model_to_dot(model)
    assert '"INITIAL" [label="INITIAL", shape=box];' in dot
    assert '"TERMINAL" [label="TERMINAL", shape=diamond];' in dot
    assert '<FONT COLOR="#c0001a" POINT-SIZE="11">' in dot
    frac = model.stats.fraction_of("ApplicationLimited")
    assert frac is not None and "ApplicationLimited<BR/>" in dot
    assert f">{short_pct(frac)} of time</FONT>" in dot
    assert '"INITIAL" -> "Init" [label="100%", penwidth=4.00];' in dot
    assert "0.00" not in dot.replace("penwidth", "")  # percentages, never a bare 0.00


def test_edges_are_as_wide_as_they_are_likely_and_paired_labels_point_at_their_edge(
    model: Model,
) -> None:
    """An edge's width grows with its probability; an edge with one in the opposite direction
    ties its label to itself (Graphviz ``decorate``), the others do not."""
    dot = model_to_dot(model)
    names = node_names(model.nodes)
    edges = model.edges.iter_rows(named=True)
    pairs = {(e["source"], e["target"]) for e in model.edges.iter_rows(named=True)}
    widths = []
    for e in edges:
        line = next(
            x for x in dot.splitlines()
            if x.startswith(f'  "{names[e["source"]]}" -> "{names[e["target"]]}" ')
        )  # fmt: skip
        widths.append((e["probability"], float(re.search(r"penwidth=([\d.]+)", line)[1])))  # type: ignore[index]
        assert ("decorate=true" in line) == ((e["target"], e["source"]) in pairs), line
    widths.sort()
    assert [w for _, w in widths] == sorted(w for _, w in widths)
    assert any((t, s) in pairs for s, t in pairs)  # the figure has opposite edges


@pytest.mark.parametrize(
    ("x", "text"),
    [(None, "–"), (0.0, "0%"), (0.0004, "<0.1%"), (0.001, "0.1%"), (0.0423, "4.2%"),
     (0.0996, "10%"), (0.4249, "42%"), (1.0, "100%")],
)  # fmt: skip
def test_percentages(x: float | None, text: str) -> None:
    assert short_pct(x) == text


@given(st.floats(0, 1))
def test_percentages_never_read_zero_for_a_positive_share(x: float) -> None:
    text = short_pct(x)
    assert text.endswith("%")
    assert (text == "0%") == (x == 0)


def test_node_names_are_states_and_unique(model: Model) -> None:
    names = node_names(model.nodes)
    assert len(set(names.values())) == len(names)
    assert names[0] == "INITIAL" and "SlowStart" in names.values()
    extra = pl.DataFrame({"id": [99], "state": ["SlowStart"], "events": [1]})
    two = node_names(pl.concat([model.nodes, extra]))
    assert {"SlowStart 1", "SlowStart 2"} <= set(two.values()) and "SlowStart" not in two.values()


def test_loss_states_have_distinct_colours() -> None:
    loss = ["Recovery", "TailLossProbe", "RetransmissionTimeout"]
    colours = [state_colour(s) for s in loss]
    assert len(set(colours)) == 3

    def rgb(c: str) -> tuple[int, ...]:
        return tuple(int(c[i : i + 2], 16) for i in (1, 3, 5))

    for i, a in enumerate(colours):
        for b in colours[i + 1 :]:
            assert sum(abs(x - y) for x, y in zip(rgb(a), rgb(b), strict=True)) > 150, (a, b)


@pytest.mark.parametrize(
    ("fmt", "magic"), [("svg", b"<svg"), ("png", b"\x89PNG"), ("pdf", b"%PDF")]
)
def test_render_uses_graphviz(model: Model, fmt: str, magic: bytes) -> None:
    out = render_model(model, format=fmt)
    assert magic in out[:512]
    if fmt == "svg":
        assert b"CongestionAvoidance" in out and b'fill="#c0001a"' in out


def test_render_rejects_unknown_format(model: Model) -> None:
    with pytest.raises(QuicsmError, match="choose one of svg, png, pdf"):
        render_model(model, format="gif")


def test_missing_dot_is_a_clear_error(model: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    with pytest.raises(QuicsmError, match=r"needs Graphviz's `dot` program"):
        render_model(model, format="svg")
    assert model_svg(model) is None


def test_jupyter_shows_a_model_as_its_diagram(model: Model) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    import quicsm

    shell = InteractiveShell.instance()
    try:
        quicsm.register_jupyter(shell)
        data, _ = shell.display_formatter.format(model)
    finally:
        InteractiveShell.clear_instance()
    assert "<svg" in data["image/svg+xml"]
    assert "ApplicationLimited" in data["image/svg+xml"]


def test_split_states_are_marked() -> None:
    m = infer(fig13_transitions(), algorithm="observed")
    nodes = pl.concat([m.nodes, pl.DataFrame({"id": [99], "state": ["SlowStart"], "events": [1]})])
    two = Model(nodes=nodes, edges=m.edges, stats=m.stats)
    dot = model_to_dot(two)
    frac = m.stats.fraction_of("SlowStart")
    visits = m.nodes.filter(pl.col("state") == "SlowStart")["events"][0]
    # each SlowStart node: the state's total, labelled, and the node's own share of the visits
    assert dot.count(f">state: {short_pct(frac)} of time</FONT>") == 2
    assert f">node: {short_pct(1 / (visits + 1))} of its visits</FONT>" in dot
    assert f">node: {short_pct(visits / (visits + 1))} of its visits</FONT>" in dot
    assert "each node's share of its visits" in dot


# -- tables and ids ---------------------------------------------------------------------------


def test_bad_tables_are_rejected() -> None:
    with pytest.raises(ModelError, match="do not match their schemas"):
        Model(nodes=pl.DataFrame({"id": ["x"]}), edges=pl.DataFrame())


@settings(max_examples=50, deadline=None)
@given(st.permutations(list(range(12))))
def test_renumber_gives_stable_ids_whatever_the_input_ids(perm: list[int]) -> None:
    m = infer(fig13_transitions(), algorithm="observed")
    old = m.nodes["id"].to_list()
    mapping = dict(zip(old, perm[: len(old)], strict=True))
    nodes = m.nodes.with_columns(pl.col("id").replace_strict(mapping)).sample(
        fraction=1.0, shuffle=True, seed=perm[0]
    )
    edges = m.edges.with_columns(
        pl.col("source").replace_strict(mapping), pl.col("target").replace_strict(mapping)
    )
    n2, e2 = renumber(nodes, edges)
    assert n2.equals(m.nodes)
    assert e2.equals(m.edges)


def test_renumber_needs_one_initial_and_terminal() -> None:
    nodes = pl.DataFrame({"id": [0, 1], "state": ["INITIAL", "Init"], "events": [1, 1]})
    with pytest.raises(ModelError, match="exactly one TERMINAL node, got 0"):
        renumber(
            nodes,
            pl.DataFrame(
                schema={
                    "source": pl.Int64,
                    "target": pl.Int64,
                    "count": pl.Int64,
                    "probability": pl.Float64,
                }
            ),
        )


@given(st.sampled_from(["CongestionAvoidanceMaxed", "RetransmissionTimeout", "SlowStart",
                        "ApplicationLimited", "CongestionAvoidance", "Init"]))  # fmt: skip
def test_compact_labels_break_long_names_at_a_seam_and_keep_them_whole(state: str) -> None:
    from quicsm.render.dot import WRAP_NAMES_OVER, node_label

    label = node_label(state, 0.5, wrap=True)
    name = label[1:].split("<BR/><FONT")[0]
    assert name.replace("-<BR/>", "") == state
    assert ("<BR/>" in name) == (len(state) > WRAP_NAMES_OVER)
    assert node_label(state, 0.5).startswith(f"<{state}<BR/><FONT")


def test_busy_models_are_drawn_compact(model: Model) -> None:
    """A model of more than COMPACT_OVER nodes is laid out closer (the Fig. 13 model is not)."""
    from quicsm.render.dot import COMPACT_OVER, graph_header

    assert model.nodes.height <= COMPACT_OVER
    assert "nodesep=0.35" in model_to_dot(model)
    assert "nodesep=0.05" in "\n".join(graph_header("x", compact=True))
