"""The version-to-version comparison report (``quicsm report``): a self-contained HTML page or
Markdown text built from the same groups as ``quicsm diff``.

Sections: 1 what changed (outcomes, then the state changes, with the events that explain them,
then the caveats), 2 side-by-side state machines and a diff graph, 3 time in state and dwell
times, 4 congestion window of a representative trace per group (same stratum, each on its own axes),
5 a scenario-matrix heatmap, 6 methods.

:func:`build_report` runs the comparisons (:func:`quicsm.compare.run.run_comparison`) and infers
each group's observed model; the sections are composed from those results.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from quicsm.compare.grouping import Comparison, OnError
from quicsm.core.atomic import write_file
from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import InputError

__all__ = ["build_report", "write_report"]

FORMATS = ("html", "md")


def build_report(
    comparisons: Sequence[Comparison],
    *,
    fmt: str = "html",
    alpha: float = 0.05,
    seed: int = 0,
    permutations: int = 4999,
    matrix: tuple[str, str | None] | None = None,
    metric: str | None = None,
    title: str | None = None,
    generated_at: str | None = None,
    command: str | None = None,
    primary: Sequence[str] = (),
    conformance: str | None = None,
    cache_dir: Path | None = None,
    on_error: OnError = "raise",
    diagnostics: Diagnostics | None = None,
) -> str:
    """The report text. ``generated_at`` and ``command`` are shown in Methods when given (pass
    them in; the report never reads the clock, so the same inputs give the same bytes).
    ``conformance``: add the conformance section against the group whose comparison label
    (``--by``, else ``stack``) has this value (:mod:`quicsm.report.conformance`).
    ``cache_dir``: a directory where the controllers named (:mod:`quicsm.report.controllers`)
    are kept and read again by the next report of the same groups (None: named anew).
    ``diagnostics``: what the reads of the groups skipped (``on_error="skip"``), shown in the
    report (a box above the comparisons and an item of Methods: file, record, line, what was
    expected, trace).
    ``on_error``: how the report's own reads (the metrics of a group that has none, to name
    its controller) read (``"skip"``: lenient, what they skip added to ``diagnostics`` and
    shown)."""
    from quicsm.compare.diff import keyed_transitions
    from quicsm.compare.run import run_comparison
    from quicsm.model.inference import infer
    from quicsm.report.html import render_html
    from quicsm.report.markdown import render_markdown
    from quicsm.report.sections import build_views

    if fmt not in FORMATS:
        raise InputError(f"report format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if not comparisons:
        raise InputError("nothing to compare")
    from quicsm.report.controllers import with_controller_notes

    if diagnostics is None and on_error == "skip":
        diagnostics = Diagnostics()
    comparisons = [
        with_controller_notes(c, cache_dir=cache_dir, on_error=on_error, diagnostics=diagnostics)
        for c in comparisons
    ]
    compared = [
        run_comparison(c, alpha=alpha, seed=seed, permutations=permutations, primary=primary)
        for c in comparisons
    ]
    models = [
        tuple(
            infer(keyed_transitions(g.transitions), algorithm="observed")
            if g.transitions.height
            else None
            for g in (c.a, c.b)
        )
        for c in comparisons
    ]
    views = build_views(
        compared,
        models,  # type: ignore[arg-type]
        alpha=alpha,
        matrix=matrix,
        metric=metric,
    )
    extra: list[str] = []
    if conformance is not None:
        from quicsm.report import conformance as conf

        for view in conf.conformance_views(comparisons, reference=conformance, seed=seed):
            extra.append(conf.to_html(view) if fmt == "html" else conf.to_markdown(view))
    if fmt == "md":
        return render_markdown(
            views, alpha=alpha, title=title, generated_at=generated_at, command=command,
            extra=extra, skipped=diagnostics,
        )  # fmt: skip
    return render_html(
        views, alpha=alpha, title=title, generated_at=generated_at, command=command,
        extra=extra, skipped=diagnostics,
    )  # fmt: skip


def write_report(path: str | Path, comparisons: Sequence[Comparison], **options: object) -> Path:
    """Write :func:`build_report` output to ``path`` (format from ``fmt=`` or the suffix)."""
    path = Path(path)
    if "fmt" not in options:
        options["fmt"] = "md" if path.suffix.lower() in (".md", ".markdown") else "html"
    text = build_report(comparisons, **options)  # type: ignore[arg-type]
    write_file(path, text)  # atomic, never through a symbolic link
    return path
