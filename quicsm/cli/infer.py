"""``quicsm infer``: traces in, a Fig. 13-style state machine and its statistics out.

One library call per step: :func:`quicsm.engine.extract` (files read in parallel batches, each
reduced to mergeable sums), :func:`quicsm.engine.infer_aggregate` (the model of the merged
sums and the weighted distinct traces); :mod:`quicsm.render.outputs` writes the files.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from quicsm.cli.engine_options import EngineChoice, engine_choice, engine_options
from quicsm.cli.report_warnings import note as report_note
from quicsm.cli.report_warnings import print_warnings, set_quiet, warn
from quicsm.cli.states_option import states_option
from quicsm.cli.trace_options import where_option
from quicsm.core.choices import ALGORITHMS, RENDER_FORMATS
from quicsm.core.errors import InputError

if TYPE_CHECKING:  # the rest is imported when the command runs, not for --help
    import polars as pl
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from quicsm.engine.aggregate import Aggregate
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
@engine_options
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
    engine: str,
    scheduler: str | None,
    workers: int | None,
    cache_dir: Path | None,
    no_cache: bool,
) -> None:
    """Infer the congestion-control state machine of qlog traces (or of a transitions table in
    CSV/Parquet) and write it with its statistics into a directory.

    \b
    quicsm infer traces/*.qlog -o out
    quicsm infer traces/*.qlog --where vantage=server --where scenario=jitter
    quicsm infer traces/*.qlog --where vantage=server --algorithm synoptic --format png
    quicsm infer traces/*.qlog --engine processes --workers 2 -o out
    """
    from rich.console import Console

    from quicsm.cli.trace_options import selection
    from quicsm.engine import infer_aggregate
    from quicsm.render.outputs import write_outputs

    set_quiet(quiet)
    choice = engine_choice(
        engine=engine, scheduler=scheduler, workers=workers, cache_dir=cache_dir, no_cache=no_cache
    )
    err = Console(stderr=True)
    chosen = selection(
        paths, where=where, lenient=lenient, cache_dir=choice.cache_dir, cache=choice.cache
    )
    files = _expand(chosen.paths)
    with _progress(files, quiet=quiet, console=err) as progress:
        aggregate = _read(
            files,
            select=chosen.keep if chosen.traces is not None else None,
            lenient=lenient,
            progress=progress,
            choice=choice,
            states=states,
        )
        progress.stage("inferring the model")
        model = infer_aggregate(aggregate, algorithm=algorithm, k=k, seed=seed)
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
    from quicsm.render.outputs import state_table

    s = model.stats
    console.print(
        f"{s.traces} trace{'s' * (s.traces != 1)}, {s.visits} state entries, "
        f"{s.duration_ms / 1000:.3f} s; {model.algorithm} model: {_state_nodes(model)} state "
        "nodes (plus INITIAL and TERMINAL), "
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


def _state_nodes(model: Model) -> int:
    """The model's nodes that stand for states (the table's "nodes" column adds up to it)."""
    from quicsm.stats.descriptive import INITIAL, TERMINAL

    return int((~model.nodes["state"].is_in([INITIAL, TERMINAL])).sum())


def _expand(paths: Sequence[str]) -> list[Path]:
    from quicsm.qlog.paths import expand_paths

    return list(expand_paths(list(paths)))


def _read(
    files: list[Path],
    *,
    select: Callable[[pl.DataFrame], pl.DataFrame] | None,
    lenient: bool,
    progress: _Progress,
    choice: EngineChoice,
    states: str = "hybrid",
) -> Aggregate:
    """Read every file on the chosen engine, keep the traces ``select`` chooses (``FILE#N``,
    ``--where``), and return their merged aggregate; report what the readers noted (skipped
    records, truncation, unknown states) once, on stderr, and note mixed client/server
    traces."""
    from quicsm.compare.grouping import vantage_notes
    from quicsm.core.diagnostics import QuicsmWarning
    from quicsm.engine import extract

    if not files:
        raise InputError("no input files to read")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        corpus = extract(
            [str(f) for f in files],
            on_error="skip" if lenient else "raise",
            select=select,
            progress=progress.update,
            states=states,
            **choice.kwargs(),
        )
    print_warnings(corpus.diagnostics)
    for w in caught:
        if not issubclass(w.category, QuicsmWarning):
            warn(str(w.message))
    assert corpus.aggregate is not None
    if corpus.aggregate.visits == 0 and corpus.diagnostics.skipped_files >= len(files):
        n = len(files)
        raise InputError(
            f"no model to infer: {'the input file was' if n == 1 else f'all {n} input files were'}"
            " skipped (the reasons are above)"
        )
    if select is not None and corpus.aggregate.visits == 0:
        raise InputError("none of the chosen traces has states")
    for note in vantage_notes([corpus.traces], subject="the input mixes", purpose="analyse"):
        report_note(note)
    return corpus.aggregate


class _Progress:
    """A rich progress bar over input files and stages, or nothing at all."""

    def __init__(self, files: list[Path], *, enabled: bool, console: object) -> None:
        self.enabled = enabled
        self._bar: Progress | None = None
        self._stage: TaskID | None = None
        self._reading: TaskID | None = None
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

    def update(self, done: int, total: int) -> None:
        """Bytes read so far (inside files not finished yet too) of ``total``."""
        if self._bar is None:
            return
        if self._reading is None:
            self._reading = self._bar.add_task("reading traces", total=total)
        self._bar.update(self._reading, completed=done, total=total)

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
