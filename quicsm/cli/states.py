"""``quicsm states``: print the transitions frame of qlog files or transition tables."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import click
import polars as pl

from quicsm.cli.engine_options import engine_choice, engine_options
from quicsm.cli.progress import reading
from quicsm.cli.report_warnings import print_warnings, terminal_safe
from quicsm.cli.states_option import states_option
from quicsm.cli.trace_options import selection, where_option
from quicsm.core.diagnostics import QuicsmWarning


def _table(frame: pl.DataFrame) -> str:
    """A plain fixed-width table of every row (deterministic, no truncation)."""
    columns = frame.columns
    cells = [
        ["" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v) for v in row]
        for row in frame.iter_rows()
    ]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines) + "\n"


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
        chosen = selection(paths, where=where, lenient=lenient)
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
    frame = frame.with_columns(pl.col(pl.Enum).cast(pl.String))
    if fmt == "csv":
        sys.stdout.write(frame.write_csv())
    elif fmt == "jsonl":
        sys.stdout.write(frame.write_ndjson())
    else:
        sys.stdout.write(terminal_safe(_table(frame)))
