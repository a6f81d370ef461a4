"""``quicsm diff``: what changed between two groups of traces, and is it significant?"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from quicsm.cli.engine_options import engine_options
from quicsm.cli.group_options import GroupCommand, group_options, test_options
from quicsm.cli.load_comparisons import load_comparisons, show_caveats
from quicsm.cli.output_options import follow_symlinks_option
from quicsm.cli.progress import reading
from quicsm.cli.report_warnings import terminal_safe
from quicsm.core.atomic import checked_target, write_file
from quicsm.core.errors import InputError

if TYPE_CHECKING:
    import polars as pl

    from quicsm.compare.run import Compared

#: exit status of ``--fail-on-significant`` when something differs significantly
EXIT_SIGNIFICANT = 3


@click.command("diff", cls=GroupCommand)
@group_options
@test_options
@engine_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "md"]),
    default="table",
    show_default=True,
    help="Output format.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the full output (every row, in the chosen format) to this file; a terminal "
    "still gets the summary view.",
)
@follow_symlinks_option
@click.option(
    "--fail-on-significant",
    is_flag=True,
    help=f"Exit with status {EXIT_SIGNIFICANT} if a test of the primary family is significant "
    "(for CI regression gates; name what the gate watches with --primary).",
)
@click.option(
    "--plan",
    "plan_mode",
    is_flag=True,
    help="Treat the groups as a pilot: print, for every test, how many traces per group it "
    "needs to detect the pilot's difference (or --effect) with 80% power, from the pilot's "
    "own variance.",
)
@click.option(
    "--effect",
    type=float,
    default=None,
    help="With --plan: the effect to plan for, in each family's units (a share or "
    "probability difference for states and transitions, 0.1 = 10 points; a relative change "
    "for outcomes, 0.1 = 10%; a ratio for dwell times, 1.5 = 1.5 times as long).",
)
def diff_command(
    paths: Sequence[str],
    vs_paths: Sequence[str],
    by_label: str | None,
    where: Sequence[str],
    within: Sequence[str],
    baseline: str | None,
    lenient: bool,
    states: str,
    alpha: float,
    primary: Sequence[str],
    fmt: str,
    seed: int,
    output: Path | None,
    follow_symlinks: bool,
    fail_on_significant: bool,
    plan_mode: bool,
    effect: float | None,
    engine: str,
    scheduler: str | None,
    workers: int | None,
    cache_dir: Path | None,
    no_cache: bool,
    split_app_limited: bool,
) -> None:
    """Compare group B with group A: outcomes, time in state, transition probabilities, dwell
    times and invariants, each with a significance test (primary tests under Holm, the rest
    exploratory under Benjamini-Hochberg), and the events that explain what changed (see
    docs/diff.md).

    On a terminal, table output is fitted to the window: significant rows are highlighted and
    long tables show their significant and largest rows (-o FILE writes every row).

    \b
    quicsm diff traces/quic-go-v0.48.2.qlog --vs traces/quic-go-v0.65.0.qlog --where vantage=server
    quicsm diff traces/*.qlog --by version --where stack=quic-go --where scenario=jitter --format md
    """
    from quicsm.compare.run import run_comparison
    from quicsm.core.diagnostics import Diagnostics
    from quicsm.render.diff_format import md_cell, to_dict, to_markdown, to_table
    from quicsm.render.skipped import (
        anything_skipped,
        skipped_dict,
        skipped_markdown,
        skipped_text,
    )

    # every argument is checked before a trace is read
    if effect is not None and not plan_mode:
        raise InputError("--effect only applies with --plan")
    if output is not None:
        checked_target(output, follow_symlinks=follow_symlinks)
    skipped = Diagnostics()  # what lenient reading skipped: said in the output too
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
        done = []
        for i, comp in enumerate(comps, 1):
            stage.update(f"testing {comp.b.name} against {comp.a.name} ({i}/{len(comps)})")
            done.append(run_comparison(comp, alpha=alpha, seed=seed, primary=primary))
    show_caveats(comps)
    if plan_mode:
        _print_plan(done, fmt=fmt, effect=effect, output=output, follow_symlinks=follow_symlinks)
        return

    def accounts(c: Compared) -> list[pl.DataFrame | None]:
        return [c.comparison.a.account, c.comparison.b.account]

    if fmt == "json":
        import orjson

        if len(done) == 1:
            doc = to_dict(
                done[0].result, explanations=done[0].explanations, accounts=accounts(done[0])
            )
        else:
            doc = {
                "comparisons": [
                    to_dict(c.result, explanations=c.explanations, accounts=accounts(c))
                    for c in done
                ]
            }
        if anything_skipped(skipped):  # the key only when something was skipped
            doc["skipped"] = skipped_dict(skipped)
        text = orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"
    else:
        view = to_markdown if fmt == "md" else to_table
        said = skipped_markdown(skipped, md_cell=md_cell) if fmt == "md" else skipped_text(skipped)
        text = "\n".join(said) + "\n" if said else ""
        text += "\n".join(
            view(c.result, explanations=c.explanations, accounts=accounts(c)) for c in done
        )
    if output is not None:
        write_file(output, text, follow_symlinks=follow_symlinks)
        click.echo(f"wrote {output}", err=True)
    if fmt == "table" and sys.stdout.isatty():
        from rich.console import Console

        from quicsm.cli.diff_view import print_diff

        console = Console()
        if anything_skipped(skipped):  # said above the comparisons, as in the other views
            console.print(
                terminal_safe("\n".join(skipped_text(skipped))), markup=False, highlight=False
            )
            console.rule()
        for i, c in enumerate(done):
            if i:
                console.rule()
            print_diff(
                c.result,
                console=console,
                full_output=str(output) if output else None,
                explanations=c.explanations,
                accounts=accounts(c),
            )
    elif output is None:
        click.echo(terminal_safe(text) if fmt != "json" else text, nl=False)
    if fail_on_significant and any(c.result.primary_significant for c in done):
        sys.exit(EXIT_SIGNIFICANT)


def _print_plan(
    done: Sequence[Any],
    *,
    fmt: str,
    effect: float | None,
    output: Path | None,
    follow_symlinks: bool = False,
) -> None:
    from quicsm.compare.plan import plan
    from quicsm.render.diff_format import plan_text

    tables = [plan(c.result, effect=effect) for c in done]
    if fmt == "json":
        import orjson

        doc = [t.to_dicts() for t in tables]
        text = (
            orjson.dumps(
                doc if len(doc) > 1 else doc[0], option=orjson.OPT_INDENT_2, default=str
            ).decode()
            + "\n"
        )
    else:
        text = "\n".join(
            plan_text(c.result, t, effect=effect) for c, t in zip(done, tables, strict=True)
        )
    if output is not None:
        write_file(output, text, follow_symlinks=follow_symlinks)
        click.echo(f"wrote {output}", err=True)
        return
    click.echo(terminal_safe(text) if fmt != "json" else text, nl=False)
