"""Trace keys and strata shared by every family of ``quicsm diff``: a trace's key is unique
across files (``file``, a unit separator, ``trace``); a stratum groups the traces that may be
compared with each other."""

from __future__ import annotations

import math
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


#: strata as given: ``(file, trace) -> stratum``, or ``(group, file, trace) -> stratum``
StrataMap = (
    Mapping[tuple[str, str], str]
    | Mapping[tuple[str, str, str], str]
    | Mapping[tuple[str, ...], str]
)


@dataclass
class Strata:
    """The stratum of every trace key of both groups."""

    of: dict[str, str]
    counts: dict[str, tuple[int, int]]
    #: group B's strata when they differ from A's for the same key (a trace key in both
    #: groups, of different lengths)
    of_b: dict[str, str] | None = None

    @classmethod
    def make(
        cls,
        strata: StrataMap | None,
        a: pl.DataFrame,
        b: pl.DataFrame,
    ) -> Strata | None:
        """The strata of ``strata``: ``(file, trace) -> stratum`` for a trace whatever its
        group (the labels a stratum is made of belong to the trace), or ``(group, file,
        trace)`` with group ``"a"`` or ``"b"`` for a trace key that both groups hold with
        different strata (e.g. two tables whose traces are numbered alike); a group's own
        entry wins over the shared one."""
        if strata is None:
            return None
        shared: dict[str, str] = {}
        own: tuple[dict[str, str], dict[str, str]] = ({}, {})
        for k, s in strata.items():
            if len(k) == 3 and k[0] in ("a", "b"):
                own[k[0] == "b"][f"{k[1] or ''}{KEY_SEP}{k[2]}"] = str(s)
            elif len(k) == 2:
                shared[f"{k[0] or ''}{KEY_SEP}{k[1]}"] = str(s)
            else:
                raise InputError(
                    f"a stratum is keyed by (file, trace) or (group, file, trace) with group "
                    f"'a' or 'b', got {k!r}"
                )
        of: tuple[dict[str, str], dict[str, str]] = ({}, {})
        counts: dict[str, list[int]] = {}
        for g, df in enumerate((a, b)):
            for key in df["trace"].unique().to_list():
                s = own[g].get(key, shared.get(key, "(no stratum)"))
                of[g][key] = s
                counts.setdefault(s, [0, 0])[g] += 1
        return cls(of[0], {s: (c[0], c[1]) for s, c in sorted(counts.items())}, of[1])

    def labels(self, keys: Sequence[str], *, b: bool = False) -> list[str]:
        of = self.of_b if b and self.of_b is not None else self.of
        return [of[k] for k in keys]


#: groups whose typical traces differ in length by more than this factor are compared within
#: length strata (and said to differ, above the findings)
LENGTH_RATIO = 2.0


@dataclass(frozen=True)
class Lengths:
    """How long the two groups' traces are, in states visited, and whether that differs by more
    than :data:`LENGTH_RATIO` (then time shares, dwell times and the invariants compared per
    trace are compared within length strata, and a permutation test exchanges traces only
    within their length stratum: a long and a short trace are not exchangeable)."""

    median_a: float
    median_b: float

    @property
    def ratio(self) -> float:
        lo, hi = sorted((self.median_a, self.median_b))
        return hi / lo if lo > 0 else math.inf

    @property
    def differ(self) -> bool:
        return self.ratio > LENGTH_RATIO

    def as_dict(self) -> dict[str, Any]:
        return {
            "median_a": self.median_a,
            "median_b": self.median_b,
            "ratio": self.ratio,
            "differ": self.differ,
            "strata": "a factor of 2" if self.differ else None,
        }


def visits(df: pl.DataFrame) -> dict[str, int]:
    """States visited per trace key."""
    if df.height == 0:
        return {}
    counts = df.group_by("trace").len()
    return dict(zip(counts["trace"].to_list(), counts["len"].to_list(), strict=True))


def lengths(a: pl.DataFrame, b: pl.DataFrame) -> Lengths:
    va, vb = visits(a), visits(b)
    return Lengths(
        float(np.median(list(va.values()))) if va else math.nan,
        float(np.median(list(vb.values()))) if vb else math.nan,
    )


def length_strata(a: pl.DataFrame, b: pl.DataFrame, st: Strata | None) -> Strata:
    """``st`` (or one stratum) split by length: traces whose numbers of states visited are in
    the same power of two (1, 2-3, 4-7, ...) share a stratum, within their own stratum."""
    of: tuple[dict[str, str], dict[str, str]] = ({}, {})
    counts: dict[str, list[int]] = {}
    for g, df in enumerate((a, b)):
        for key, n in sorted(visits(df).items()):
            base = st.labels([key], b=g == 1)[0] if st is not None else ""
            length = f"{2 ** int(math.log2(n))}+ states"
            s = f"{base} · {length}" if base else length
            of[g][key] = s
            counts.setdefault(s, [0, 0])[g] += 1
    return Strata(of[0], {s: (c[0], c[1]) for s, c in sorted(counts.items())}, of[1])


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
        xa,
        st.labels(keys_a),
        xb,
        st.labels(keys_b, b=True),
        min_n=min_n,
        permutations=permutations,
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
