"""How often states derived from packets alone agree with the states a stack logged itself.

For every trace that logs its states (the instrumented quic-go and aioquic corpus in traces/,
the real fixtures, the stock quic-go fixtures, and any paths given), every event but the packet
events is set aside: the states are derived by :func:`quicsm.extract.wire.wire_states` from
``packet_sent`` / ``packet_received`` and their ACK frames only, and compared with the logged
states weighted by time (:mod:`quicsm.stats.agreement`), per stack, vantage and scenario, as
``benchmarks/derive_accuracy.py`` does for the metrics path.

    .venv/bin/python benchmarks/wire_accuracy.py
    .venv/bin/python benchmarks/wire_accuracy.py --confusion
    .venv/bin/python benchmarks/wire_accuracy.py PATH...
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import polars as pl

from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.frames import TRANSITIONS_SCHEMA, normalize_transitions
from quicsm.extract.profiles import detect_profile
from quicsm.extract.read import read_traces, read_transitions, trace_id
from quicsm.extract.wire import read_packets, wire_states
from quicsm.qlog.paths import expand_paths
from quicsm.qlog.source import read_qlog
from quicsm.stats.agreement import overall_agreement, overlap

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_accuracy import (  # noqa: E402
    DEFAULT_PATHS,
    HELD_OUT_FROM_RUN,
    _label,
    _pct,
    confusion_tables,
    scenario_table,
    stack_table,
)


def wire_frame(
    files: list[Path], explicit: pl.DataFrame, skipped: list[str], *, generic: bool = False
) -> pl.DataFrame:
    """The packet-derived transitions of every trace in ``explicit`` whose packets carry ACK
    frames; the others' ids are added to ``skipped``. ``generic``: no producer's controller
    model, the estimate of :mod:`quicsm.extract.wire` for every trace."""
    wanted = set(explicit["trace"].unique().to_list())
    starts = dict(explicit.group_by("trace").agg(pl.col("end_ms").max()).iter_rows())
    rows: dict[str, list[object]] = {k: [] for k in TRANSITIONS_SCHEMA}
    for path in files:
        file = str(path)
        if not any(t.startswith(file + "#") for t in wanted):
            continue
        packets = read_packets(path).packets
        headers = {t.index: t for t in read_qlog(path, lenient=True).traces}
        for index, kept in packets.items():
            tid = trace_id(file, index)
            if tid not in wanted:
                continue
            header = headers[index]
            first = header.first_time or 0.0
            if not any(p.acks for p in kept):
                skipped.append(tid)  # no ACK frames logged (quinn): nothing to derive from
                continue
            # the producer's controller model where there is one, as the readers use it
            producer = detect_profile(
                title=header.title, code_version=header.code_version, labels=header.labels
            ).name
            result = wire_states(
                kept,
                own_sends=True,
                producer=None if generic else producer,
                version=header.code_version or header.labels.get("version"),
                cc=header.cc_algorithm,
            )
            end = starts[tid]
            for time, state, trigger in [(first, "Init", None), *result.rows]:
                rows["file"].append(file)
                rows["trace"].append(tid)
                rows["vantage"].append("unknown")
                rows["time_ms"].append(round(max(0.0, time - first), 3))
                rows["state"].append(state)
                rows["raw_state"].append(None)
                rows["trigger"].append(trigger)
                rows["source"].append("derived")
                rows["end_ms"].append(end)
    frame = pl.DataFrame(
        {
            k: pl.Series(v, dtype=pl.String if k in ("state", "vantage", "source") else t)
            for (k, v), t in zip(rows.items(), TRANSITIONS_SCHEMA.values(), strict=True)
        }
    ).select([pl.col(c).cast(t) for c, t in TRANSITIONS_SCHEMA.items()])
    return normalize_transitions(frame)


def load(paths: list[str], *, generic: bool = False) -> pl.DataFrame:
    diag = Diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        explicit = read_transitions(paths, states="explicit", diagnostics=diag)
        traces = read_traces(paths)
    logged = explicit.filter(pl.col("source") == "explicit")["trace"].unique()
    explicit = explicit.filter(pl.col("trace").is_in(logged.implode()))
    skipped: list[str] = []
    derived = wire_frame(expand_paths(paths), explicit, skipped, generic=generic)
    if skipped:
        print(
            f"{len(skipped)} traces log no ACK frames (not derivable from packets), e.g. "
            f"{skipped[0]}; left out"
        )
    explicit = explicit.filter(~pl.col("trace").is_in(skipped))
    info = traces.select(
        "trace",
        "vantage",
        pl.col("labels")
        .map_elements(
            lambda s: f"{_label(s, 'stack') or '?'} {_label(s, 'version') or ''}".strip(),
            return_dtype=pl.String,
        )
        .alias("stack"),
        pl.col("labels")
        .map_elements(lambda s: str(_label(s, "scenario") or "-"), return_dtype=pl.String)
        .alias("scenario"),
        pl.col("labels")
        .map_elements(lambda s: int(_label(s, "run") or 0), return_dtype=pl.Int64)
        .alias("run"),
        pl.col("labels")
        .map_elements(lambda s: _label(s, "patch") == "", return_dtype=pl.Boolean)
        .alias("stock"),
    ).with_columns(
        pl.when((pl.col("run") >= HELD_OUT_FROM_RUN) | pl.col("stock"))
        .then(pl.lit("held-out"))
        .otherwise(pl.lit("tune"))
        .alias("split")
    )
    return overlap(explicit, derived).join(info, on="trace")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="trace files/directories (default: corpus)")
    parser.add_argument("--confusion", action="store_true", help="print confusion matrices")
    parser.add_argument(
        "--generic",
        action="store_true",
        help="no producer's controller model (quicsm.extract.wire_quicgo): the estimate only",
    )
    args = parser.parse_args(argv)
    paths = args.paths or [str(p) for p in DEFAULT_PATHS]
    pairs = load(paths, generic=args.generic)
    print(
        f"\nall: {pairs['trace'].n_unique()} traces, overall agreement "
        f"{_pct(overall_agreement(pairs))} %"
    )
    for split in ("tune", "held-out"):
        part = pairs.filter(pl.col("split") == split)
        if part.height:
            print(
                f"{split}: {part['trace'].n_unique()} traces, overall agreement "
                f"{_pct(overall_agreement(part))} %"
            )
    print()
    print("\n".join(stack_table(pairs)))
    for (vantage,), sub in sorted(pairs.group_by("vantage"), key=lambda kv: str(kv[0][0])):
        print(f"\n{vantage}:\n")
        print("\n".join(stack_table(sub)))
    print()
    print("\n".join(scenario_table(pairs)))
    if args.confusion:
        print("\n".join(confusion_tables(pairs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
