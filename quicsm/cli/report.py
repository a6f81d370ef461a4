"""``quicsm report``: the version-to-version comparison report as one HTML file (or Markdown)."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from quicsm.cli.engine_options import engine_options
from quicsm.cli.group_options import GroupCommand, group_options, test_options
from quicsm.cli.load_comparisons import load_comparisons, show_caveats
from quicsm.cli.output_options import follow_symlinks_option
from quicsm.core.atomic import checked_target, write_file
from quicsm.core.errors import InputError

if TYPE_CHECKING:  # imported when the command runs, not for --help
    from quicsm.compare.grouping import Comparison, OnError
    from quicsm.core.diagnostics import Diagnostics


def _generated_at() -> str:
    """Now, or SOURCE_DATE_EPOCH when set (reproducible output)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = (
        datetime.fromtimestamp(int(epoch), UTC) if epoch and epoch.isdigit() else datetime.now(UTC)
    )
    return when.strftime("%Y-%m-%d %H:%M UTC")


def _matrix(text: str | None) -> tuple[str, str | None] | None:
    if not text:
        return None
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > 2 or not all(parts):
        raise InputError(f"--matrix {text!r}: expected ROW_LABEL or ROW_LABEL,COLUMN_LABEL")
    return (parts[0], parts[1] if len(parts) == 2 else None)


def _metric(text: str | None) -> str | None:
    if text and text.startswith("state:"):
        from quicsm.core.states import CANONICAL_STATES

        state = text.split(":", 1)[1]
        if state not in CANONICAL_STATES:
            raise InputError(
                f"--metric {text!r}: unknown state; expected one of {', '.join(CANONICAL_STATES)}"
            )
    return text


@click.command("report", cls=GroupCommand)
@group_options
@test_options
@engine_options
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="File to write.",
)
@follow_symlinks_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md"]),
    default=None,
    help="Output format (default: from the file suffix, .md = Markdown, else HTML).",
)
@click.option(
    "--matrix",
    "matrix",
    metavar="ROW[,COL]",
    help="Labels spanning the scenario heatmap (default: chosen from the labels).",
)
@click.option(
    "--metric",
    metavar="NAME",
    help="Heatmap metric: a numeric label such as completion_ms, or state:NAME for a "
    "state's time share (default: completion_ms if present, else the state that "
    "changed most).",
)
@click.option("--title", help="Report title (default: 'B vs A').")
@click.option(
    "--conformance",
    "conformance",
    metavar="VALUE",
    help="Add a conformance section: every group against the one whose --by label (else "
    "stack) is VALUE, per scenario (e.g. --by stack --conformance linux-tcp).",
)
def report_command(
    paths: Sequence[str],
    vs_paths: Sequence[str],
    by_label: str | None,
    where: Sequence[str],
    within: Sequence[str],
    baseline: str | None,
    lenient: bool,
    states: str,
    output: Path,
    follow_symlinks: bool,
    fmt: str | None,
    alpha: float,
    primary: Sequence[str],
    seed: int,
    matrix: str | None,
    metric: str | None,
    title: str | None,
    conformance: str | None,
    engine: str,
    scheduler: str | None,
    workers: int | None,
    cache_dir: Path | None,
    no_cache: bool,
    split_app_limited: bool,
) -> None:
    """Write a self-contained comparison report of group B against group A: what changed
    (outcomes, then the state changes, with the events that explain them, then the caveats),
    the state machines side by side and their diff, time in state and dwell times, the
    congestion window of a representative trace, a scenario heatmap, and the methods.

    \b
    quicsm report traces/quic-go-v0.48.2.qlog --vs traces/quic-go-v0.65.0.qlog -o report.html
    quicsm report traces/ --by version --where stack=quic-go --where vantage=server -o report.md
    """
    from quicsm.cli.progress import reading

    # every argument is checked before a trace is read
    matrix_labels, metric_name = _matrix(matrix), _metric(metric)
    checked_target(output, follow_symlinks=follow_symlinks)
    from quicsm.core.diagnostics import Diagnostics

    skipped = Diagnostics()  # what lenient reading skipped: said in the report too
    with reading("reading traces") as stage:
        comps = load_comparisons(
            paths=paths,
            vs_paths=vs_paths,
            by_label=by_label,
            where=where,
            within=within,
            baseline=baseline,
            lenient=lenient,
            states=states,
            engine=engine,
            scheduler=scheduler,
            workers=workers,
            cache_dir=cache_dir,
            no_cache=no_cache,
            split_app_limited=split_app_limited,
            diagnostics=skipped,
        )
        stage.update(
            f"testing and drawing {len(comps)} comparison{'s' * (len(comps) != 1)} "
            "(permutation tests, state machines, charts)"
        )
        text = _build(comps, output=output, fmt=fmt, alpha=alpha, seed=seed, matrix=matrix_labels,
                      metric=metric_name, title=title, primary=primary,
                      conformance=conformance, skipped=skipped,
                      on_error="skip" if lenient else "raise",
                      cache_dir=None if no_cache else _report_cache(cache_dir))  # fmt: skip
    show_caveats(comps)
    write_file(output, text, what="the report", follow_symlinks=follow_symlinks)
    click.echo(f"wrote {output}", err=True)


def _report_cache(cache_dir: Path | None) -> Path:
    """Where the report keeps its charts and the controllers it named: the engine's cache
    directory."""
    from quicsm.engine.cache import default_cache_dir

    return cache_dir if cache_dir is not None else default_cache_dir()


def _build(
    comps: Sequence[Comparison],
    *,
    output: Path,
    fmt: str | None,
    alpha: float,
    seed: int,
    matrix: tuple[str, str | None] | None,
    metric: str | None,
    title: str | None,
    primary: Sequence[str] = (),
    conformance: str | None = None,
    cache_dir: Path | None = None,
    skipped: Diagnostics | None = None,
    on_error: OnError = "raise",
) -> str:
    from quicsm.report import build_report

    if fmt is None:
        fmt = "md" if output.suffix.lower() in (".md", ".markdown") else "html"
    return build_report(
        comps,
        fmt=fmt,
        alpha=alpha,
        seed=seed,
        matrix=matrix,
        metric=metric,
        title=title,
        primary=primary,
        conformance=conformance,
        generated_at=_generated_at(),
        cache_dir=cache_dir,
        diagnostics=skipped,
        on_error=on_error,
        command=shlex.join(["quicsm", *sys.argv[1:]]) if sys.argv[1:2] == ["report"] else None,
    )
