"""ApplicationLimited split by cause in the state machine (``split_app_limited``): on the
stacks' real traces the parts' time is ApplicationLimited's, nothing else moves; the
relabelling as a property; the CLI end to end."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.cli import main
from quicsm.core.frames import normalize_transitions
from quicsm.core.states import APP_LIMITED, APP_LIMITED_CAUSES, CANONICAL_STATES, PAPER_STATES
from quicsm.extract.app_limited_split import STATE_OF_CAUSE, split_app_limited
from quicsm.extract.read import read_transitions
from quicsm.extract.sendable import CAUSES, PACING, SendableTimeline
from quicsm.stats.descriptive import time_in_state

ROOT = Path(__file__).resolve().parents[1]
STACKS = ROOT / "traces" / "stacks" / "stacks.qlog"
QUIC_GO = ROOT / "traces" / "quic-go-v0.65.0.qlog"


def _collapsed(frame: pl.DataFrame) -> list[tuple[str, list[str]]]:
    """Each trace's states in order, every cause of ApplicationLimited read as it, runs of it
    made one."""
    out = []
    for (trace,), part in frame.group_by("trace", maintain_order=True):
        states: list[str] = []
        for s in part.get_column("state").cast(pl.String):
            s = APP_LIMITED if s in APP_LIMITED_CAUSES else s
            if not states or states[-1] != s:
                states.append(s)
        out.append((str(trace), states))
    return out


def _times(frame: pl.DataFrame) -> dict[tuple[str, str], float]:
    tis = time_in_state(frame).group_by("trace", "state").agg(pl.col("duration_ms").sum())
    return {
        (str(t), str(s)): float(d)
        for t, s, d in tis.with_columns(pl.col("state").cast(pl.String)).iter_rows()
    }


@pytest.fixture(scope="module", params=[STACKS, QUIC_GO], ids=["stacks", "quic-go"])
def both(request: pytest.FixtureRequest) -> tuple[pl.DataFrame, pl.DataFrame]:
    path = request.param
    return read_transitions(path), read_transitions(path, split_app_limited=True)


def test_default_states_unchanged() -> None:
    """The causes are appended: the paper's states keep their codes and order."""
    assert CANONICAL_STATES[: len(PAPER_STATES)] == PAPER_STATES
    assert CANONICAL_STATES[-len(APP_LIMITED_CAUSES) :] == APP_LIMITED_CAUSES
    assert set(STATE_OF_CAUSE) == set(CAUSES)


