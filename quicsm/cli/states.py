"""``quicsm states``: print the transitions frame of qlog files or transition tables."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import click

from quicsm.cli.engine_options import engine_choice, engine_options
from quicsm.cli.progress import reading
from quicsm.cli.report_warnings import print_warnings, terminal_safe
from quicsm.cli.states_option import states_option
from quicsm.cli.trace_options import selection, where_option
from quicsm.core.diagnostics import QuicsmWarning

if TYPE_CHECKING:  # imported when the command runs, not for --help
    import polars as pl

#: columns left out, in this order, until the table fits the terminal: the file (the trace id
#: names it), the trace's end (the same on each of its rows), then the detail of each row
DROP_ORDER = ("file", "end_ms", "raw_state", "trigger", "source", "vantage")
#: the narrowest the trace column is cut to (its start replaced by an ellipsis)
MIN_TRACE_WIDTH = 24


def _cells(frame: pl.DataFrame) -> list[list[str]]:
    return [
        ["" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
        for row in frame.iter_rows()
    ]


def _render(columns: list[str], cells: list[list[str]]) -> tuple[str, int]:
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines) + "\n", sum(widths) + 2 * (len(widths) - 1)


def table(frame: pl.DataFrame, *, width: int | None = None) -> tuple[str, list[str]]:
    """A fixed-width table of every row that fits ``width`` columns (None: no limit): columns
    are left out in :data:`DROP_ORDER`, then trace ids lose their start. Returns the text
    and the names of the columns left out."""
    columns = list(frame.columns)
    cells = _cells(frame)
    text, used = _render(columns, cells)
    dropped: list[str] = []
    for name in DROP_ORDER:
        if width is None or used <= width:
            break
        if name in columns:
            i = columns.index(name)
            columns.pop(i)
            for row in cells:
                row.pop(i)
            dropped.append(name)
            text, used = _render(columns, cells)
    if width is not None and used > width and "trace" in columns:
        i = columns.index("trace")
        longest = max([len(r[i]) for r in cells] + [0])
        room = max(longest - (used - width), MIN_TRACE_WIDTH)
        for row in cells:  # the file name and the trace number are at the end
            row[i] = row[i] if len(row[i]) <= room else "…" + row[i][len(row[i]) - room + 1 :]
        text, used = _render(columns, cells)
    return text, dropped


@click.command("states")
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "jsonl"]),
    default="table",
    show_default=True,
    help="Output format.",
)
@where_option
@click.option(
    "--lenient",
    is_flag=True,
    help="Skip bad records and unreadable files; report how many on stderr.",
)
@states_option
@engine_options
def states(
    paths: tuple[str, ...],
    fmt: str,
    where: tuple[str, ...],
    lenient: bool,
    states: str,
    engine: str,
    scheduler: str | None,
    workers: int | None,
    cache_dir: Path | None,
    no_cache: bool,
) -> None:
    """Print one row per congestion state entered, per trace, for PATHS.

    The table fits the terminal: columns are left out (file, end_ms, raw_state, trigger,
    source, vantage, in that order) and long trace ids lose their start until it does; stderr
    says which. --format csv and jsonl print every column.

    PATHS are qlog files (JSON, JSON-SEQ, NDJSON, any qlog draft, optionally gzip or zstd
    compressed), transition tables (CSV/Parquet), directories (searched recursively), glob
    patterns (** matches any number of directories) and single traces as FILE#N (N counts
    the file's traces from 0, as in the trace column).

    \b
    quicsm states traces/quic-go-v0.65.0.qlog#0 --format csv
    quicsm states traces/*.qlog --where scenario=loss1 --where vantage=server --format csv
    """
    from quicsm.engine import extract

    choice = engine_choice(
        engine=engine, scheduler=scheduler, workers=workers, cache_dir=cache_dir, no_cache=no_cache
    )
    with reading("reading traces"), warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        chosen = selection(
            paths, where=where, lenient=lenient, cache_dir=choice.cache_dir, cache=choice.cache
        )
        corpus = extract(
            chosen.paths,
            on_error="skip" if lenient else "raise",
            rows=True,
            aggregate=False,
            states=states,
            **choice.kwargs(),
        )
        assert corpus.transitions is not None
        frame = chosen.keep(corpus.transitions)
    print_warnings(corpus.diagnostics)
    import polars as pl

    frame = frame.with_columns(pl.col(pl.Enum).cast(pl.String))
    if fmt == "csv":
        sys.stdout.write(frame.write_csv())
    elif fmt == "jsonl":
        sys.stdout.write(frame.write_ndjson())
    else:
        import shutil

        width = shutil.get_terminal_size((120, 24)).columns
        text, dropped = table(frame, width=width)
        sys.stdout.write(terminal_safe(text))
        if dropped:
            click.echo(
                f"(left out to fit {width} columns: {', '.join(dropped)}; --format csv prints "
                "every column)",
                err=True,
            )
