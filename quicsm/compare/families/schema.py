"""The one result schema every family of ``quicsm diff`` shares: a family's frame is its subject
and effect columns, then the verdict (:data:`VERDICT`), then what the family counts, then the
test (:data:`TEST`) — one row per question asked of the two groups."""

from __future__ import annotations

from typing import Any

import polars as pl

__all__ = ["TEST", "VERDICT", "frame"]

F = pl.Float64()
I = pl.Int64()  # noqa: E741
S = pl.String()
B = pl.Boolean()

#: the verdict on a row, set by :func:`quicsm.compare.families.policy.adjust`: the p-value
#: adjusted within the row's family, whether it is significant, the family, the smallest
#: difference the test would detect with 80% power (``mde``) at the ``level`` the row faced in
#: its family: from the difference's standard error ``se`` and the degrees of freedom ``df`` of
#: the reference the test's statistic is referred to (null or infinite: the normal)
VERDICT: dict[str, pl.DataType] = {
    "p_value": F,
    "significant": B,
    "family": S,
    "mde": F,
    "se": F,
    "df": F,
    "level": F,
}
#: the test itself: its own p-value, its name and what it says about the data
TEST: dict[str, pl.DataType] = {"p_unadjusted": F, "test": S, "note": S}


def frame(
    rows: list[dict[str, Any]], schema: dict[str, pl.DataType], effect: str, key: list[str]
) -> pl.DataFrame:
    """A family's rows as its frame, ranked by effect size (absolute, NaN last), then by name:
    the order is the same for ``diff(a, b)`` and ``diff(b, a)``."""
    df = pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
    df = df.select(list(schema))
    return (
        df.with_columns(pl.col(effect).abs().fill_nan(None).alias("_effect"))
        .sort(["_effect", *key], descending=[True] + [False] * len(key), nulls_last=True)
        .drop("_effect")
    )
