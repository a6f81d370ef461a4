"""``quicsm identify``: name the congestion controller of every trace."""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING

import click

from quicsm.cli.report_warnings import print_warnings
from quicsm.core.diagnostics import Diagnostics, QuicsmWarning

if TYPE_CHECKING:  # imported when the command runs, not for --help
    import polars as pl

#: the columns of the table view (the JSON and CSV views carry every column)
TABLE_COLUMNS = ("trace", "vantage", "family", "confidence", "declared", "evidence")


def _table(frame: pl.DataFrame) -> str:
    cells = [
        ["" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v) for v in row]
        for row in frame.select(TABLE_COLUMNS).iter_rows()
    ]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(TABLE_COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(TABLE_COLUMNS, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines) + "\n"


@click.command("identify")
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "csv"]),
    default="table",
    show_default=True,
    help="Output format: a text table, one JSON array of objects, or CSV (every column).",
)
@click.option(
    "--vantage",
    type=click.Choice(["client", "server", "any"]),
    default="any",
    show_default=True,
    help="Only traces of this vantage point (the sender of a download is the server).",
)
@click.option(
    "--lenient",
    is_flag=True,
    help="Skip bad records and unreadable files; report how many on stderr.",
)
def identify_command(paths: tuple[str, ...], fmt: str, vantage: str, lenient: bool) -> None:
    """Name the congestion controller of every trace in PATHS.

    For each trace: the controller family (NewReno/Reno, Cubic, BBRv1, BBRv2/v3 or unknown), a
    calibrated confidence (the share of answers of its kind that were right on the lab's
    calibration draws; below 0.8 the answer is unknown), the controller the trace declares
    (cc_algorithm label), if any, and the evidence: how the window was reduced on loss (factor
    0.5, 0.7, or not at all), how it grew between losses (segments per window acknowledged, so
    that loopback's sub-millisecond RTTs do not matter; linear, concave or convex), explicit BBR
    phases, and for unknown why (too few reductions, RTT below the timer resolution, no
    matching or several matching controllers). Only a sender's trace carries this evidence; a
    receiver's is normally "unknown". No instrumentation is needed: congestion-window metrics
    and packet losses suffice.

    PATHS are qlog files (any draft or serialization, optionally compressed), directories
    (searched recursively) and glob patterns. Accuracy: docs/identify.md.
    """
    import orjson
    import polars as pl

    from quicsm.controllers.api import identify

    diagnostics = Diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        frame = identify(
            list(paths), on_error="skip" if lenient else "raise", diagnostics=diagnostics
        )
    print_warnings(diagnostics)
    if vantage != "any":
        frame = frame.filter(pl.col("vantage") == vantage)
    if fmt == "json":
        sys.stdout.write(orjson.dumps(frame.to_dicts(), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif fmt == "csv":
        sys.stdout.write(frame.write_csv())
    else:
        sys.stdout.write(_table(frame))
