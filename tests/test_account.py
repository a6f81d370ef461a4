"""The connection account (``quicsm.extract.account``): one set of counts per connection, each
with its provenance, that every view reads; and the metric stand-ins (sentinels, placeholders)
that no output may show (``quicsm.extract.sentinels``)."""

from __future__ import annotations

import html
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.cli import main
from quicsm.compare.app_limited import BREAKDOWN_LINES
from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.extract.account import (
    ABSENT,
    ACCOUNT_SCHEMA,
    APP_LIMITED_PARTS,
    FACTS,
    LOGGED,
    METRICS,
    PACKETS,
    read_account,
)
from quicsm.extract.read import read_metrics, read_traces, read_transitions
from quicsm.extract.sentinels import INITIAL_RTT_MS, SSTHRESH_UNSET_FROM, normalise_part

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"
V48, V65 = TRACES / "quic-go-v0.48.2.qlog", TRACES / "quic-go-v0.65.0.qlog"
JITTER = ["--where", "scenario=jitter", "--where", "vantage=server"]
SPURIOUS = "spurious losses (declared lost, later acknowledged)"

#: every producer's qlog: the shipped corpus and the test fixtures
PRODUCER_FILES = sorted(
    p
    for p in [*TRACES.rglob("*"), *(ROOT / "tests" / "fixtures").rglob("*")]
    if p.is_file()
    and p.suffix not in (".csv", ".parquet", ".json", ".md", ".py")
    and "truncated" not in p.name
)

#: the counts every view states, and their words in the report's loss table
CROSS_VIEW = ("losses", "spurious_losses", "ptos", "recovery_episodes")
LOSS_TABLE = {
    "losses": "packets declared lost",
    "spurious_losses": SPURIOUS,
    "ptos": "probe timeouts",
}


