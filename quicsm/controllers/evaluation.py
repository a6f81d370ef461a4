"""Measuring identification on labelled traces: ground truth, the fitting set, the confusion
matrix, accuracy per label, "unknown" for a controller left out of training, and
cross-validation by corpus.

The shipped signatures are fitted on whole corpora (:func:`fitting_set`) and measured on a
corpus held back entirely: a draw of the same lab scenarios with its own seed, so its runs met
loss and jitter draws that no training run met. :func:`split_of` splits one corpus by
repetition (the first 60 % of each scenario's repetitions train — runs 1-3 of 5, run 1 of 2)
for a corpus that has to serve as both.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import numpy as np
import orjson
import polars as pl

from quicsm.controllers.batch_features import compute_features
from quicsm.controllers.calibration import kind_of
from quicsm.controllers.signatures import (
    BBR1,
    BBR2,
    CUBIC,
    FAMILIES,
    MIN_CUT_FITS,
    NEWRENO,
    UNKNOWN,
    Box,
    classify,
    fit_signatures,
)
from quicsm.core.aliases import CC_ALGORITHM_KEYS
from quicsm.core.diagnostics import QuicsmWarning
from quicsm.core.frames import KEY_DTYPE
from quicsm.extract.read import read_metrics, read_traces, read_transitions
from quicsm.qlog.paths import PathLike, expand_paths

#: a declared controller name (lower case, letters and digits only) -> family
DECLARED_FAMILIES: Final[dict[str, str]] = {
    "reno": NEWRENO,
    "newreno": NEWRENO,
    "cubic": CUBIC,
    "bbr": BBR1,
    "bbr1": BBR1,
    "bbrv1": BBR1,
    "bbr2": BBR2,
    "bbrv2": BBR2,
    "bbr3": BBR2,
    "bbrv3": BBR2,
}
#: the controller a lab stack runs when its run does not declare one: quic-go's "Cubic" sender
#: runs in Reno mode unless patched; aioquic's default is CUBIC
STACK_DEFAULTS: Final[dict[str, str]] = {"quic-go": NEWRENO, "aioquic": CUBIC}
TRAIN_RUNS: Final[frozenset[int]] = frozenset({1, 2, 3})


def family_of(name: str | None) -> str | None:
    if not name:
        return None
    return DECLARED_FAMILIES.get("".join(c for c in name.lower() if c.isalnum()))


def truth_of(labels: Mapping[str, Any]) -> str | None:
    """The true family of a labelled trace: its declared controller, else its stack's default."""
    for key in CC_ALGORITHM_KEYS:
        family = family_of(labels.get(key) if isinstance(labels.get(key), str) else None)
        if family:
            return family
    return STACK_DEFAULTS.get(str(labels.get("stack")))