@pytest.mark.slow
def test_real_traces_parts_sum_to_application_limited(
    both: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    plain, split = both
    assert APP_LIMITED not in split.get_column("state").cast(pl.String).to_list()
    assert plain.filter(pl.col("state") == APP_LIMITED).height > 0
    before, after = _times(plain), _times(split)
    traces = {t for t, _ in before}
    assert traces == {t for t, _ in after}
    for trace in traces:
        whole = before.get((trace, APP_LIMITED), 0.0)
        parts = sum(after.get((trace, c), 0.0) for c in APP_LIMITED_CAUSES)
        assert parts == pytest.approx(whole, abs=1e-6), trace
    others = {k: v for k, v in before.items() if k[1] != APP_LIMITED}
    assert {k: v for k, v in after.items() if k[1] not in APP_LIMITED_CAUSES} == others


@pytest.mark.slow
def test_real_traces_other_transitions_unchanged(
    both: tuple[pl.DataFrame, pl.DataFrame],
) -> None:
    plain, split = both
    assert _collapsed(split) == _collapsed(plain)
    rest = pl.col("state").cast(pl.String).is_in([APP_LIMITED, *APP_LIMITED_CAUSES]).not_()
    assert split.filter(rest).equals(plain.filter(rest))
    assert split.schema == plain.schema


@pytest.mark.slow
def test_stacks_name_causes() -> None:
    """quic-go and aioquic log STREAM frames: some of their ApplicationLimited time is told
    (application or flow control), not all unknown."""
    split = read_transitions(STACKS, split_app_limited=True)
    states = set(split.get_column("state").cast(pl.String))
    assert "ApplicationLimited (application)" in states


@pytest.mark.slow
def test_account_same_with_the_split(both: tuple[pl.DataFrame, pl.DataFrame]) -> None:
    """The account (its ApplicationLimited time and parts) reads a split model's parts as the
    one visit they were: the same with and without the option."""
    from quicsm.extract.account import read_account
    from quicsm.extract.read import read_metrics, read_traces

    plain, split = both
    path = str(plain.get_column("file")[0])
    metrics, traces = read_metrics(path), read_traces(path)
    a, b = read_account(plain, metrics, traces), read_account(split, metrics, traces)
    columns = [c for c in a.columns if c.startswith("app_limited")]
    assert columns and a.select(columns).equals(b.select(columns))
    assert a.get_column("app_limited_ms").sum() > 0


# -- the relabelling as a property ---------------------------------------------------------

_CAUSES = [c for c in CAUSES if c != PACING]
_STATES = ["SlowStart", "CongestionAvoidance", APP_LIMITED, "Recovery"]


@st.composite
def _trace(draw: st.DrawFn) -> tuple[pl.DataFrame, SendableTimeline | None]:
    n = draw(st.integers(1, 12))
    gaps = draw(st.lists(st.integers(0, 50), min_size=n, max_size=n))
    states = draw(st.lists(st.sampled_from(_STATES), min_size=n, max_size=n))
    times = [float(sum(gaps[: i + 1])) for i in range(n)]
    end = times[-1] + draw(st.integers(0, 50))
    triggers = draw(
        st.lists(st.sampled_from([None, "ack", "spurious_loss"]), min_size=n, max_size=n)
    )
    frame = normalize_transitions(
        pl.DataFrame(
            {
                "trace": ["t#0000"] * n,
                "time_ms": times,
                "state": states,
                "trigger": pl.Series(triggers, dtype=pl.String),
                "end_ms": [end] * n,
            }
        )
    )
    if draw(st.booleans()):
        return frame, None
    k = draw(st.integers(1, 8))
    starts = sorted(set(draw(st.lists(st.integers(1, 400), min_size=k - 1, max_size=k - 1))))
    causes = draw(st.lists(st.sampled_from(_CAUSES), min_size=len(starts) + 1))
    causes = causes[: len(starts) + 1]
    timeline = SendableTimeline(
        times=(0.0, *map(float, starts)),
        causes=tuple(causes),
        logged=(False,) * len(causes),
        bytes_sent=0,
        blocked_frames=0,
        limit_frames=0,
        initial_limits=False,
    )
    return frame, timeline


@settings(max_examples=200, deadline=None)
@given(_trace())
def test_relabelling_keeps_time_and_order(
    drawn: tuple[pl.DataFrame, SendableTimeline | None],
) -> None:
    frame, timeline = drawn
    split = split_app_limited(frame, {"t#0000": timeline})
    assert split.schema == frame.schema
    assert _collapsed(split) == _collapsed(frame)
    before, after = _times(frame), _times(split)
    whole = before.get(("t#0000", APP_LIMITED), 0.0)
    parts = {c: after.get(("t#0000", c), 0.0) for c in APP_LIMITED_CAUSES}
    assert sum(parts.values()) == pytest.approx(whole, abs=1e-9)
    assert {k: v for k, v in after.items() if k[1] not in APP_LIMITED_CAUSES} == {
        k: v for k, v in before.items() if k[1] != APP_LIMITED
    }
    states = split.get_column("state").cast(pl.String).to_list()
    if timeline is None:  # nothing told: all unknown
        assert APP_LIMITED not in states
        assert parts["ApplicationLimited (unknown)"] == pytest.approx(whole, abs=1e-9)
        return
    # each part's time is the time the timeline gives its cause within the visits
    cut = [*timeline.times[1:], float("inf")]
    rows = frame.with_columns(
        pl.col("time_ms").shift(-1).fill_null(pl.col("end_ms")).alias("until")
    ).filter(pl.col("state") == APP_LIMITED)
    expected = dict.fromkeys(APP_LIMITED_CAUSES, 0.0)
    for a, b in rows.select("time_ms", "until").iter_rows():
        for start, stop, cause in zip(timeline.times, cut, timeline.causes, strict=True):
            expected[STATE_OF_CAUSE[cause]] += max(0.0, min(b, stop) - max(a, start))
    assert parts == pytest.approx(expected, abs=1e-9)
    # the first part of each visit keeps its trigger, the others have none
    al = frame.filter(pl.col("state") == APP_LIMITED)
    parts_rows = split.filter(pl.col("state").cast(pl.String).is_in(APP_LIMITED_CAUSES))
    assert parts_rows.get_column("trigger").drop_nulls().to_list() == (
        al.get_column("trigger").drop_nulls().to_list()
    )
    # no two consecutive rows of one trace have the same state
    assert all(x != y for x, y in zip(states, states[1:], strict=False))


# -- the CLI end to end --------------------------------------------------------------------


@pytest.mark.slow
def test_cli_infer_renders_split_model(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["infer", str(STACKS), "--split-app-limited", "--format", "svg", "--no-cache"]
        + ["-o", str(out), "-q"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    model = json.loads((out / "model.json").read_text())
    text = json.dumps(model)
    assert "ApplicationLimited (application)" in text
    assert '"ApplicationLimited"' not in text
    svg = (out / "model.svg").read_text()
    assert "ApplicationLimited (application)" in svg
    stats = pl.read_csv(out / "stats.csv")
    assert stats.height > 0


@pytest.mark.slow
def test_cli_states_and_diff_split(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["states", f"{STACKS}#0", "--split-app-limited", "--format", "csv", "--no-cache"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    states = set(pl.read_csv(result.stdout.encode()).get_column("state"))
    assert APP_LIMITED not in states
    report = tmp_path / "diff.json"
    result = CliRunner().invoke(
        main,
        ["diff", str(STACKS), "--by", "version", "--where", "stack=quic-go"]
        + ["--where", "cc_algorithm=newreno", "--split-app-limited", "--no-cache"]
        + ["--format", "json", "-o", str(report)],
        catch_exceptions=False,
    )
    assert result.exit_code in (0, 1), result.output
    text = report.read_text()
    assert "ApplicationLimited (application)" in text
    assert '"ApplicationLimited"' not in text


@pytest.mark.slow
def test_compare_api_splits() -> None:
    """``compare_by_label(..., split_app_limited=True)`` (no engine reader): both groups'
    models carry the causes, and their accounts the same ApplicationLimited time as the
    states' parts."""
    from quicsm.compare.load import compare_by_label

    (comp,) = compare_by_label(
        [str(STACKS)],
        "version",
        where={"stack": "quic-go", "cc_algorithm": "newreno"},
        split_app_limited=True,
    )
    for group in (comp.a, comp.b):
        states = set(group.transitions.get_column("state").cast(pl.String))
        assert APP_LIMITED not in states and states & set(APP_LIMITED_CAUSES)
        parts = sum(v for (_, s), v in _times(group.transitions).items() if s in APP_LIMITED_CAUSES)
        assert group.account is not None
        assert group.account.get_column("app_limited_ms").sum() == pytest.approx(parts)


@pytest.mark.slow
def test_cli_report_split(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    result = CliRunner().invoke(
        main,
        ["report", str(STACKS), "--by", "version", "--where", "stack=quic-go"]
        + ["--where", "cc_algorithm=newreno", "--split-app-limited", "--no-cache"]
        + ["-o", str(page)],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "ApplicationLimited (application)" in html
    assert "ApplicationLimited (flow control)" in html