def _quiet(call: Any, *args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        return call(*args, **kwargs)


# -- stand-ins ------------------------------------------------------------------------------


def _raw_has_stand_ins(path: Path) -> bool:
    """Whether the file's metric events hold a stand-in at all (so the check below can fail)."""
    from quicsm.qlog.source import read_qlog

    read = read_qlog(path, want_metrics=True, lenient=True)
    for trace in read.traces:
        for event in trace.metrics:
            v = event.values
            if (v.get("ssthresh_bytes") or 0) >= SSTHRESH_UNSET_FROM:
                return True
            if v.get("smoothed_rtt_ms") in (0, INITIAL_RTT_MS, INITIAL_RTT_MS / 1000):
                return True
    return False


def _stand_ins(metrics: pl.DataFrame) -> list[str]:
    """What in a metrics frame is a stand-in, not a measurement (empty: none)."""
    found = []
    if metrics.height == 0:
        return found
    big = metrics.filter(pl.col("ssthresh_bytes") >= SSTHRESH_UNSET_FROM).height
    if big:
        found.append(f"{big} ssthresh values of u64::MAX")
    for column in ("smoothed_rtt_ms", "min_rtt_ms", "latest_rtt_ms", "pacing_rate_bps"):
        zeros = metrics.filter(pl.col(column) == 0).height
        if zeros:
            found.append(f"{zeros} zero {column}")
    for column in ("smoothed_rtt_ms", "min_rtt_ms"):
        first = (
            metrics.drop_nulls(column)
            .group_by("trace", maintain_order=True)
            .agg(pl.col(column).first())
            .filter((pl.col(column) - INITIAL_RTT_MS).abs() < 1e-6)
        )
        if first.height:
            found.append(f"{first.height} traces whose first {column} is the 333 ms placeholder")
    return found


@pytest.mark.slow
@pytest.mark.parametrize("path", PRODUCER_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_stand_in_reaches_the_metrics_frame(path: Path) -> None:
    """Every producer's fixture: no u64::MAX ssthresh, no 333 ms initial-RTT placeholder, no
    zero RTT or pacing rate in the metrics frame (plots, the report and identify read it)."""
    metrics = _quiet(read_metrics, path, on_error="skip")
    assert _stand_ins(metrics) == []


def test_the_stand_ins_are_in_the_raw_files_the_check_reads() -> None:
    """The check above can fail: the shipped stacks' quiche and quinn traces log u64::MAX and
    the placeholder, and quic-go's zero RTTs before the first sample."""
    assert _raw_has_stand_ins(TRACES / "stacks" / "stacks.qlog")
    assert _raw_has_stand_ins(V48)


def test_plot_of_quiche_and_quinn_draws_no_stand_in() -> None:
    """The window axis of a stock quiche trace: its ssthresh is set values only (it was 0-20E,
    528 values of 1.8e19), its RTTs start at the first sample, not at 333 ms; quinn's RTTs in
    ms. Checked on the chart's data, as drawn."""
    from quicsm.cli.plot import connections
    from quicsm.render import charts

    path = TRACES / "stacks" / "stacks.qlog"
    labels = {
        str(t): orjson.loads(raw)
        for t, raw in _quiet(read_traces, path).select("trace", "labels").iter_rows()
    }
    chosen = [t for t, v in labels.items() if v.get("stack") in ("quiche", "quinn")][::4]
    assert len(chosen) >= 4
    transitions, metrics = _quiet(read_transitions, path), _quiet(read_metrics, path)
    series = connections(
        [path],
        chosen,
        transitions=transitions,
        metrics=metrics,
        labels=labels,
        on_error="raise",
        diagnostics=Diagnostics(),
    )
    for s in series:
        for column, (_, values) in s.lines.items():
            assert all(v < SSTHRESH_UNSET_FROM for v in values), (s.trace, column)
            if column.endswith("rtt_ms"):
                assert values[0] != INITIAL_RTT_MS and 0.0 not in values, (s.trace, column)
                assert np.median(values) > 1.0, (s.trace, column)  # ms, not seconds
    spec = orjson.dumps(charts.connections_spec(series, points=charts.PLOT_WIDTH, static=True))
    assert b"1.8446744073709552e19" not in spec and b"18446744073709551615" not in spec


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([0.0, 333.0, 0.333, 12.5, 40.0, 2.0**64, 15000.0]),
            st.booleans(),
        ),
        min_size=1,
        max_size=40,
    ),
    st.integers(1, 8),
)
def test_normalising_in_parts_is_normalising_the_whole(
    values: list[tuple[float, bool]], block: int
) -> None:
    """Part by part (a trace read in blocks) gives what the whole trace gives, and no stand-in
    is left: property over arbitrary sequences of RTTs and ssthresh values."""

    def columns(rows: list[tuple[float, bool]]) -> dict[str, pl.Series]:
        rtt = [v if present else None for v, present in rows]
        ssthresh = [v for v, _ in rows]
        return {
            "smoothed_rtt_ms": pl.Series(rtt, dtype=pl.Float64),
            "min_rtt_ms": pl.Series(rtt, dtype=pl.Float64),
            "latest_rtt_ms": pl.Series(rtt, dtype=pl.Float64),
            "ssthresh_bytes": pl.Series(ssthresh, dtype=pl.Float64),
            "pacing_rate_bps": pl.Series(ssthresh, dtype=pl.Float64),
        }

    whole = columns(values)
    normalise_part(whole, {})
    carry: dict[str, Any] = {}
    parts: dict[str, list[float | None]] = {k: [] for k in whole}
    for i in range(0, len(values), block):
        part = columns(values[i : i + block])
        normalise_part(part, carry)
        for k, v in part.items():
            parts[k] += v.to_list()
    for k, v in whole.items():
        assert parts[k] == v.to_list(), k
        known = [x for x in v.to_list() if x is not None]
        if k == "ssthresh_bytes":
            assert all(x < SSTHRESH_UNSET_FROM for x in known)
        else:
            assert 0.0 not in known
    rtt = [x for x in whole["smoothed_rtt_ms"].to_list() if x is not None]
    assert not rtt or abs(rtt[0] - INITIAL_RTT_MS) > 1e-6  # never starts at the placeholder


