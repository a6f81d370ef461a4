"""Options shared by ``quicsm diff`` and ``quicsm report``: how the two groups are formed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from quicsm.cli.states_option import split_app_limited_option, states_option
from quicsm.cli.trace_options import WHERE_HELP
from quicsm.core.errors import InputError

if TYPE_CHECKING:  # imported when a command runs, not for --help
    from quicsm.compare.grouping import Comparison, OnError
    from quicsm.compare.load import Accounts, Reader
    from quicsm.core.diagnostics import Diagnostics


class GroupCommand(click.Command):
    """A command whose ``--vs`` takes every following path: ``A1 A2 --vs B1 B2``.

    Click options take one value each, so ``--vs B1 B2`` is rewritten to ``--vs B1 --vs B2``
    (up to the next option) before parsing.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        out: list[str] = []
        in_vs = False
        for arg in args:
            if arg == "--vs":
                in_vs = True
                continue
            if arg.startswith("-"):
                in_vs = False
                out.append(arg)
            elif in_vs:
                out += ["--vs", arg]
            else:
                out.append(arg)
        if in_vs and (not out or out[-2:-1] != ["--vs"]):
            out.append("--vs")  # a dangling --vs: let click report the missing value
        return super().parse_args(ctx, out)


def group_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with PATHS, --vs, --by, --where, --within, --baseline, --lenient,
    --states."""
    options = [
        click.argument("paths", nargs=-1, required=True),
        click.option(
            "--vs",
            "vs_paths",
            multiple=True,
            metavar="PATH...",
            help="Paths of group B; the PATHS before it are group A.",
        ),
        click.option(
            "--by",
            "by_label",
            metavar="LABEL",
            help="Form groups by this label (run.json field, trace label, title, code_version, "
            "vantage; `quicsm labels` lists them).",
        ),
        click.option(
            "--where",
            "where",
            multiple=True,
            metavar="KEY=VALUE",
            help=WHERE_HELP,
        ),
        click.option(
            "--within",
            "within",
            multiple=True,
            metavar="LABEL",
            help="Compare the groups within each value of this label (e.g. scenario) and "
            "combine (repeatable). By default quicsm stratifies by a condition whose mix "
            "differs between the groups, and says so.",
        ),
        click.option(
            "--baseline",
            metavar="VALUE",
            help="With --by and more than two values: compare every value with this one "
            "(default: each value with the previous one in natural order).",
        ),
        click.option(
            "--lenient",
            is_flag=True,
            help="Skip unreadable records and files (reported) instead of stopping.",
        ),
    ]
    f = split_app_limited_option(states_option(f))
    for option in reversed(options):
        f = option(f)
    return f


def _checked_primary(
    _ctx: click.Context, _param: click.Parameter, value: Sequence[str]
) -> Sequence[str]:
    """``--primary`` checked as it is parsed, before any trace is read (the library's own
    check, :func:`quicsm.compare.families.policy.parse_primary`)."""
    from quicsm.compare.families.policy import parse_primary

    parse_primary(value)  # an InputError: "Error: --primary ...", exit status 1
    return value


def test_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command with the significance-test options --alpha, --primary and --seed."""
    f = click.option(
        "--primary",
        "primary",
        multiple=True,
        metavar="FAMILY[:SUBJECT]",
        callback=_checked_primary,
        help="The primary family, fixed before looking (repeatable; default: outcomes and "
        "states, i.e. completion time/throughput per stratum and the time share of every "
        "state). FAMILY is outcomes, states, edges, dwell or invariants; SUBJECT narrows it "
        "(states:Recovery, edges:Recovery->CongestionAvoidance, outcomes:completion_ms@jitter); "
        "a SUBJECT that names nothing is an error naming the nearest ones. "
        "Primary tests are Holm-adjusted; every other test is exploratory (Benjamini-Hochberg).",
    )(f)
    f = click.option(
        "--seed", type=int, default=0, show_default=True, help="Seed of the permutation tests."
    )(f)
    return click.option(
        "--alpha",
        type=click.FloatRange(0, 1, min_open=True, max_open=True),
        default=0.05,
        show_default=True,
        help="Significance level of the whole verdict (anything significant), split between "
        "the Holm-adjusted primary tests (0.8 of it) and the Benjamini-Hochberg-adjusted "
        "exploratory ones (0.2).",
    )(f)


def comparisons(
    *,
    paths: Sequence[str],
    vs_paths: Sequence[str],
    by_label: str | None,
    where: Sequence[str],
    baseline: str | None,
    lenient: bool,
    within: Sequence[str] = (),
    metrics: bool = False,
    states: str = "hybrid",
    reader: Reader | None = None,
    accounts: Accounts | None = None,
    diagnostics: Diagnostics | None = None,
) -> list[Comparison]:
    """Turn the group options into comparisons (one, or several with ``--by``); ``reader``
    reads the files and ``accounts`` counts their connection accounts (an engine's, see
    :mod:`quicsm.cli.engine_options`); what the reads skipped is added to ``diagnostics``."""
    from quicsm.compare.grouping import parse_where
    from quicsm.compare.load import compare_by_label, compare_paths

    conditions = parse_where(where)
    on_error: OnError = "skip" if lenient else "raise"
    if vs_paths and by_label:
        raise InputError("give either --vs (two path groups) or --by LABEL, not both")
    if vs_paths:
        if baseline is not None:
            raise InputError("--baseline only applies with --by")
        return [
            compare_paths(
                paths,
                vs_paths,
                where=conditions,
                within=within,
                on_error=on_error,
                metrics=metrics,
                states=states,
                reader=reader,
                accounts=accounts,
                diagnostics=diagnostics,
            )
        ]
    if by_label:
        return compare_by_label(
            paths,
            by_label,
            where=conditions,
            baseline=baseline,
            within=within,
            on_error=on_error,
            metrics=metrics,
            states=states,
            reader=reader,
            accounts=accounts,
            diagnostics=diagnostics,
        )
    raise InputError("say how to form the two groups: A_PATH... --vs B_PATH..., or --by LABEL")
