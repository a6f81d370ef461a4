"""``quicsm diff``: what changed between two groups of traces, and is it significant?"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click

from quicsm.cli.engine_options import engine_choice, engine_options
from quicsm.cli.group_options import GroupCommand, comparisons, group_options, test_options

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
    within: Sequence[str],
    baseline: str | None,
    lenient: bool,
    states: str,
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
    """Compare group B with group A: outcomes, time in state, transition probabilities, dwell
    times and invariants, each with a significance test (Holm over all of them), and the
    events that explain what changed (see docs/diff.md).

    \b
    quicsm diff traces/v1/ --vs traces/v2/
    quicsm diff traces/*.qlog --by version --where scenario=jitter --format md
    """
    from quicsm.compare.run import run_comparison
    from quicsm.render.diff_format import to_dict, to_json, to_markdown, to_table

    comps = comparisons(
        paths=paths,
        vs_paths=vs_paths,
        by_label=by_label,
        where=where,
        baseline=baseline,
        lenient=lenient,
        states=states,
        within=within,
        metrics=True,
        reader=engine_choice(
            engine=engine,
            scheduler=scheduler,
            workers=workers,
            cache_dir=cache_dir,
            no_cache=no_cache,
        ).reader(),
    )
    done = []
    for comp in comps:
        for caveat in comp.caveats:
            click.echo(f"caution: {caveat}", err=True)
        for note in comp.notes:
            click.echo(f"note: {note}", err=True)
        done.append(run_comparison(comp, alpha=alpha, seed=seed))
    if fmt == "json":
        import orjson

        if len(done) == 1:
            click.echo(to_json(done[0].result, explanations=done[0].explanations), nl=False)
        else:
            doc = {"comparisons": [to_dict(c.result, explanations=c.explanations) for c in done]}
            click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
    else:
        view = to_markdown if fmt == "md" else to_table
        text = [view(c.result, explanations=c.explanations) for c in done]
        click.echo("\n".join(text), nl=False)
    if fail_on_significant and any(c.result.any_significant for c in done):
        sys.exit(EXIT_SIGNIFICANT)