def split_of(run: Any, repetitions: Any = None) -> str:
    """``train`` or ``heldout`` for a repetition number: the first 60 % of a scenario's
    repetitions train (rounded down, at least one), the rest are held back — runs 1-3 of 5,
    run 1 of 2. Without a repetition count, runs 1-3 of every five train."""
    try:
        number = int(run)
    except (TypeError, ValueError):
        return "heldout"
    try:
        total = int(repetitions)
    except (TypeError, ValueError):
        total = 0
    if total >= 2:
        return "train" if number <= max(1, (3 * total) // 5) else "heldout"
    return "train" if ((number - 1) % 5) + 1 in TRAIN_RUNS else "heldout"


def label_frame(features: pl.DataFrame, traces: pl.DataFrame) -> pl.DataFrame:
    """``features`` with stack, version, scenario, run, split and controller (the truth)."""
    rows = []
    for trace, raw in traces.select("trace", "labels").iter_rows():
        labels = orjson.loads(raw) if raw else {}
        rows.append(
            {
                "trace": trace,
                "stack": str(labels.get("stack")),
                "version": str(labels.get("version")),
                "scenario": str(labels.get("scenario")),
                "run": str(labels.get("run")),
                "split": split_of(labels.get("run"), labels.get("repetitions")),
                "controller": truth_of(labels),
                "role": str(labels.get("role")) if labels.get("role") is not None else None,
            }
        )
    info = pl.DataFrame(rows, schema={"trace": KEY_DTYPE, "stack": pl.String, "version": pl.String,
                                      "scenario": pl.String, "run": pl.String, "split": pl.String,
                                      "controller": pl.String, "role": pl.String})  # fmt: skip
    return features.join(info, on="trace", how="left")


def load_labelled(paths: PathLike | Iterable[PathLike]) -> pl.DataFrame:
    """Features of every trace in ``paths`` with their labels, split and true controller."""
    files = expand_paths(paths)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        transitions = read_transitions(files)
        metrics = read_metrics(files)
        traces = read_traces(files)
    return label_frame(compute_features(metrics, transitions), traces)


def fitting_set(paths: Iterable[PathLike]) -> pl.DataFrame:
    """The labelled sender traces of ``paths``, every one of them training (``split`` is
    ``train``): the frame the shipped signatures are fitted on. Each path is read on its own and
    keeps its name in ``corpus`` (for cross-validation by corpus)."""
    frames = [
        senders(load_labelled([path])).with_columns(
            pl.lit("train").alias("split"), pl.lit(str(path)).alias("corpus")
        )
        for path in paths
    ]
    return pl.concat(frames, how="vertical").filter(pl.col("controller").is_not_null())


def cross_validate(fitting: pl.DataFrame) -> pl.DataFrame:
    """Leave one corpus out: for each ``corpus`` of ``fitting``, fit on the others and classify
    it. One row per corpus: traces, right, wrong, unknown, and the share left unknown when each
    controller is also left out of the fit (the lowest over the controllers)."""
    rows = []
    for name in sorted(fitting["corpus"].unique().to_list()):
        train = fitting.filter(pl.col("corpus") != name)
        test = fitting.filter(pl.col("corpus") == name)
        predicted = predict(test, fit_signatures(train))
        right = predicted.filter(pl.col("family") == pl.col("controller")).height
        unknown = predicted.filter(pl.col("family") == UNKNOWN).height
        loo = leave_one_out(train, test)
        rows.append(
            {
                "corpus": name,
                "traces": predicted.height,
                "right": right,
                "wrong": predicted.height - right - unknown,
                "unknown": unknown,
                "accuracy": right / max(predicted.height, 1),
                "left_out_unknown_min": min(
                    (u / t for u, t in zip(loo["unknown"], loo["traces"], strict=True) if t),
                    default=float("nan"),
                ),
            }
        )
    return pl.DataFrame(rows)


def senders(frame: pl.DataFrame) -> pl.DataFrame:
    """The sending side of every lab connection: the server (the lab's objects flow from server
    to client), by vantage point or, for traces that do not say, by the run's ``role`` label."""
    vantage = pl.col("vantage").cast(pl.String)
    is_server = (vantage == "server") | ((vantage == "unknown") & (pl.col("role") == "server"))
    return frame.filter(is_server)


def predict(
    frame: pl.DataFrame,
    signatures: Sequence[Box],
    families: Sequence[str] = FAMILIES,
    calibration: Mapping[str, tuple[int, int]] | None = None,
) -> pl.DataFrame:
    """``frame`` with the answer (``family``), its ``confidence``, whether boxes of two
    families took the trace (``ambiguous``), among the known ``families``, the answer's
    ``kind`` (:func:`quicsm.controllers.calibration.kind_of`) and its ``evidence``. With a
    ``calibration`` table the confidence is calibrated and weak answers are unknown."""
    rows = list(frame.iter_rows(named=True))
    verdicts = [classify(row, signatures, families, calibration) for row in rows]
    raw = verdicts if calibration is None else [classify(r, signatures, families) for r in rows]
    return frame.with_columns(
        pl.Series("family", [v.family for v in verdicts], pl.String),
        pl.Series("confidence", [v.confidence for v in verdicts], pl.Float64),
        pl.Series(
            "ambiguous", [v.family == UNKNOWN and len(v.matched) > 1 for v in verdicts], pl.Boolean
        ),
        pl.Series("kind", [kind_of(v, r) for v, r in zip(raw, rows, strict=True)], pl.String),
        pl.Series("evidence", [v.evidence for v in verdicts], pl.String),
    )


def calibration_answers(fitting: pl.DataFrame, others: Sequence[pl.DataFrame] = ()) -> pl.DataFrame:
    """The answers the calibration counts (:mod:`quicsm.controllers.calibration`), each given
    by boxes not fitted on its trace: every corpus of ``fitting`` answered by boxes fitted on
    the other corpora, and every frame of ``others`` (labelled senders never fitted on) by
    boxes fitted on all of ``fitting``. Uncalibrated answers, with their ``kind``."""
    parts = []
    for name in sorted(fitting["corpus"].unique().to_list()):
        train = fitting.filter(pl.col("corpus") != name)
        test = fitting.filter(pl.col("corpus") == name)
        parts.append(predict(test, fit_signatures(train)))
    boxes = fit_signatures(fitting)
    parts += [predict(frame, boxes) for frame in others]
    columns = ["corpus", "stack", "scenario", "controller", "family", "kind", "n_reductions"]
    return pl.concat([p.select(columns) for p in parts], how="vertical")


def confusion(predicted: pl.DataFrame) -> pl.DataFrame:
    """Rows: true controller; columns: predicted family (``unknown`` included); cells: traces."""
    columns = [f for f in (NEWRENO, CUBIC, BBR1, BBR2, UNKNOWN)]
    rows = []
    for truth in sorted(predicted["controller"].drop_nulls().unique().to_list()):
        part = predicted.filter(pl.col("controller") == truth)
        counts = {c: part.filter(pl.col("family") == c).height for c in columns}
        rows.append({"controller": truth, **counts, "traces": part.height})
    return pl.DataFrame(rows, schema={"controller": pl.String, **{c: pl.Int64 for c in columns},
                                      "traces": pl.Int64})  # fmt: skip


def accuracy_by(predicted: pl.DataFrame, key: str) -> pl.DataFrame:
    """Per value of ``key``: traces, answered (not unknown), correct, accuracy over all traces
    (unknown counts as wrong) and accuracy over answered traces."""
    return (
        predicted.with_columns(
            (pl.col("family") == pl.col("controller")).alias("_correct"),
            (pl.col("family") != UNKNOWN).alias("_answered"),
        )
        .group_by(key)
        .agg(
            pl.len().alias("traces"),
            pl.col("_answered").sum().alias("answered"),
            pl.col("_correct").sum().alias("correct"),
        )
        .with_columns(
            (pl.col("correct") / pl.col("traces")).alias("accuracy"),
            (pl.col("correct") / pl.col("answered")).alias("accuracy_answered"),
        )
        .sort(key)
    )


def leave_one_out(labelled: pl.DataFrame, test: pl.DataFrame | None = None) -> pl.DataFrame:
    """For every controller of the training split: fit without it (its priors too, and the rules
    that name it from explicit BBR phases) and count how many of its held-back traces come out
    ``unknown``, and how many of those had evidence. With ``test``, its traces (all of them)
    are classified instead of the held-back ones."""
    train = labelled.filter(pl.col("split") == "train")
    heldout = labelled.filter(pl.col("split") == "heldout") if test is None else test
    rows = []
    for left_out in sorted(train["controller"].drop_nulls().unique().to_list()):
        boxes = fit_signatures(train, exclude=[left_out])
        known = [f for f in FAMILIES if f != left_out]
        part = predict(heldout.filter(pl.col("controller") == left_out), boxes, known)
        with_evidence = part.filter((pl.col("n_reductions") > 0) | (pl.col("n_epochs") > 0))
        rows.append(
            {
                "left_out": left_out,
                "traces": part.height,
                "unknown": part.filter(pl.col("family") == UNKNOWN).height,
                "with_evidence": with_evidence.height,
                "unknown_with_evidence": with_evidence.filter(pl.col("family") == UNKNOWN).height,
            }
        )
    return pl.DataFrame(rows, schema={"left_out": pl.String, "traces": pl.Int64,
                                      "unknown": pl.Int64, "with_evidence": pl.Int64,
                                      "unknown_with_evidence": pl.Int64})  # fmt: skip


def feature_summary(frame: pl.DataFrame) -> pl.DataFrame:
    """Per true controller: how many traces have each kind of evidence, and the range (min,
    median, max) of the reduction factor, its spread, the growth, the curvature, the cubic fit
    and the RTT."""
    rows = []
    for truth in sorted(frame["controller"].drop_nulls().unique().to_list()):
        part = frame.filter(pl.col("controller") == truth)
        row: dict[str, Any] = {"controller": truth, "traces": part.height}
        for name, where in (
            ("beta", pl.col("n_reductions") >= 1),
            ("beta_spread", pl.col("n_reductions") >= 2),
            ("growth", pl.col("n_epochs") >= 1),
            ("curvature", pl.col("n_epochs") >= 1),
            ("cubic_fit", pl.col("n_epochs") >= 1),
            ("rtt_ms", pl.col("rtt_ms").is_not_null()),
        ):
            values = [float(v) for v in part.filter(where)[name].drop_nulls().to_list()]
            row[name] = (
                f"{min(values):.2f} / {float(np.median(values)):.2f} / {max(values):.2f} "
                f"(n={len(values)})"
                if values
                else ""
            )
        rows.append(row)
    return pl.DataFrame(rows)


#: a cut fit beyond this (ln units) leans to one controller's prediction of the growth since
#: the cut (residuals within 28 % of each other are no evidence either way)
CUT_FIT_LEAN: Final[float] = 0.25


def cut_fit_summary(frame: pl.DataFrame) -> pl.DataFrame:
    """Per stack and true controller, over senders with at least one cut followed by growth
    (``n_cut_fits`` > 0): how many, the median ``cut_fit`` and the shares leaning to CUBIC's
    prediction of the growth since the cut (> :data:`CUT_FIT_LEAN`) and to Reno's (<
    -:data:`CUT_FIT_LEAN`), and the largest ``cut_fit`` among the senders the prior *CUBIC by the
    growth since its cuts* looks at (:data:`~quicsm.controllers.signatures.MIN_CUT_FITS` fits or
    more after cuts by an exact 0.66-0.74; null when none)."""
    part = frame.filter(pl.col("n_cut_fits") > 0)
    in_domain = (
        (pl.col("n_cut_fits") >= MIN_CUT_FITS)
        & pl.col("beta").is_between(0.66, 0.74)
        & (pl.col("beta_spread").fill_null(0.0) <= 0.02)
    )
    return (
        part.group_by("stack", "controller")
        .agg(
            pl.len().alias("senders"),
            pl.col("n_cut_fits").sum().alias("cuts"),
            pl.col("cut_fit").median().alias("median_cut_fit"),
            (pl.col("cut_fit") > CUT_FIT_LEAN).mean().alias("share_cubic_closer"),
            (pl.col("cut_fit") < -CUT_FIT_LEAN).mean().alias("share_reno_closer"),
            pl.col("cut_fit").filter(in_domain).max().alias("max_cut_fit_exact_07"),
        )
        .sort("stack", "controller")
    )


def undo_summary(frame: pl.DataFrame) -> pl.DataFrame:
    """Per stack, version and true controller: the senders, those with a cut undone
    (``n_undone`` > 0: the window restored within an RTT after a spurious-loss report), the
    cuts undone, and the senders and cuts undone into slow start (``n_undone_slow_start``: the
    window doubling again after it was restored)."""
    return (
        frame.group_by("stack", "version", "controller")
        .agg(
            pl.len().alias("senders"),
            (pl.col("n_undone") > 0).sum().alias("senders_with_undone"),
            pl.col("n_undone").sum().alias("cuts_undone"),
            (pl.col("n_undone_slow_start") > 0).sum().alias("senders_undone_into_slow_start"),
            pl.col("n_undone_slow_start").sum().alias("cuts_undone_into_slow_start"),
        )
        .sort("stack", "version", "controller")
    )


#: a sender with at least this many window reductions has shown its loss response often enough
#: that it should be named (the coverage target of docs/identify.md)
MANY_REDUCTIONS: Final[int] = 5


def coverage_by(predicted: pl.DataFrame, key: str) -> pl.DataFrame:
    """Per value of ``key``: senders, those with :data:`MANY_REDUCTIONS` reductions or more,
    named (not unknown), named among those, right and wrong answers, and the shares:
    ``coverage`` (named / senders), ``coverage_reductions`` (named / senders with many
    reductions) and ``accuracy_named`` (right / named)."""
    many = pl.col("n_reductions") >= MANY_REDUCTIONS
    named = pl.col("family") != UNKNOWN
    right = pl.col("family") == pl.col("controller")
    return (
        predicted.group_by(key)
        .agg(
            pl.len().alias("senders"),
            many.sum().alias("with_5_reductions"),
            named.sum().alias("named"),
            (named & many).sum().alias("named_with_5"),
            right.sum().alias("right"),
            (named & ~right).sum().alias("wrong"),
        )
        .with_columns(
            (pl.col("named") / pl.col("senders")).alias("coverage"),
            (pl.col("named_with_5") / pl.col("with_5_reductions")).alias("coverage_reductions"),
            (pl.col("right") / pl.col("named")).alias("accuracy_named"),
        )
        .sort(key)
    )
