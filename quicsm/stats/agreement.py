"""Time-weighted agreement between two state timelines of the same traces.

Used to validate derived states against the states a producer logged itself
(``benchmarks/derive_accuracy.py``, ``docs/derive.md``). Both inputs are transitions frames
(:data:`quicsm.core.frames.TRANSITIONS_SCHEMA`): each row's state lasts until the trace's next
row, the last until ``end_ms``.
"""

from __future__ import annotations

import polars as pl

__all__ = ["agreement_by_state", "confusion", "overlap", "overall_agreement"]


def overlap(reference: pl.DataFrame, candidate: pl.DataFrame) -> pl.DataFrame:
    """``trace, reference, candidate, ms``: how long each pair of states held at once.

    Only traces present in ``reference`` are compared; time is counted from each trace's
    first reference row to its ``end_ms``.
    """
    ref = reference.select("trace", "time_ms", pl.col("state").cast(pl.String), "end_ms")
    cand = candidate.select(
        "trace", "time_ms", pl.col("state").cast(pl.String).alias("candidate")
    ).join(ref.select("trace").unique(), on="trace")
    points = (
        pl.concat([ref.select("trace", "time_ms"), cand.select("trace", "time_ms")])
        .unique()
        .sort("trace", "time_ms")
    )
    ends = ref.group_by("trace").agg(pl.col("end_ms").max())
    merged = (
        points.join_asof(
            ref.select("trace", "time_ms", pl.col("state").alias("reference")).sort(
                "trace", "time_ms"
            ),
            on="time_ms",
            by="trace",
            strategy="backward",
            check_sortedness=False,  # sorted by trace, then time, just above
        )
        .join_asof(
            cand.sort("trace", "time_ms"),
            on="time_ms",
            by="trace",
            strategy="backward",
            check_sortedness=False,
        )
        .join(ends, on="trace")
        .with_columns(
            (
                pl.col("time_ms").shift(-1).over("trace").fill_null(pl.col("end_ms"))
                - pl.col("time_ms")
            )
            .clip(lower_bound=0.0)
            .alias("ms")
        )
        .filter(pl.col("reference").is_not_null())
        .with_columns(pl.col("candidate").fill_null("Init"))
    )
    return (
        merged.group_by("trace", "reference", "candidate")
        .agg(pl.col("ms").sum())
        .sort("trace", "reference", "candidate")
    )


def overall_agreement(pairs: pl.DataFrame) -> float:
    """Share of the time both timelines were in the same state (nan without time)."""
    total = float(pairs["ms"].sum())
    same = float(pairs.filter(pl.col("reference") == pl.col("candidate"))["ms"].sum())
    return same / total if total else float("nan")


def agreement_by_state(pairs: pl.DataFrame) -> pl.DataFrame:
    """``reference, share, agreement``: each reference state's share of the time and the
    share of that time the candidate agreed (recall), most time first."""
    total = pairs["ms"].sum()
    return (
        pairs.group_by("reference")
        .agg(
            pl.col("ms").sum().alias("ms"),
            pl.col("ms").filter(pl.col("reference") == pl.col("candidate")).sum().alias("same"),
        )
        .with_columns(
            (pl.col("ms") / total).alias("share"),
            (pl.col("same") / pl.col("ms")).alias("agreement"),
        )
        .select("reference", "share", "agreement")
        .sort("share", "reference", descending=[True, False])
    )


def confusion(pairs: pl.DataFrame, states: list[str]) -> pl.DataFrame:
    """Rows: reference state; columns: candidate state; cells: share of all the time."""
    total = pairs["ms"].sum() or 1.0
    table = pairs.group_by("reference", "candidate").agg(pl.col("ms").sum() / total)
    rows = []
    for ref in states:
        row: dict[str, object] = {"reference": ref}
        for cand in states:
            cell = table.filter((pl.col("reference") == ref) & (pl.col("candidate") == cand))
            row[cand] = float(cell["ms"].sum()) if cell.height else 0.0
        rows.append(row)
    return pl.DataFrame(rows)
