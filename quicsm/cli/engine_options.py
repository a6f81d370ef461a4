"""``--engine``, ``--scheduler``, ``--workers``, ``--cache-dir``, ``--no-cache``: where reading
runs (shared by infer, states, diff and report)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from quicsm.cli.report_warnings import print_warnings
from quicsm.core.choices import ENGINES

if TYPE_CHECKING:  # imported when a command runs, not for --help
    import polars as pl

    from quicsm.compare.load import Accounts, Reader
    from quicsm.core.diagnostics import Diagnostics


@dataclass(frozen=True)
class EngineChoice:
    engine: str
    scheduler: str | None
    workers: int | None
    cache_dir: Path | None
    cache: bool

    def kwargs(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "scheduler": self.scheduler,
            "workers": self.workers,
            "cache_dir": self.cache_dir,
            "cache": self.cache,
        }

    def reader(self, *, split_app_limited: bool = False) -> Reader:
        """A reader for :mod:`quicsm.compare.load`: transitions, trace table and (when asked)
        metrics of paths, read on this engine; what reading reported is printed on stderr.
        ``split_app_limited``: ApplicationLimited split by cause (as the engine's)."""

        def read(
            paths: Sequence[str], on_error: str, metrics: bool, states: str
        ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | None, Diagnostics]:
            from quicsm.engine import extract

            corpus = extract(
                list(paths),
                on_error=on_error,
                rows=True,
                aggregate=False,
                metrics=metrics,
                states=states,
                split_app_limited=split_app_limited,
                **self.kwargs(),
            )
            print_warnings(corpus.diagnostics)
            assert corpus.transitions is not None
            return corpus.transitions, corpus.traces, corpus.metrics, corpus.diagnostics

        return read

    def accounts(self) -> Accounts:
        """Counts the connection accounts for :mod:`quicsm.compare.load`, kept in this choice's
        cache (:func:`quicsm.engine.accounts.cached_account`); what reading their packets
        skipped goes to the diagnostics it is given (the caller warns of it)."""

        def count(
            transitions: pl.DataFrame,
            metrics: pl.DataFrame,
            traces: pl.DataFrame,
            on_error: str,
            states: str,
            diagnostics: Diagnostics,
        ) -> pl.DataFrame:
            from quicsm.engine.accounts import cached_account

            return cached_account(
                transitions,
                metrics,
                traces,
                on_error=on_error,
                states=states,
                cache_dir=self.cache_dir,
                cache=self.cache,
                diagnostics=diagnostics,
            )

        return count


def engine_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with --engine, --scheduler, --workers, --cache-dir, --no-cache."""
    options = [
        click.option(
            "--engine",
            type=click.Choice(ENGINES),
            default="local",
            show_default=True,
            help="Where files are read: local (this machine, every core), processes (a pool of "
            "--workers processes) or dask (a Dask cluster, see --scheduler).",
        ),
        click.option(
            "--scheduler",
            metavar="ADDRESS",
            help="With --engine dask: the scheduler to use (e.g. tcp://10.0.0.5:8786); without "
            "it a local Dask cluster of --workers processes is started.",
        ),
        click.option(
            "--workers",
            type=click.IntRange(min=1),
            help="Worker processes (default: every core).",
        ),
        click.option(
            "--cache-dir",
            type=click.Path(file_okay=False, path_type=Path),
            help="Cache of extracted partitions, keyed by file content (default: "
            "$QUICSM_CACHE_DIR, else ~/.cache/quicsm; `quicsm cache` shows and prunes it).",
        ),
        click.option("--no-cache", is_flag=True, help="Neither use nor fill the cache."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def engine_choice(
    *,
    engine: str,
    scheduler: str | None,
    workers: int | None,
    cache_dir: Path | None,
    no_cache: bool,
) -> EngineChoice:
    """The engine options as one value."""
    return EngineChoice(engine, scheduler, workers, cache_dir, not no_cache)
