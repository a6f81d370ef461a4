"""Read the traces under paths and form the groups to compare: the file-reading front of
:mod:`quicsm.compare.grouping` (which only groups frames it is given).

- :func:`compare_paths`: group A = the traces under some paths, group B = those under others;
- :func:`compare_by_label`: one group per value of a label.

With ``metrics=True`` (the default) the congestion metrics
(:func:`quicsm.extract.read.read_metrics`) are read as well and attached to each group: the
report's representative traces and the explanations of changes (losses, PTOs, spurious losses)
come from them.

Each file is decompressed once for the whole comparison, however many times it is read (its
states, its metrics, its packets): :func:`quicsm.qlog.blocks.keep_decompressed` is open while
the groups are read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import polars as pl

from quicsm.compare.grouping import (
    Comparison,
    OnError,
    labelled_traces,
    split_by_label,
    split_paths,
)
from quicsm.core.diagnostics import Diagnostics, warned_once
from quicsm.core.errors import InputError
from quicsm.qlog.blocks import keep_decompressed

__all__ = [
    "Accounts",
    "Reader",
    "attach_accounts",
    "compare_by_label",
    "compare_paths",
    "read_labelled",
    "traces_where",
]

#: reads paths (given on_error, whether metrics are wanted, and the states mode) into the
#: transitions frame, the trace table of :func:`quicsm.extract.read.read_traces`, the metrics
#: (or None) and what reading reported: how a parallel engine (:mod:`quicsm.engine`) replaces
#: the default readers
Reader = Callable[
    [Sequence[str], OnError, bool, str],
    tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | None, Diagnostics],
]

#: counts the connection account (:func:`quicsm.extract.account.read_account`) of the traces
#: read: given their transitions, metrics, trace table (``trace, labels``), on_error, the
#: states mode and the diagnostics of the reads so far, returns the account's rows and adds to
#: those diagnostics what reading the packets skipped (a record they hold already is not
#: counted again); how an engine's cache (:func:`quicsm.engine.accounts.cached_account`)
#: replaces counting from the files every time
Accounts = Callable[
    [pl.DataFrame, pl.DataFrame, pl.DataFrame, OnError, str, Diagnostics], pl.DataFrame
]


def traces_where(
    paths: Sequence[str], *, where: Mapping[str, str], on_error: OnError
) -> pl.DataFrame:
    """``file, trace, labels`` of the traces under ``paths`` whose labels satisfy ``where``
    (every trace when ``where`` is empty). Reads only the trace headers."""
    from quicsm.extract.read import read_traces

    return labelled_traces(read_traces(list(paths), on_error=on_error), where=where)


def read_labelled(
    paths: Sequence[str],
    *,
    on_error: OnError,
    metrics: bool = False,
    states: str = "hybrid",
    notes: list[str] | None = None,
    reader: Reader | None = None,
    split_app_limited: bool = False,
    diagnostics: Diagnostics | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | None]:
    """Transitions, labelled traces (``file, trace, labels``) and, when asked, metrics of
    every trace under ``paths``; ``states`` as in :func:`quicsm.extract.read.read_transitions`.
    The states the traces cannot show ("... cannot be derived: ...") are added to ``notes``.
    ``reader`` reads them instead of :mod:`quicsm.extract.read` (the engine's,
    :mod:`quicsm.engine`). ``split_app_limited``: ApplicationLimited split by cause
    (:mod:`quicsm.extract.app_limited_split`; a reader's transitions split already stay so).
    What every read skipped is added to ``diagnostics`` (a record two reads skipped once) and
    warned of once, in one :class:`~quicsm.core.diagnostics.QuicsmWarning` for the call."""
    own = Diagnostics()
    with warned_once(own):
        out = _read_labelled(
            paths,
            on_error=on_error,
            metrics=metrics,
            states=states,
            notes=notes,
            reader=reader,
            split_app_limited=split_app_limited,
            union=own,
        )
    if diagnostics is not None:
        diagnostics.absorb(own)
    return out


def _read_labelled(
    paths: Sequence[str],
    *,
    on_error: OnError,
    metrics: bool,
    states: str,
    notes: list[str] | None,
    reader: Reader | None,
    split_app_limited: bool,
    union: Diagnostics,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | None]:
    from quicsm.extract.app_limited_split import read_split
    from quicsm.extract.read import read_metrics, read_traces, read_transitions

    if not paths:
        raise InputError("no input paths given")
    if reader is not None:
        transitions, table, frame, read_diag = reader(paths, on_error, metrics, states)
        union.absorb(read_diag)
        if split_app_limited:
            split_diag = Diagnostics()
            transitions = read_split(transitions, on_error=on_error, diagnostics=split_diag)
            split_diag.warn()
            union.absorb(split_diag)
        if notes is not None:
            notes.extend(m for m in read_diag.derivation_messages() if m not in notes)
        traces = labelled_traces(table, where={})
        return _files_of_traces(transitions, traces), traces, frame
    reads = [Diagnostics() for _ in range(3)]
    traces = labelled_traces(
        read_traces(list(paths), on_error=on_error, diagnostics=reads[0]), where={}
    )
    transitions = read_transitions(
        list(paths),
        on_error=on_error,
        diagnostics=reads[1],
        states=states,
        split_app_limited=split_app_limited,
    )
    if notes is not None:
        notes.extend(m for m in reads[1].derivation_messages() if m not in notes)
    frame = read_metrics(list(paths), on_error=on_error, diagnostics=reads[2]) if metrics else None
    for read in reads:
        union.absorb(read)
    return _files_of_traces(transitions, traces), traces, frame


def _files_of_traces(transitions: pl.DataFrame, traces: pl.DataFrame) -> pl.DataFrame:
    """A table's rows may name the file they came from (``quicsm states --format csv``
    writes the qlog each trace was read from), while its traces belong to the table: such rows
    get the file of the one trace of that id, so that the table reads back as the traces it
    lists."""
    if transitions.height == 0 or traces.height == 0:
        return transitions
    known = traces.select("file", "trace").unique()
    stray = (
        transitions.select("file", "trace").unique().join(known, on=["file", "trace"], how="anti")
    )
    if stray.height == 0:
        return transitions
    single = known.group_by("trace").agg(pl.col("file").first(), pl.len().alias("_n"))
    single = single.filter(pl.col("_n") == 1).drop("_n").rename({"file": "_table"})
    return (
        transitions.join(single, on="trace", how="left")
        .with_columns(
            pl.when(
                pl.struct("file", "trace").is_in(
                    stray.select(pl.struct("file", "trace")).to_series()
                )
                & pl.col("_table").is_not_null()
            )
            .then(pl.col("_table"))
            .otherwise(pl.col("file"))
            .alias("file")
        )
        .drop("_table")
    )


def compare_paths(
    a_paths: Sequence[str],
    b_paths: Sequence[str],
    *,
    where: Mapping[str, str] | None = None,
    within: Sequence[str] = (),
    on_error: OnError = "raise",
    names: tuple[str, str] | None = None,
    metrics: bool = True,
    states: str = "hybrid",
    reader: Reader | None = None,
    accounts: Accounts | None = None,
    split_app_limited: bool = False,
    diagnostics: Diagnostics | None = None,
) -> Comparison:
    """Group A = traces under ``a_paths``, group B = traces under ``b_paths``; ``states`` as
    in :func:`quicsm.extract.read.read_transitions` (what the traces cannot show is noted), and
    ``split_app_limited`` too; ``accounts`` counts the connection account (see
    :func:`attach_accounts`). What the reads skipped (``on_error="skip"``: the states', the
    metrics', the trace headers' and the account's packets) is added to ``diagnostics``, a
    record several reads skipped counted once, and warned of in one
    :class:`~quicsm.core.diagnostics.QuicsmWarning` for the call (a record is in one warning,
    however many reads skipped it)."""
    own = Diagnostics()
    with warned_once(own), keep_decompressed():
        out = _compare_paths(
            a_paths,
            b_paths,
            where=where,
            within=within,
            on_error=on_error,
            names=names,
            metrics=metrics,
            states=states,
            reader=reader,
            accounts=accounts,
            split_app_limited=split_app_limited,
            diag=own,
        )
    if diagnostics is not None:
        diagnostics.absorb(own)
    return out


def _compare_paths(
    a_paths: Sequence[str],
    b_paths: Sequence[str],
    *,
    where: Mapping[str, str] | None = None,
    within: Sequence[str] = (),
    on_error: OnError = "raise",
    names: tuple[str, str] | None = None,
    metrics: bool = True,
    states: str = "hybrid",
    reader: Reader | None = None,
    accounts: Accounts | None = None,
    split_app_limited: bool = False,
    diag: Diagnostics,
) -> Comparison:
    if not b_paths:
        raise InputError("--vs needs at least one path for group B")
    derivation: list[str] = []
    ta, ra, ma = read_labelled(
        a_paths,
        on_error=on_error,
        metrics=metrics,
        states=states,
        notes=derivation,
        reader=reader,
        split_app_limited=split_app_limited,
        diagnostics=diag,
    )
    tb, rb, mb = read_labelled(
        b_paths,
        on_error=on_error,
        metrics=metrics,
        states=states,
        notes=derivation,
        reader=reader,
        split_app_limited=split_app_limited,
        diagnostics=diag,
    )
    if names is None:
        names = (
            a_paths[0] if len(a_paths) == 1 else "A",
            b_paths[0] if len(b_paths) == 1 else "B",
        )
        if names[0] == names[1]:
            names = ("A", "B")
    frame = pl.concat([ma, mb]) if ma is not None and mb is not None else None
    comparison = split_paths(
        (ta, ra),
        (tb, rb),
        names=names,
        paths=(a_paths, b_paths),
        where=where,
        within=within,
        metrics=frame,
    )
    comparison.notes.extend(derivation)
    if metrics:
        attach_accounts(
            [comparison], on_error=on_error, states=states, accounts=accounts, diagnostics=diag
        )
    return comparison


def compare_by_label(
    paths: Sequence[str],
    label: str,
    *,
    where: Mapping[str, str] | None = None,
    baseline: str | None = None,
    within: Sequence[str] = (),
    on_error: OnError = "raise",
    metrics: bool = True,
    states: str = "hybrid",
    reader: Reader | None = None,
    accounts: Accounts | None = None,
    split_app_limited: bool = False,
    diagnostics: Diagnostics | None = None,
) -> list[Comparison]:
    """One comparison per pair of values of ``label`` among the traces under ``paths``
    (``accounts``: see :func:`attach_accounts`; ``split_app_limited`` and ``diagnostics`` as
    in :func:`compare_paths`)."""
    own = Diagnostics()
    with warned_once(own), keep_decompressed():
        out = _compare_by_label(
            paths,
            label,
            where=where,
            baseline=baseline,
            within=within,
            on_error=on_error,
            metrics=metrics,
            states=states,
            reader=reader,
            accounts=accounts,
            split_app_limited=split_app_limited,
            diag=own,
        )
    if diagnostics is not None:
        diagnostics.absorb(own)
    return out


def _compare_by_label(
    paths: Sequence[str],
    label: str,
    *,
    where: Mapping[str, str] | None = None,
    baseline: str | None = None,
    within: Sequence[str] = (),
    on_error: OnError = "raise",
    metrics: bool = True,
    states: str = "hybrid",
    reader: Reader | None = None,
    accounts: Accounts | None = None,
    split_app_limited: bool = False,
    diag: Diagnostics,
) -> list[Comparison]:
    derivation: list[str] = []
    transitions, traces, frame = read_labelled(
        paths,
        on_error=on_error,
        metrics=metrics,
        states=states,
        notes=derivation,
        reader=reader,
        split_app_limited=split_app_limited,
        diagnostics=diag,
    )
    comparisons = split_by_label(
        transitions,
        traces,
        label,
        where=where,
        baseline=baseline,
        within=within,
        paths=paths,
        metrics=frame,
    )
    for comparison in comparisons:
        comparison.notes.extend(derivation)
    if metrics:
        attach_accounts(
            comparisons, on_error=on_error, states=states, accounts=accounts, diagnostics=diag
        )
    return comparisons


def attach_accounts(
    comparisons: Sequence[Comparison],
    *,
    on_error: OnError,
    states: str = "hybrid",
    accounts: Accounts | None = None,
    diagnostics: Diagnostics | None = None,
) -> None:
    """Give every group with metrics its connection account (:mod:`quicsm.extract.account`),
    computed once for all the traces compared (a trace in several groups is read once) by
    ``accounts`` (default: the packets of their files are read here, for the counts that come
    from packets); ``states``: how their transitions were read. What reading the packets
    skipped (``on_error="skip"``) is warned of (:class:`~quicsm.core.diagnostics.QuicsmWarning`)
    and added to ``diagnostics``, where a record an earlier read skipped is not counted again."""

    groups = [g for c in comparisons for g in (c.a, c.b) if g.metrics is not None]
    if not groups:
        return
    seen: set[tuple[str, str]] = set()
    transitions, metrics, traces = [], [], []
    for g in groups:
        keys = [(str(f), str(t)) for f, t in g.traces.select("file", "trace").iter_rows()]
        new = [k for k in keys if k not in seen]
        seen.update(new)
        if not new:
            continue
        chosen = pl.DataFrame(
            {"_f": [k[0] for k in new], "_t": [k[1] for k in new]},
            schema={"_f": pl.String, "_t": pl.String},
        )

        def keep(frame: pl.DataFrame, chosen: pl.DataFrame = chosen) -> pl.DataFrame:
            return frame.join(
                chosen,
                left_on=[pl.col("file").cast(pl.String), pl.col("trace").cast(pl.String)],
                right_on=["_f", "_t"],
                how="semi",
            )

        transitions.append(keep(g.transitions))
        assert g.metrics is not None
        metrics.append(keep(g.metrics))
        traces.append(keep(g.traces).select("trace", "labels"))
    count = accounts if accounts is not None else _read_accounts
    own = Diagnostics()
    account = count(
        pl.concat(transitions, how="vertical_relaxed"),
        pl.concat(metrics, how="vertical_relaxed"),
        pl.concat(traces, how="vertical_relaxed"),
        on_error,
        states,
        own,
    )
    own.warn()
    if diagnostics is not None:
        diagnostics.absorb(own)
    for g in groups:
        g.account = account.join(
            g.traces.select(pl.col("trace").cast(pl.String).alias("_t")),
            left_on=pl.col("trace").cast(pl.String),
            right_on="_t",
            how="semi",
        )


def _read_accounts(
    transitions: pl.DataFrame,
    metrics: pl.DataFrame,
    traces: pl.DataFrame,
    on_error: OnError,
    states: str,
    diagnostics: Diagnostics,
) -> pl.DataFrame:
    """The account counted from the files (no cache): :func:`read_account`."""
    from quicsm.extract.account import read_account

    return read_account(transitions, metrics, traces, on_error=on_error, diagnostics=diagnostics)
