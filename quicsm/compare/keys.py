"""Trace keys and strata shared by every family of ``quicsm diff``: a trace's key is unique
across files (``file``, a unit separator, ``trace``); a stratum groups the traces that may be
compared with each other."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from quicsm.core.errors import InputError
from quicsm.core.frames import KEY_DTYPE, normalize_transitions
from quicsm.core.states import CANONICAL_STATES
from quicsm.stats import significance as sig

__all__ = ["KEY_SEP", "Strata", "keyed_transitions", "split_key"]

KEY_SEP = "\x1f"


def key_expr() -> pl.Expr:
    return pl.concat_str(
        [
            pl.col("file").cast(KEY_DTYPE).fill_null(""),
            pl.lit(KEY_SEP),
            pl.col("trace").cast(KEY_DTYPE),
        ]
    )


def keyed_transitions(df: pl.DataFrame) -> pl.DataFrame:
    """Make ``trace`` unique across files (ids only need be unique per file), then normalise:
    keying first keeps two files' traces of the same id apart."""
    if not isinstance(df, pl.DataFrame):
        raise InputError(f"diff needs transitions frames, got {type(df).__name__}")
    if "trace" in df.columns:
        if "file" not in df.columns:
            df = df.with_columns(pl.lit(None, pl.String).alias("file"))
        df = df.with_columns(key_expr().alias("trace"))
    return normalize_transitions(df)


def split_key(key: str) -> tuple[str, str]:
    """``(file, trace)`` of a key made by :func:`keyed_transitions`."""
    file, _, trace = key.partition(KEY_SEP)
    return file, trace


def files(df: pl.DataFrame) -> list[str]:
    if "file" not in df.columns or df.height == 0:
        return []
    return sorted(str(f) for f in df["file"].drop_nulls().unique().to_list())


@dataclass
class Strata:
    """The stratum of every trace key of both groups."""

    of: dict[str, str]
    counts: dict[str, tuple[int, int]]

    @classmethod
    def make(
        cls, strata: Mapping[tuple[str, str], str] | None, a: pl.DataFrame, b: pl.DataFrame
    ) -> Strata | None:
        if strata is None:
            return None
        of = {f"{f or ''}{KEY_SEP}{t}": str(s) for (f, t), s in strata.items()}
        counts: dict[str, list[int]] = {}
        for g, df in enumerate((a, b)):
            for key in df["trace"].unique().to_list():
                s = of.setdefault(key, "(no stratum)")
                counts.setdefault(s, [0, 0])[g] += 1
        return cls(of, {s: (c[0], c[1]) for s, c in sorted(counts.items())})

    def labels(self, keys: Sequence[str]) -> list[str]:
        return [self.of[k] for k in keys]


def shift(
    xa: np.ndarray,
    keys_a: Sequence[str],
    xb: np.ndarray,
    keys_b: Sequence[str],
    st: Strata | None,
    *,
    min_n: int,
    permutations: int,
) -> sig.WelchResult:
    """One number per trace, B against A: within strata when stratified."""
    if st is None:
        return sig.mean_shift(xa, xb, min_n=min_n, permutations=permutations)
    return sig.stratified_shift(
        xa, st.labels(keys_a), xb, st.labels(keys_b), min_n=min_n, permutations=permutations
    )


# -- outcomes ---------------------------------------------------------------------------------


def se_of(w: sig.WelchResult) -> float:
    """The standard error behind a 95% interval of a difference (its half-width / 1.96)."""
    return (w.ci_high - w.ci_low) / (2 * 1.959963984540054)


def state_names(*frames: pl.DataFrame) -> list[str]:
    seen: set[str] = set()
    for df in frames:
        seen.update(str(s) for s in df["state"].cast(pl.String).unique().to_list())
    order = {s: i for i, s in enumerate(CANONICAL_STATES)}
    return sorted(seen, key=lambda s: (order.get(s, len(order)), s))


def state_order() -> Any:
    rank = {"INITIAL": -1, **{s: i for i, s in enumerate(CANONICAL_STATES)}, "TERMINAL": 99}
    return lambda s: rank.get(s, 98)
