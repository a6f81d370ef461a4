"""``quicsm plot``: connections over time, with their congestion states."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from quicsm.cli.output_options import follow_symlinks_option
from quicsm.cli.progress import reading
from quicsm.cli.report_warnings import print_warnings
from quicsm.cli.trace_options import lenient_option, selection, where_option
from quicsm.core.atomic import checked_target, write_file
from quicsm.core.errors import InputError

if TYPE_CHECKING:
    from collections.abc import Sequence

    import polars as pl

    from quicsm.core.diagnostics import Diagnostics
    from quicsm.extract.raw_events import TraceRecords
    from quicsm.qlog.paths import PathLike
    from quicsm.render.connection import ConnectionSeries

FORMATS = ("html", "svg", "png")
#: connections one plot draws at most (as small multiples); trace ids listed past it
MAX_CONNECTIONS = 12


@click.command("plot")
@click.argument("paths", nargs=-1, required=True)
@where_option
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("plot.html"),
    show_default=True,
    help="File to write.",
)
@follow_symlinks_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="html (interactive: fits the page's width; wheel zooms, drag pans, shift-drag zooms "
    "to a rectangle, the y axes refit; "
    "click a mark for the event it was drawn from; with a time-in-state table), svg or png "
    "(static); default: "
    "from the file suffix.",
)
@click.option(
    "--scale",
    type=click.FloatRange(0.25, 8),
    default=2.0,
    show_default=True,
    help="PNG pixels per chart unit.",
)
@lenient_option
def plot_command(
    paths: tuple[str, ...],
    where: tuple[str, ...],
    output: Path,
    follow_symlinks: bool,
    fmt: str | None,
    scale: float,
    lenient: bool,
) -> None:
    """Plot connections over time, in panels sharing one time axis: congestion window, bytes
    in flight and ssthresh; smoothed and minimum RTT with every RTT sample; the pacing rate
    when the trace logs it; packets by number: each data packet sent, the largest one
    acknowledged, those declared lost, spurious losses (declared lost, acknowledged later)
    marked apart; the main stream's data by byte offset (sent, acknowledged, declared lost)
    with the MAX_DATA and MAX_STREAM_DATA limits, where the trace logs STREAM frames; loss and
    probe-timeout events. Nearby losses merge into one mark with their count; "not logged"
    marks an event kind the producer never logs. The congestion state is drawn as coloured
    bands (named on the bands in svg and png).

    Name traces as FILE#N (N counts the file's traces from 0, as `quicsm states` shows), or
    narrow PATHS down with --where; several traces are drawn one below the other (at most 12).

    \b
    quicsm plot 'traces/quic-go-v0.65.0.qlog#0' -o conn.html
    quicsm plot 'traces/quic-go-v0.48.2.qlog#0' 'traces/quic-go-v0.65.0.qlog#0' -o two.html
    quicsm plot traces/aioquic-1.7.2.qlog --where scenario=loss1 --where run=1 \\
        --where vantage=server -o loss.svg
    """
    checked_target(output, follow_symlinks=follow_symlinks)  # refused before any work
    from quicsm.core.diagnostics import Diagnostics
    from quicsm.extract.read import read_metrics, read_transitions
    from quicsm.render import charts

    if fmt is None:
        suffix = output.suffix.lower().lstrip(".")
        fmt = suffix if suffix in FORMATS else "html"
    on_error = "skip" if lenient else "raise"
    diagnostics = Diagnostics()
    with reading("reading the traces") as stage:
        chosen = selection(paths, where=where, lenient=lenient)
        transitions = chosen.keep(
            read_transitions(chosen.to_read, on_error=on_error, diagnostics=diagnostics)
        )
        traces = _in_named_order(
            [str(t) for t in transitions["trace"].unique(maintain_order=True).to_list()], paths
        )
        _check_count(traces, paths)
        stage.update("reading their metrics")
        metrics = chosen.keep(read_metrics(chosen.to_read, on_error=on_error))
        stage.update("reading their packets and taking each connection's account")
        series = connections(
            chosen.to_read,
            traces,
            transitions=transitions,
            metrics=metrics,
            labels=_labels(chosen, on_error=on_error),
            on_error=on_error,
            diagnostics=diagnostics,
            with_records=fmt == "html",
        )
        stage.update("drawing")
        if fmt == "html":
            data: bytes = charts.connection_page(series).encode()
        else:  # static: about four points per pixel column are all that can show
            spec = charts.connections_spec(series, points=charts.PLOT_WIDTH, static=True)
            if fmt == "svg":
                data = charts.to_svg(spec, css_class="connection").encode()
            else:
                data = charts.to_png(spec, scale=scale)
    print_warnings(diagnostics)
    write_file(output, data, what="the plot", follow_symlinks=follow_symlinks)
    click.echo(f"wrote {output} ({', '.join(traces)})", err=True)


def _in_named_order(traces: list[str], paths: tuple[str, ...]) -> list[str]:
    """``traces`` in the order the user named them as FILE#N; the rest after, as read."""
    named: dict[tuple[str, int], int] = {}
    for i, path in enumerate(paths):
        file, sep, number = path.rpartition("#")
        if sep and number.isdigit():
            named.setdefault((file, int(number)), i)

    def rank(trace: str) -> int:
        file, _, number = trace.rpartition("#")
        key = (file, int(number)) if number.isdigit() else None
        return named.get(key, len(paths)) if key else len(paths)

    return sorted(traces, key=rank)  # stable: unnamed traces keep their order