# -- the account ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stacks_account() -> pl.DataFrame:
    path = TRACES / "stacks" / "stacks.qlog"
    t, m, r = _quiet(read_transitions, path), _quiet(read_metrics, path), _quiet(read_traces, path)
    return read_account(t, m, r)


def test_the_account_gives_every_fact_a_provenance(stacks_account: pl.DataFrame) -> None:
    """One row per trace, the schema's columns; a value exactly when its provenance is not
    absent, and an absent fact says why."""
    a = stacks_account
    assert a.schema == pl.Schema(ACCOUNT_SCHEMA)
    assert a.height == a.get_column("trace").n_unique() > 0
    for fact in FACTS:
        sources = a.get_column(f"{fact}_from")
        assert set(sources.to_list()) <= {LOGGED, PACKETS, METRICS, ABSENT}, fact
        absent = sources == ABSENT
        assert (a.get_column(fact).is_null() == absent).all(), fact
        assert a.filter(absent).get_column(f"{fact}_note").null_count() == 0, fact


def test_when_a_producer_logs_less_the_packets_answer(stacks_account: pl.DataFrame) -> None:
    """quiche logs no packet_lost: its losses come from its packets and say so; quic-go v0.48.2
    logs no spurious_loss: its servers' spurious losses come from packets, "logs none"."""
    quiche = stacks_account.filter(pl.col("producer").str.starts_with("quiche"))
    assert quiche.height
    assert set(quiche.get_column("losses_from")) == {PACKETS}
    assert all("logs no packet_lost" in n for n in quiche.get_column("losses_note"))
    go = stacks_account.filter(
        pl.col("producer").str.contains("v0.48.2") & (pl.col("vantage") == "server")
    )
    assert go.height
    assert set(go.get_column("spurious_losses_from")) == {PACKETS}
    assert set(go.get_column("spurious_losses_note")) == {"quic-go v0.48.2 logs none"}
    assert go.get_column("spurious_losses_logged").sum() == 0


# -- why a sender was short of data --------------------------------------------------------


def test_the_causes_of_application_limited_time_sum_to_it(stacks_account: pl.DataFrame) -> None:
    """Every trace of every shipped stack: application + flow control (connection, stream) +
    pacing + unknown is its ApplicationLimited time (absent parts count 0), which is the time
    in ApplicationLimited the statistics give; no producer logs the pacer's release time."""
    from quicsm.stats.descriptive import time_in_state

    path = TRACES / "stacks" / "stacks.qlog"
    tis = time_in_state(_quiet(read_transitions, path)).filter(
        pl.col("state") == "ApplicationLimited"
    )
    al = {str(t): d for t, d in tis.select("trace", "duration_ms").iter_rows()}
    a = stacks_account
    assert a.get_column("app_limited_ms").sum() > 0
    for row in a.iter_rows(named=True):
        parts = [row[c] or 0.0 for c in APP_LIMITED_PARTS.values()]
        assert math.isclose(sum(parts), row["app_limited_ms"], abs_tol=1e-6), row["trace"]
        assert math.isclose(row["app_limited_ms"], al.get(row["trace"], 0.0), abs_tol=1e-6)
    assert set(a.get_column("app_limited_pacing_ms_from")) == {ABSENT}
    assert all("logs no pacer release time" in n for n in a["app_limited_pacing_ms_note"])
    # quinn's packets carry no frames: its causes are not told, and the note says so
    quinn = a.filter(pl.col("producer").str.starts_with("quinn"))
    assert quinn.height and set(quinn["app_limited_application_ms_from"]) == {ABSENT}
    assert set(quinn["app_limited_unknown_ms_note"]) == {
        "all of it: its packets log no STREAM frames"
    }
    # quiche logs its STREAM frames' lengths as raw.payload_length: read, so told
    quiche = a.filter(pl.col("producer").str.starts_with("quiche"))
    assert set(quiche["app_limited_application_ms_from"]) == {PACKETS}
    assert (quiche["app_limited_application_ms"] > 0).all()


