"""The comparisons ``quicsm diff`` and ``quicsm report`` make: the group options (paths,
``--vs``/``--by``, ``--where``, ``--within``, ...) read with the engine options' reader, and the
caveats and notes of what was read, shown once the reading is done. Each command checks its own
arguments before calling :func:`load_comparisons`: nothing is read for a command that will be
refused."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from quicsm.cli.engine_options import engine_choice
from quicsm.cli.group_options import comparisons
from quicsm.cli.report_warnings import caution, note

if TYPE_CHECKING:  # imported when a command runs, not for --help
    from quicsm.compare.grouping import Comparison
    from quicsm.core.diagnostics import Diagnostics


def load_comparisons(
    *,
    paths: Sequence[str],
    vs_paths: Sequence[str],
    by_label: str | None,
    where: Sequence[str],
    within: Sequence[str],
    baseline: str | None,
    lenient: bool,
    states: str,
    engine: str,
    scheduler: str | None,
    workers: int | None,
    cache_dir: Path | None,
    no_cache: bool,
    split_app_limited: bool = False,
    diagnostics: Diagnostics | None = None,
) -> list[Comparison]:
    """Read the groups of every comparison the options describe (with their metrics, which
    the outcome tests and the report's charts use); what the reads skipped (``lenient``) is
    added to ``diagnostics``, for the output to show."""
    choice = engine_choice(
        engine=engine, scheduler=scheduler, workers=workers, cache_dir=cache_dir, no_cache=no_cache
    )
    return comparisons(
        paths=paths,
        vs_paths=vs_paths,
        by_label=by_label,
        where=where,
        baseline=baseline,
        lenient=lenient,
        states=states,
        within=within,
        metrics=True,
        reader=choice.reader(split_app_limited=split_app_limited),
        accounts=choice.accounts(),
        diagnostics=diagnostics,
    )


def show_caveats(comps: Sequence[Comparison]) -> None:
    """Each comparison's caveats and notes on stderr (after the progress display is gone)."""
    for comp in comps:
        for caveat in comp.caveats:
            caution(caveat)
        for text in comp.notes:
            note(text)
