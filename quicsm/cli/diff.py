"""``quicsm diff``: what changed between two groups of traces, and is it significant?"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click

from quicsm.cli.engine_options import engine_choice, engine_options
from quicsm.cli.group_options import GroupCommand, comparisons, group_options, test_options
from quicsm.render import diff_format

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
    "--fail-on-significant",
    is_flag=True,
    help=f"Exit with status {EXIT_SIGNIFICANT} if anything differs significantly "
    "(for CI regression gates).",
)
def diff_command(
    paths: Sequence[str],
    vs_paths: Sequence[str],
    by_label: str | None,
    where: Sequence[str],
    baseline: str | None,
    lenient: bool,
    alpha: float,
    fmt: str,
    seed: int,
    fail_on_significant: bool,
    engine: str,
    scheduler: str | None,
    workers: int | None,
    cache_dir: Path | None,
    no_cache: bool,
) -> None:
    """Compare group B with group A: time in state, transition probabilities, dwell times and
    invariants, each with a significance test (see docs/diff.md).

    \b
    quicsm diff traces/v1/ --vs traces/v2/
    quicsm diff traces/*.qlog --by version --where scenario=jitter --format md
    """
    from quicsm.compare.diff import diff
    from quicsm.render.diff_format import to_dict

    comps = comparisons(
        paths=paths,
        vs_paths=vs_paths,
        by_label=by_label,
        where=where,
        baseline=baseline,
        lenient=lenient,
        reader=engine_choice(
            engine=engine,
            scheduler=scheduler,
            workers=workers,
            cache_dir=cache_dir,
            no_cache=no_cache,
        ).reader(),
    )
    results = []
    for comp in comps:
        for note in comp.notes:
            click.echo(f"note: {note}", err=True)
        results.append(
            diff(
                comp.a.transitions,
                comp.b.transitions,
                alpha=alpha,
                seed=seed,
                names=(comp.a.name, comp.b.name),
            )
        )
    if fmt == "json":
        import orjson

        if len(results) == 1:
            click.echo(diff_format.to_json(results[0]), nl=False)
        else:
            doc = {"comparisons": [to_dict(r) for r in results]}
            click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
    else:
        text = [
            diff_format.to_markdown(r) if fmt == "md" else diff_format.to_table(r) for r in results
        ]
        click.echo("\n".join(text), nl=False)
    if fail_on_significant and any(r.any_significant for r in results):
        sys.exit(EXIT_SIGNIFICANT)