def connections(
    paths: Sequence[PathLike],
    traces: list[str],
    *,
    transitions: pl.DataFrame,
    metrics: pl.DataFrame,
    labels: dict[str, dict[str, object]],
    on_error: str,
    diagnostics: Diagnostics,
    with_records: bool = False,
) -> list[ConnectionSeries]:
    """What ``quicsm plot`` draws of each trace id of ``traces``, from the frames read: its
    packets are read here, and its counts are the connection account's; ``with_records``: its
    event records too (an interactive plot's marks open them)."""
    from quicsm.extract.account import facts_of, read_account
    from quicsm.extract.packets import read_packet_timelines
    from quicsm.render.connection import connection_series

    packets = read_packet_timelines(paths, traces, on_error=on_error, diagnostics=diagnostics)
    account = read_account(
        transitions,
        metrics,
        _traces_frame(labels),
        on_error=on_error,
        diagnostics=diagnostics,
        packets=packets,
    )
    return [
        connection_series(
            transitions,
            metrics,
            trace,
            title=_title(labels.get(trace, {})),
            not_logged=_not_logged(labels.get(trace, {})),
            packets=packets.get(trace),
            account=facts_of(account, trace),
            records=_records(trace, paths) if with_records else None,
        )
        for trace in traces
    ]


def _records(trace: str, paths: Sequence[PathLike]) -> TraceRecords | None:
    """The event records of trace id ``trace`` (``<file>#<n>``), numbered as in its file; read
    from where the trace begins when ``paths`` locate it (the file's index), not from the
    file's first record."""
    from quicsm.extract.raw_events import trace_records
    from quicsm.qlog.paths import TraceSpans

    file, _, number = trace.rpartition("#")
    if not number.isdigit():
        return None
    starts = [start for p in paths if isinstance(p, TraceSpans) and p.path == file
              for n, start, _ in p.spans if n == int(number)]  # fmt: skip
    return trace_records(file, int(number), start=starts[0] if starts else None)


def _check_count(traces: list[str], paths: tuple[str, ...]) -> None:
    if not traces:
        raise InputError(f"no trace with states under {', '.join(paths)}")
    if len(traces) <= MAX_CONNECTIONS:
        return
    shown = ", ".join(traces[:MAX_CONNECTIONS]) + " ..."
    raise InputError(
        f"plot draws at most {MAX_CONNECTIONS} connections, but {len(traces)} traces were "
        f"selected ({shown}); name them as FILE#N or narrow with --where (`quicsm labels` lists "
        "the labels)"
    )


def _labels(chosen: object, *, on_error: str) -> dict[str, dict[str, object]]:
    """trace id -> its labels (title, code_version, stack, scenario, run, ...)."""
    import orjson

    from quicsm.compare.selection import Selection
    from quicsm.extract.read import read_traces

    assert isinstance(chosen, Selection)
    frame = chosen.traces
    if frame is None:
        frame = read_traces(chosen.paths, on_error=on_error)
    return {str(t): orjson.loads(raw) for t, raw in frame.select("trace", "labels").iter_rows()}


def _traces_frame(labels: dict[str, dict[str, object]]) -> pl.DataFrame:
    """``trace, labels`` (JSON text) of the chosen traces, as the account reads them."""
    import orjson
    import polars as pl

    return pl.DataFrame(
        {
            "trace": list(labels),
            "labels": [
                orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode() for v in labels.values()
            ],
        },
        schema={"trace": pl.String, "labels": pl.String},
    )


def _title(labels: dict[str, object]) -> str:
    """A one-line description from the trace's labels (scenario, stack, version, run)."""
    parts = [f"{k}={labels[k]}" for k in ("stack", "version", "scenario", "run") if k in labels]
    return ", ".join(parts)


def _not_logged(labels: dict[str, object]) -> frozenset[str]:
    """Event kinds the trace's producer never logs (from its profile)."""
    from quicsm.extract.profiles import detect_profile

    title, version = labels.get("title"), labels.get("code_version")
    profile = detect_profile(
        title=title if isinstance(title, str) else None,
        code_version=version if isinstance(version, str) else None,
        labels=labels,
    )
    out = set()
    if not profile.logs_packet_lost:
        out.add("packet_lost")
    if not profile.logs_pto:
        out.add("pto")
    return frozenset(out)
