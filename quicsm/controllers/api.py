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

import warnings
from collections.abc import Iterable, Sequence
from typing import Any, Final

import orjson
import polars as pl

from quicsm.controllers.features import FEATURES_SCHEMA, compute_features
from quicsm.controllers.fitted import DEFAULT_CALIBRATION, DEFAULT_SIGNATURES
from quicsm.controllers.signatures import Box, classify
from quicsm.core.aliases import CC_ALGORITHM_KEYS
from quicsm.core.diagnostics import MAX_REASONS, Diagnostics, QuicsmWarning
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
    states, values = Diagnostics(), Diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)  # reported once, below
        transitions = read_transitions(files, on_error=on_error, diagnostics=states)
        metrics = read_metrics(files, on_error=on_error, diagnostics=values)
        traces = read_traces(files, on_error=on_error, diagnostics=Diagnostics())
        account = read_account(transitions, metrics, traces, on_error=on_error)
    diag = diagnostics if diagnostics is not None else Diagnostics()
    _merge(diag, states, values)
    diag.warn()
    return identify_frames(metrics, transitions, traces, signatures=signatures, account=account)


def _merge(into: Diagnostics, states: Diagnostics, values: Diagnostics) -> None:
    """One report of two reads of the same files: the state read decodes state records, the
    metrics read metrics and loss records too, so a bad record is counted once (the larger
    count) and each reason once."""
    into.skipped_records += max(states.skipped_records, values.skipped_records)
    into.skipped_files += max(states.skipped_files, values.skipped_files)
    for reason in [*values.reasons, *states.reasons]:
        if reason not in into.reasons and len(into.reasons) < MAX_REASONS:
            into.reasons.append(reason)
    into.truncated.extend(t for t in dict.fromkeys([*states.truncated, *values.truncated]))
    into.unknown_states.update(states.unknown_states)
    for note in [*states.notes, *values.notes]:
        into.note(note)
