"""``quicsm labels``: the labels ``--where`` and ``--by`` can select on, with their values."""

from __future__ import annotations

import sys

import click

from quicsm.cli.progress import reading
from quicsm.cli.trace_options import lenient_option, selection, where_option


@click.command("labels")
@click.argument("paths", nargs=-1, required=True)
@where_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
    help="table: one line per key with its most common values; csv/json: every (key, value) "
    "with its trace count.",
)
@lenient_option
def labels_command(paths: tuple[str, ...], where: tuple[str, ...], fmt: str, lenient: bool) -> None:
    """List the labels of the traces under PATHS: each key, the number of traces carrying it,
    and its values with their trace counts. These are what --where KEY=VALUE and --by KEY
    select on (run.json fields, the trace header's quicsm_labels, title, code_version,
    vantage, format).

    \b
    quicsm labels traces/
    quicsm labels traces/ --where stack=quic-go --format csv
    """
    from quicsm.compare.labels import key_summaries, label_table
    from quicsm.compare.load import traces_where

    with reading("reading trace headers"):
        chosen = selection(paths, where=where, lenient=lenient)
        traces = chosen.traces
        if traces is None:
            traces = traces_where(chosen.paths, where={}, on_error="skip" if lenient else "raise")
    table = label_table(traces["labels"].to_list())
    if fmt == "csv":
        sys.stdout.write(table.write_csv())
        return
    if fmt == "json":
        sys.stdout.write(table.write_json() + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 120)
    n_files = traces["file"].n_unique()
    console.print(
        f"{traces.height} trace{'s' * (traces.height != 1)} in {n_files} "
        f"file{'s' * (n_files != 1)}",
        highlight=False,
    )
    out = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    out.add_column("key", no_wrap=True)
    out.add_column("traces", justify="right", no_wrap=True)
    out.add_column("values (traces)", overflow="fold")
    for summary in key_summaries(table):
        out.add_row(summary.key, str(summary.traces), summary.describe())
    with console.capture() as captured:
        console.print(out, highlight=False)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))
