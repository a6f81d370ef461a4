"""``quicsm plot``: one connection over time, with its congestion states."""

from __future__ import annotations

from pathlib import Path

import click

from quicsm.cli.progress import reading
from quicsm.cli.report_warnings import print_warnings
from quicsm.cli.trace_options import lenient_option, selection, where_option
from quicsm.core.atomic import checked_target, write_file
from quicsm.core.errors import InputError

FORMATS = ("html", "svg", "png")
#: trace ids listed when a selection holds more than one trace
MAX_LISTED = 10


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
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="html (the plot with a time-in-state table), svg or png (drawn by headless "
    "Chromium); default: from the file suffix.",
)
@lenient_option
def plot_command(
    paths: tuple[str, ...], where: tuple[str, ...], output: Path, fmt: str | None, lenient: bool
) -> None:
    """Plot one connection: congestion window, bytes in flight and ssthresh; smoothed and
    minimum RTT; the pacing rate when the trace logs it — on one time axis, with the congestion
    state as coloured bands, lost packets (×) and probe timeouts (▼) marked.

    Name the trace as FILE#N (N counts the file's traces from 0, as `quicsm states` shows),
    or narrow PATHS down to one trace with --where.

    \b
    quicsm plot 'traces/quic-go-v0.65.0.qlog#0' -o conn.html
    quicsm plot traces/aioquic-1.7.2.qlog --where scenario=loss1 --where run=1 \\
        --where vantage=server -o loss.svg
    """
    checked_target(output)  # refused before any work: a symbolic link or a directory
    from quicsm.core.diagnostics import Diagnostics
    from quicsm.extract.read import read_metrics, read_transitions
    from quicsm.render.plot import connection_series, plot_html, plot_svg

    if fmt is None:
        suffix = output.suffix.lower().lstrip(".")
        fmt = suffix if suffix in FORMATS else "html"
    on_error = "skip" if lenient else "raise"
    diagnostics = Diagnostics()
    with reading("reading the trace") as stage:
        chosen = selection(paths, where=where, lenient=lenient)
        transitions = chosen.keep(
            read_transitions(chosen.paths, on_error=on_error, diagnostics=diagnostics)
        )
        traces = transitions["trace"].unique(maintain_order=True).to_list()
        if len(traces) != 1:
            _one_trace_please(traces, paths)
        stage.update("reading its metrics")
        metrics = chosen.keep(read_metrics(chosen.paths, on_error=on_error))
        title = _title(chosen, traces[0])
        series = connection_series(transitions, metrics, traces[0], title=title)
        stage.update("drawing")
        if fmt == "html":
            data: bytes = plot_html(series).encode()
        elif fmt == "svg":
            data = plot_svg(series).encode()
        else:
            from quicsm.render.png import svg_to_png

            data = svg_to_png(plot_svg(series))
    print_warnings(diagnostics)
    write_file(output, data, what="the plot")
    click.echo(f"wrote {output} ({traces[0]})", err=True)


def _one_trace_please(traces: list[str], paths: tuple[str, ...]) -> None:
    if not traces:
        raise InputError(f"no trace with states under {', '.join(paths)}")
    shown = ", ".join(traces[:MAX_LISTED]) + (" ..." if len(traces) > MAX_LISTED else "")
    raise InputError(
        f"plot draws one connection, but {len(traces)} traces were selected ({shown}); name one "
        "as FILE#N or narrow with --where (`quicsm labels` lists the labels)"
    )


def _title(chosen: object, trace: str) -> str:
    """A one-line description from the trace's labels (scenario, stack, version, run)."""
    import orjson
    import polars as pl

    from quicsm.compare.selection import Selection

    assert isinstance(chosen, Selection)
    if chosen.traces is None:
        return ""
    row = chosen.traces.filter(pl.col("trace") == trace)
    if row.height == 0:
        return ""
    labels = orjson.loads(row["labels"][0])
    parts = [f"{k}={labels[k]}" for k in ("stack", "version", "scenario", "run") if k in labels]
    return ", ".join(parts)
