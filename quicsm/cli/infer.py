"""``quicsm infer``: traces in, a Fig. 13-style state machine and its statistics out.

One library call per step: :func:`quicsm.extract.read.read_transitions`,
:func:`quicsm.model.inference.infer`,
:meth:`quicsm.model.tables.Model.render`; :mod:`quicsm.render.outputs` writes the files.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click
import polars as pl

from quicsm.cli.report_warnings import note as report_note
from quicsm.cli.report_warnings import print_warnings, set_quiet, warn
from quicsm.cli.states_option import states_option
from quicsm.cli.trace_options import where_option
from quicsm.core.errors import InputError
from quicsm.model.inference import ALGORITHMS
from quicsm.render.dot import RENDER_FORMATS
from quicsm.render.outputs import state_table, write_outputs

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from quicsm.compare.selection import Selection
    from quicsm.model.tables import Model

FORMATS = (*RENDER_FORMATS, "dot", "json")
#: show a progress bar when the inputs are at least this large in total (bytes) ...
PROGRESS_MIN_BYTES = 4 * 1024 * 1024
#: ... or this many files.
PROGRESS_MIN_FILES = 8


@click.command("infer")
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("quicsm-out"),
    show_default=True,
    help="Directory to write model.json, model.dot, the diagram, stats.csv and transitions.csv.",
)
@click.option(
    "--algorithm",
    type=click.Choice(ALGORITHMS),
    default="observed",
    show_default=True,
    help="observed: one node per state, the paper's Fig. 13 (each node's share of time is "
    "exact); synoptic: Synoptic's refinement + k-tails coarsening (a state may be split into "
    "several nodes to satisfy the mined invariants); ktails.",
)
@click.option(
    "-k", "k", type=click.IntRange(min=1), default=1, show_default=True, help="k-tails depth."
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the algorithm's choices."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="svg",
    show_default=True,
    help="Format of the diagram (dot and json write no rendered image).",
)
@where_option
@click.option(
    "--lenient", is_flag=True, help="Skip unreadable records/files and report what was skipped."
)
@states_option
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors and warnings.")
def infer_command(
    paths: Sequence[str],
    out_dir: Path,
    algorithm: str,
    k: int,
    seed: int,
    fmt: str,
    where: Sequence[str],
    lenient: bool,
    states: str,
    quiet: bool,
) -> None:
    """Infer the congestion-control state machine of qlog traces (or of a transitions table in
    CSV/Parquet) and write it with its statistics into a directory.

    \b
    quicsm infer traces/*.qlog -o out
    quicsm infer traces/*.qlog --where vantage=server --where scenario=jitter
    quicsm infer traces/*.qlog --where vantage=server --algorithm synoptic --format png
    """
    from rich.console import Console

    from quicsm.cli.trace_options import selection
    from quicsm.model.inference import infer

    set_quiet(quiet)
    err = Console(stderr=True)
    chosen = selection(paths, where=where, lenient=lenient)
    files = _expand(chosen.paths)
    with _progress(files, quiet=quiet, console=err) as progress:
        transitions = _read(
            files, lenient=lenient, states=states, progress=progress, console=err
        )
        transitions = _select(transitions, chosen)
        progress.stage("inferring the model")
        model = infer(transitions, algorithm=algorithm, k=k, seed=seed)
        progress.stage("writing outputs")
        written = write_outputs(model, out_dir, fmt=fmt)
    if written.replaced or written.removed:
        names = ", ".join(p.name for p in [*written.replaced, *written.removed])
        report_note(f"replaced the outputs of an earlier run in {out_dir} ({names})")
    if not quiet:
        out = Console()
        if not out.is_terminal:
            out = Console(width=max(out.width, 100))
        _print_summary(model, written, console=out)


def _print_summary(model: Model, written: list[Path], *, console: Console) -> None:
    from rich.table import Table

    from quicsm.core.numbers import ms, pct

    s = model.stats
    console.print(
        f"{s.traces} trace{'s' * (s.traces != 1)}, {s.visits} state entries, "
        f"{s.duration_ms / 1000:.3f} s; {model.algorithm} model: {model.nodes.height} nodes, "
        f"{model.edges.height} edges, {model.invariants.height} invariants",
        highlight=False,
        soft_wrap=True,
    )
    table = Table(box=None, pad_edge=False, padding=(0, 1, 0, 0), header_style="bold")
    table.add_column("state", no_wrap=True)
    for name in ("time", "sec", "traces", "visits", "nodes", "median ms", "p10–p90 ms"):
        table.add_column(name, justify="right", no_wrap=True)
    for row in state_table(model).iter_rows(named=True):
        table.add_row(
            row["state"],
            pct(row["fraction"]),
            f"{row['seconds']:.3f}",
            str(row["traces"]),
            str(row["visits"]),
            str(row["nodes"]),
            ms(row["dwell_median_ms"], unit=False),
            f"{ms(row['dwell_p10_ms'], unit=False)}–{ms(row['dwell_p90_ms'], unit=False)}",
        )
    console.print(table)
    console.print("wrote " + ", ".join(str(p) for p in written), highlight=False, soft_wrap=True)


def _expand(paths: Sequence[str]) -> list[Path]:
    from quicsm.qlog.paths import expand_paths

    return list(expand_paths(list(paths)))


def _select(transitions: pl.DataFrame, chosen: Selection) -> pl.DataFrame:
    """Keep the chosen traces (``FILE#N``, ``--where``); note mixed client/server traces."""
    from quicsm.compare.grouping import vantage_notes

    transitions = chosen.keep(transitions)
    if transitions.height == 0:
        raise InputError("none of the chosen traces has states")
    for note in vantage_notes([transitions], subject="the input mixes", purpose="analyse"):
        report_note(note)
    return transitions


def _read(
    files: list[Path],
    *,
    lenient: bool,
    progress: _Progress,
    console: object,
    states: str = "hybrid",
) -> pl.DataFrame:
    """Read every file (one call per file when a progress bar is shown); report what the
    readers noted (skipped records, truncation, unknown states) once, on stderr."""
    from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
    from quicsm.extract.read import read_transitions

    on_error = "skip" if lenient else "raise"
    diag = Diagnostics()
    frames = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in progress.batches(files):
            frames.append(
                read_transitions(
                    [str(f) for f in batch], on_error=on_error, diagnostics=diag, states=states
                )
            )
    print_warnings(diag)
    for w in caught:
        if not issubclass(w.category, QuicsmWarning):
            warn(str(w.message))
    if not frames:
        raise InputError("no input files to read")
    return pl.concat(frames) if len(frames) > 1 else frames[0]


class _Progress:
    """A rich progress bar over input files and stages, or nothing at all."""

    def __init__(self, files: list[Path], *, enabled: bool, console: object) -> None:
        self.enabled = enabled
        self._bar: Progress | None = None
        self._stage: TaskID | None = None
        self._sizes = [_size(f) for f in files] if enabled else []
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )

            assert isinstance(console, Console)
            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )

    def batches(self, files: list[Path]) -> Iterator[list[Path]]:
        if self._bar is None:
            if files:
                yield files
            return
        task = self._bar.add_task("reading traces", total=sum(self._sizes))
        for f, size in zip(files, self._sizes, strict=True):
            yield [f]
            self._bar.advance(task, size)

    def stage(self, description: str) -> None:
        if self._bar is None:
            return
        if self._stage is not None:
            self._bar.remove_task(self._stage)
        self._stage = self._bar.add_task(description, total=None)

    def __enter__(self) -> _Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


@contextlib.contextmanager
def _progress(files: list[Path], *, quiet: bool, console: object) -> Iterator[_Progress]:
    from rich.console import Console

    assert isinstance(console, Console)
    long_input = len(files) >= PROGRESS_MIN_FILES or (
        sum(_size(f) for f in files) >= PROGRESS_MIN_BYTES
    )
    enabled = not quiet and long_input and console.is_terminal
    with _Progress(files, enabled=enabled, console=console) as progress:
        yield progress
