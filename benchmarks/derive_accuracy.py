"""How often derived congestion states agree with the states a stack logged itself.

For every trace that logs its states (the instrumented quic-go and aioquic corpus in traces/,
the real fixtures, and any lab directories given), the explicit events are set aside, the
states are derived from metrics, losses and timers (``states="derived"``), and both timelines
are compared, weighted by time: overall agreement, agreement per logged state (with its share of
the time), and a confusion matrix, per stack and per scenario.

Lab runs 1-3 of each scenario are the tuning split; runs 4 and later, and every run of a stock
(unpatched, ``patch`` label empty) build, are held out (never used to choose a rule or a
threshold) and reported separately. Traces without a run number (the fixtures, single runs)
are in the tuning split. Stock quic-go logs four states itself (slow_start, which it also logs
when its controller is created, congestion_avoidance, recovery, application_limited): the time
it spends in the paper's other states counts as disagreement.

    .venv/bin/python benchmarks/derive_accuracy.py                 # tune and held-out tables
    .venv/bin/python benchmarks/derive_accuracy.py --split held-out
    .venv/bin/python benchmarks/derive_accuracy.py --confusion     # also confusion matrices
    .venv/bin/python benchmarks/derive_accuracy.py PATH...         # other traces (all = one split)
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import polars as pl

from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.states import PAPER_STATES
from quicsm.extract.read import read_traces, read_transitions
from quicsm.stats.agreement import agreement_by_state, confusion, overall_agreement, overlap

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PATHS = [
    ROOT / "traces",
    ROOT / "tests" / "fixtures" / "real",
    ROOT / "tests" / "fixtures" / "stock",
]
#: runs at or above this number are held out of tuning
HELD_OUT_FROM_RUN = 4
#: a state is judged on its own when it holds at least this share of a stack's time
MIN_SHARE = 0.05


def _label(labels: str, key: str) -> object:
    return json.loads(labels).get(key)


def load(paths: list[str]) -> pl.DataFrame:
    """Per trace and pair of states: how long the explicit and the derived state held."""
    diag = Diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        explicit = read_transitions(paths, states="explicit", diagnostics=diag)
        derived = read_transitions(paths, states="derived", diagnostics=diag)
        traces = read_traces(paths)
    logged = explicit.filter(pl.col("source") == "explicit")["trace"].unique()
    explicit = explicit.filter(pl.col("trace").is_in(logged.implode()))
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


def _pct(x: float) -> str:
    return "-" if x != x else f"{100 * x:.1f}"


def stack_table(pairs: pl.DataFrame) -> list[str]:
    lines = [
        "| stack | traces | agreement % | states with >= 5% of the time: agreement % (share %) |",
        "|---|---|---|---|",
    ]
    for (stack,), part in sorted(pairs.group_by("stack"), key=lambda kv: str(kv[0][0])):
        by_state = agreement_by_state(part).filter(pl.col("share") >= MIN_SHARE)
        cells = ", ".join(f"{r} {_pct(a)} ({_pct(s)})" for r, s, a in by_state.iter_rows())
        lines.append(
            f"| {stack} | {part['trace'].n_unique()} | {_pct(overall_agreement(part))} | {cells} |"
        )
    return lines


def scenario_table(pairs: pl.DataFrame) -> list[str]:
    stacks = sorted(pairs["stack"].unique().to_list())
    lines = ["| scenario | " + " | ".join(stacks) + " |", "|---" * (len(stacks) + 1) + "|"]
    for scenario in sorted(pairs["scenario"].unique().to_list()):
        cells = []
        for stack in stacks:
            part = pairs.filter((pl.col("stack") == stack) & (pl.col("scenario") == scenario))
            cells.append(_pct(overall_agreement(part)) if part.height else "")
        lines.append(f"| {scenario} | " + " | ".join(cells) + " |")
    return lines


def confusion_tables(pairs: pl.DataFrame) -> list[str]:
    states = list(PAPER_STATES)
    short = ["Init", "SS", "CA", "CAM", "AL", "RTO", "Rec", "TLP"]
    lines: list[str] = []
    for (stack,), part in sorted(pairs.group_by("stack"), key=lambda kv: str(kv[0][0])):
        table = confusion(part, states)
        lines += [
            "",
            f"{stack}: share of the time (%), rows logged, columns derived",
            "",
            "| logged \\ derived | " + " | ".join(short) + " |",
            "|---" * (len(states) + 1) + "|",
        ]
        for row in table.iter_rows():
            lines.append(
                f"| {short[states.index(row[0])]} | "
                + " | ".join(f"{100 * v:.1f}" if v else "" for v in row[1:])
                + " |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="trace files/directories (default: corpus)")
    parser.add_argument(
        "--split",
        choices=("tune", "held-out", "both"),
        default="both",
        help="the corpus traces scored: tuning, held-out or both",
    )
    parser.add_argument("--confusion", action="store_true", help="print confusion matrices")
    parser.add_argument("--by-vantage", action="store_true", help="also per vantage")
    args = parser.parse_args(argv)
    paths = args.paths or [str(p) for p in DEFAULT_PATHS]
    pairs = load(paths)
    splits = ["tune", "held-out"] if args.split == "both" else [args.split]
    for split in splits:
        part = pairs.filter(pl.col("split") == split)
        if not part.height:
            continue
        print(
            f"\n## {split}: {part['trace'].n_unique()} traces, "
            f"overall agreement {_pct(overall_agreement(part))} %\n"
        )
        print("\n".join(stack_table(part)))
        if args.by_vantage:
            for (vantage,), sub in sorted(part.group_by("vantage"), key=lambda kv: str(kv[0][0])):
                print(f"\n{vantage}:\n")
                print("\n".join(stack_table(sub)))
        print()
        print("\n".join(scenario_table(part)))
        if args.confusion:
            print("\n".join(confusion_tables(part)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
