"""``identify``: name the congestion controller of every trace in some qlog files.

::

    identify(paths, *, on_error="raise", diagnostics=None, signatures=None) -> pl.DataFrame

One row per trace (:data:`IDENTIFY_SCHEMA`): the family (``NewReno/Reno``, ``Cubic``,
``BBRv1``, ``BBRv2/v3`` or ``unknown``), a calibrated confidence (the probability that the
answer is right, :mod:`quicsm.controllers.calibration`), the evidence in words,
the controller the trace or its ``run.json`` declares (``cc_algorithm`` and its synonyms), if
any, and the features the answer rests on (:mod:`quicsm.controllers.features`). Only the sending
side of a connection carries the evidence: a receiver's trace (which sends little but
acknowledgements) is normally ``unknown``.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Sequence
from typing import Any, Final

import orjson
import polars as pl

from quicsm.controllers.batch_features import compute_features
from quicsm.controllers.features import FEATURES_SCHEMA
from quicsm.controllers.fitted import DEFAULT_CALIBRATION, DEFAULT_SIGNATURES
from quicsm.controllers.signatures import Box, classify
from quicsm.core.aliases import CC_ALGORITHM_KEYS
from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.frames import KEY_DTYPE
from quicsm.extract.account import read_account
from quicsm.extract.read import OnError, read_metrics, read_traces, read_transitions
from quicsm.qlog.paths import PathLike, expand_paths

#: the counts of the connection account that identify reports beside its evidence
ACCOUNT_COUNTS: Final[tuple[str, ...]] = ("losses", "spurious_losses", "ptos", "recovery_episodes")

IDENTIFY_SCHEMA: Final[dict[str, pl.DataType]] = {
    "file": KEY_DTYPE,
    "trace": KEY_DTYPE,
    "vantage": pl.String(),
    "family": pl.String(),
    "confidence": pl.Float64(),
    "evidence": pl.String(),
    "declared": pl.String(),
    **{k: v for k, v in FEATURES_SCHEMA.items() if k not in ("trace", "vantage")},
    # the connection account's counts (:mod:`quicsm.extract.account`), with their provenance
    **{
        name: dtype
        for fact in ACCOUNT_COUNTS
        for name, dtype in ((fact, pl.Float64()), (f"{fact}_from", pl.String()))
    },
}


def _declared(labels: str | None) -> str | None:
    if not labels:
        return None
    value: Any = orjson.loads(labels)
    for key in CC_ALGORITHM_KEYS:
        if isinstance(value.get(key), str):
            return str(value[key])
    return None


def identify_frames(
    metrics: pl.DataFrame,
    transitions: pl.DataFrame,
    traces: pl.DataFrame | None = None,
    *,
    signatures: Sequence[Box] | None = None,
    account: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """:func:`identify` over frames already read (``traces`` adds file and declared controller;
    ``account``, the connection account of :func:`quicsm.extract.account.read_account`, the
    counts of losses, spurious losses, probe timeouts and Recovery episodes with their
    provenance: null without it). The shipped signatures come with their calibration
    (``fitted.DEFAULT_CALIBRATION``); other ``signatures`` give the uncalibrated score."""
    boxes = DEFAULT_SIGNATURES if signatures is None else tuple(signatures)
    table = DEFAULT_CALIBRATION if signatures is None else None
    features = compute_features(metrics, transitions)
    verdicts = [classify(row, boxes, calibration=table) for row in features.iter_rows(named=True)]
    info: dict[str, tuple[str | None, str | None]] = {}
    if traces is not None:
        info = {
            t: (f, _declared(labels))
            for t, f, labels in traces.select("trace", "file", "labels").iter_rows()
        }
    frame = features.with_columns(
        pl.Series("file", [info.get(t, (None, None))[0] for t in features["trace"]], pl.String),
        pl.Series("family", [v.family for v in verdicts], pl.String),
        pl.Series("confidence", [v.confidence for v in verdicts], pl.Float64),
        pl.Series("evidence", [v.evidence for v in verdicts], pl.String),
        pl.Series("declared", [info.get(t, (None, None))[1] for t in features["trace"]], pl.String),
    )
    counted = [c for fact in ACCOUNT_COUNTS for c in (fact, f"{fact}_from")]
    if account is not None and account.height:
        frame = frame.join(
            account.select(pl.col("trace").cast(pl.String), *counted),
            left_on=pl.col("trace").cast(pl.String),
            right_on="trace",
            how="left",
            maintain_order="left",
        )
    else:
        frame = frame.with_columns(pl.lit(None).alias(c) for c in counted)
    return frame.select([pl.col(c).cast(t) for c, t in IDENTIFY_SCHEMA.items()])


def identify(
    paths: PathLike | Iterable[PathLike],
    *,
    on_error: OnError = "raise",
    diagnostics: Diagnostics | None = None,
    signatures: Sequence[Box] | None = None,
) -> pl.DataFrame:
    """The congestion-controller family of every trace in ``paths`` (:data:`IDENTIFY_SCHEMA`).

    ``paths`` are read like :func:`quicsm.extract.read.read_transitions` (files, directories,
    globs; strict unless ``on_error="skip"``). ``signatures`` replaces the shipped
    :data:`quicsm.controllers.fitted.DEFAULT_SIGNATURES`.
    """
    files = expand_paths(paths)
    reads = [Diagnostics() for _ in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)  # reported once, below
        transitions = read_transitions(files, on_error=on_error, diagnostics=reads[0])
        metrics = read_metrics(files, on_error=on_error, diagnostics=reads[1])
        traces = read_traces(files, on_error=on_error, diagnostics=reads[2])
        account = read_account(
            transitions, metrics, traces, on_error=on_error, diagnostics=reads[3]
        )
    diag = diagnostics if diagnostics is not None else Diagnostics()
    _merge(diag, reads)
    diag.warn()
    return identify_frames(metrics, transitions, traces, signatures=signatures, account=account)


def _merge(into: Diagnostics, reads: Sequence[Diagnostics]) -> None:
    """One report of several reads of the same files (the states, the metrics, the trace
    headers, the account's packets): what they skipped is their union
    (:meth:`Diagnostics.absorb`: a record or file two reads skipped is counted and named once).
    The states' notices of what cannot be derived are not identify's to report (it names
    controllers from the metrics; ``quicsm infer`` reports them)."""
    for read in reads:
        into.absorb(dataclasses.replace(read, derivation=[]))