def test_flow_control_is_logged_only_where_blocked_frames_were_sent(
    stacks_account: pl.DataFrame,
) -> None:
    """quic-go sends STREAM_DATA_BLOCKED to slow receivers: those traces have flow-control
    time "logged"; aioquic and quiche, with limits of 32 MB and more for 2 MB, send none and
    are never held (credit arithmetic, "packets")."""
    a = stacks_account
    logged = a.filter(pl.col("flow_control_ms_from") == LOGGED)
    assert logged.height and (logged["flow_control_ms"] > 0).all()
    assert set(logged["producer"].str.split(" ").list.first()) == {"quic-go"}
    for stack in ("aioquic", "quiche"):
        rows = a.filter(pl.col("producer").str.starts_with(stack))
        assert rows.height and set(rows["flow_control_ms_from"]) == {PACKETS}, stack
        assert rows["flow_control_ms"].sum() == 0.0, stack


# -- the jitter comparison ------------------------------------------------------------------


@pytest.fixture(scope="module")
def jitter_json() -> dict[str, Any]:
    result = CliRunner().invoke(
        main, ["diff", str(V48), "--vs", str(V65), *JITTER, "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = orjson.loads(result.stdout)
    return doc


def test_the_jitter_why_puts_v0482_spurious_losses_above_v0650s(
    jitter_json: dict[str, Any],
) -> None:
    """The shipped showcase: v0.48.2 logs no spurious loss, its packets show 103-130 a server
    trace against v0.65.0's 7-25: the "why" says so, with the counts' provenance."""
    why = jitter_json["explanations"][0]
    assert "completion time in jitter" in why["change"]
    spurious = next(v for v in why["evidence"] if v["indicator"] == SPURIOUS)
    assert spurious["a_mean"] > 100 > 30 > spurious["b_mean"] > 5
    assert (spurious["a_from"], spurious["b_from"]) == (PACKETS, PACKETS)
    assert spurious["a_note"] == "quic-go v0.48.2 logs none"
    assert spurious["b_note"] == "quic-go v0.65.0 logs 14.3 per trace"
    assert "from packets: quic-go v0.48.2 logs none" in spurious["sentence"]
    assert spurious["cliffs_delta"] == -1.0  # every v0.65.0 trace below every v0.48.2 one
    # and it leads the why: the false losses first, then how they were declared (reordering)
    assert [v["indicator"] for v in why["evidence"][:2]] == [SPURIOUS, "losses by packet threshold"]
    counted = [a["spurious_losses"] for a in jitter_json["accounts"] if "v0.48.2" in a["trace"]]
    assert len(counted) == 10 and min(counted) >= 100


def test_the_jitter_report_says_the_same(tmp_path: Path) -> None:
    """``quicsm report`` of the same comparison: the sentence with the packets' provenance
    in the HTML, and the loss table's spurious counts from packets."""
    out = tmp_path / "r.html"
    result = CliRunner().invoke(
        main, ["report", str(V48), "--vs", str(V65), *JITTER, "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    page = html.unescape(out.read_text(encoding="utf-8"))
    assert "from packets: quic-go v0.48.2 logs none" in page
    row = page[page.index(SPURIOUS, page.index("Loss detection")) :][:400]
    cells = [float(c) for c in __import__("re").findall(r">([0-9.]+) \(from packets\)<", row)]
    assert len(cells) >= 2 and cells[0] > 100 > 30 > cells[1]


BREAKDOWN = "ApplicationLimited time by cause"


def test_the_diff_json_breaks_application_limited_time_down_by_cause(
    jitter_json: dict[str, Any],
) -> None:
    """The jitter comparison's ``app_limited`` rows: each group's mean per server trace is the
    mean of its traces' accounts in the same JSON, the causes' shares sum to 1 and their means
    to the whole; v0.65.0's senders are held by flow control (its STREAM_DATA_BLOCKED frames,
    "logged"), v0.48.2's never in these traces; pacing is not logged."""
    rows = {r["column"]: r for r in jitter_json["app_limited"]}
    assert list(rows)[0] == "app_limited_ms" and set(APP_LIMITED_PARTS.values()) < set(rows)
    accounts = jitter_json["accounts"]
    for g, version in (("a", "v0.48.2"), ("b", "v0.65.0")):
        mine = [a for a in accounts if version in a["trace"] and a["vantage"] == "server"]
        assert len(mine) == rows["app_limited_ms"][f"{g}_n"] == 10
        for column, row in rows.items():
            values = [a[column] for a in mine if a[column] is not None]
            assert row[f"{g}_traces"] == len(values), column
            if values:
                # the JSON's numbers are rounded to 6 decimals
                assert math.isclose(row[f"{g}_mean_ms"], np.mean(values), abs_tol=1e-5), column
        parts = [rows[c] for c in APP_LIMITED_PARTS.values()]
        shares = [r[f"{g}_share"] for r in parts if r[f"{g}_share"] is not None]
        assert math.isclose(sum(shares), 1.0, abs_tol=1e-5)
        means = [r[f"{g}_mean_ms"] or 0.0 for r in parts]
        assert math.isclose(sum(means), rows["app_limited_ms"][f"{g}_mean_ms"], abs_tol=1e-4)
        assert rows[APP_LIMITED_PARTS["pacing"]][f"{g}_from"] == ABSENT
    held = rows["flow_control_ms"]
    assert held["b_from"] == LOGGED and held["b_mean_ms"] > 50 > 1 > held["a_mean_ms"]


def test_the_report_and_the_diff_show_the_same_breakdown(tmp_path: Path) -> None:
    """``quicsm report`` (Markdown and HTML) and ``quicsm diff --format md`` of the jitter
    comparison: one table, the same cells."""
    runner = CliRunner()
    diff = runner.invoke(main, ["diff", str(V48), "--vs", str(V65), *JITTER, "--format", "md"])
    assert diff.exit_code == 0, diff.output
    md, page = tmp_path / "r.md", tmp_path / "r.html"
    for out in (md, page):
        result = runner.invoke(
            main, ["report", str(V48), "--vs", str(V65), *JITTER, "-o", str(out)]
        )
        assert result.exit_code == 0, result.output
    shown = _table_after(diff.stdout, BREAKDOWN)
    assert shown == _table_after(md.read_text(encoding="utf-8"), BREAKDOWN)
    assert len(shown) == 7 and shown["pacing"] == ["not logged", "not logged"]
    assert "(logged)" in shown["flow control, in any state"][1]
    text = html.unescape(page.read_text(encoding="utf-8"))
    table = text[text.index(BREAKDOWN) :]
    table = table[: table.index("</table>")]
    for line, cells in shown.items():
        row = table[table.index(f"<td>{line}</td>") :]
        assert all(f'<td class="num">{c}</td>' in row[: row.index("</tr>")] for c in cells), line


def _table_after(md: str, title: str) -> dict[str, list[str]]:
    """The Markdown table under the heading ``title``: first cell -> the others."""
    start = md.index(title)
    rows: dict[str, list[str]] = {}
    for line in md[start:].splitlines()[1:]:
        if line.startswith("| ") and not line.startswith("| per "):
            cells = [c.strip() for c in line.strip("| ").split(" | ")]
            rows[cells[0]] = cells[1:]
        elif rows and not line.startswith("|"):
            break
    return rows


# -- one number in every view ---------------------------------------------------------------

CORPUS_A = [str(TRACES / "quic-go-v0.48.2.qlog"), str(TRACES / "aioquic-1.7.2.qlog")]
CORPUS_B = [
    str(TRACES / "quic-go-v0.65.0.qlog"),
    str(TRACES / "notebooks.qlog"),
    str(TRACES / "stacks" / "stacks.qlog"),
]


@pytest.mark.slow
def test_every_view_states_the_same_counts(tmp_path: Path) -> None:
    """For every trace in traces/: losses, spurious losses, probe timeouts and Recovery
    episodes are one number in the diff's JSON, identify's output and the plot's data, and
    the report's loss table is their mean over each group's sender traces."""
    runner = CliRunner()
    result = runner.invoke(main, ["diff", *CORPUS_A, "--vs", *CORPUS_B, "--format", "json"])
    assert result.exit_code == 0, result.output
    diff = {a["trace"]: a for a in orjson.loads(result.stdout)["accounts"]}
    every = {
        str(t)
        for f in [*CORPUS_A, *CORPUS_B]
        for t in _quiet(read_traces, f).get_column("trace").to_list()
    }
    assert set(diff) == every
    result = runner.invoke(main, ["identify", *CORPUS_A, *CORPUS_B, "--format", "json"])
    assert result.exit_code == 0, result.output
    identify = {r["trace"]: r for r in orjson.loads(result.stdout)}
    from quicsm.cli.plot import connections

    plotted: dict[str, dict[str, Any]] = {}
    for f in [*CORPUS_A, *CORPUS_B]:
        transitions, metrics = _quiet(read_transitions, f), _quiet(read_metrics, f)
        labels = {
            str(t): orjson.loads(raw)
            for t, raw in _quiet(read_traces, f).select("trace", "labels").iter_rows()
        }
        ids = [str(t) for t in transitions.get_column("trace").unique(maintain_order=True)]
        for series in connections(
            [f],
            ids,
            transitions=transitions,
            metrics=metrics,
            labels=labels,
            on_error="raise",
            diagnostics=Diagnostics(),
        ):
            plotted[series.trace] = {k: v.value for k, v in series.account.items()}
            said = series.account["spurious_losses"]
            logged_losses = series.account["losses"].source == LOGGED
            if said.source == PACKETS and series.packets is not None and logged_losses:
                # its logged loss declarations, checked against later ACKs: the marks drawn
                assert len(series.spurious_ms) == said.value
    for trace in every:
        for fact in CROSS_VIEW:
            views = (diff[trace][fact], identify[trace][fact], plotted[trace][fact])
            assert views[0] == views[1] == views[2], (trace, fact, views)
            assert diff[trace][f"{fact}_from"] == identify[trace][f"{fact}_from"]
    out = tmp_path / "r.md"
    result = runner.invoke(main, ["report", *CORPUS_A, "--vs", *CORPUS_B, "-o", str(out)])
    assert result.exit_code == 0, result.output
    # the breakdown of ApplicationLimited time: each group's mean over its sender accounts
    breakdown = _table_after(out.read_text(encoding="utf-8"), BREAKDOWN)
    for g, files in (("a", CORPUS_A), ("b", CORPUS_B)):
        senders = [
            a for t, a in diff.items() if t.rsplit("#", 1)[0] in files and a["vantage"] == "server"
        ]
        for column, line in BREAKDOWN_LINES.items():
            values = [a[column] for a in senders if a[column] is not None]
            cell = breakdown[line][0 if g == "a" else 1]
            if not values:
                assert cell == "not logged", (column, g, cell)
                continue
            mean = float(np.mean(values))
            assert math.isclose(float(cell.split(" ")[0]), round(mean, 1), abs_tol=0.051), (
                column,
                g,
                cell,
                mean,
            )
    table = _loss_table(out.read_text(encoding="utf-8"))
    for g, files in (("a", CORPUS_A), ("b", CORPUS_B)):
        senders = [
            a for t, a in diff.items() if t.rsplit("#", 1)[0] in files and a["vantage"] == "server"
        ]
        for fact, word in LOSS_TABLE.items():
            values = [a[fact] for a in senders if a[fact] is not None]
            cell = table[word][0 if g == "a" else 1]
            if not values:
                assert cell == "not logged"
                continue
            mean = float(np.mean(values))
            assert math.isclose(float(cell.split(" ")[0]), round(mean, 1), abs_tol=0.051), (
                fact,
                g,
                cell,
                mean,
            )


def _loss_table(md: str) -> dict[str, list[str]]:
    start = md.index("Loss detection")
    rows = {}
    for line in md[start:].splitlines()[1:]:
        if line.startswith("| ") and not line.startswith("| per trace"):
            cells = [c.strip() for c in line.strip("| ").split(" | ")]
            rows[cells[0]] = cells[1:]
        elif rows and not line.startswith("|"):
            break
    return rows
