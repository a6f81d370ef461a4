"""``quicsm identify`` on the kernel's TCP, whose controllers are ground truth.

The kernel TCP corpus (``benchmarks/corpora/linux-tcp.qlog``, made by
``scripts/make_tcp_corpus``: reno, cubic and bbr under the six conditions of
``lab/scenarios/tcp.toml``, five runs each, over the IP-level path) was never used to fit or
calibrate ``identify``: every sender trace is classified once with the shipped signatures and
calibration. The true family is the run's ``cc_algorithm`` (``TCP_CONGESTION`` of the socket).
Prints, as Markdown: the confusion matrix, and accuracy per controller and per controller and
scenario ("unknown" counts as wrong; ``accuracy_answered`` leaves unknown answers out)::

    .venv/bin/python benchmarks/identify_kernel.py
    .venv/bin/python benchmarks/identify_kernel.py other-kernel-runs.qlog
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import polars as pl

from quicsm.controllers.api import identify
from quicsm.controllers.evaluation import accuracy_by, confusion, family_of
from quicsm.extract.read import read_traces

CORPUS = Path(__file__).resolve().parent / "corpora" / "linux-tcp.qlog"


def _markdown(df: pl.DataFrame) -> str:
    cols = df.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.iter_rows():
        cells = [f"{v:.2f}" if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "paths", nargs="*", default=[str(CORPUS)], help="kernel TCP qlog files (default: corpus)"
    )
    args = ap.parse_args()
    answers = identify(args.paths)
    traces = read_traces(args.paths)
    labels = {t: json.loads(lab) for t, lab in traces.select("trace", "labels").iter_rows()}
    frame = answers.with_columns(
        pl.col("trace").cast(pl.String),
        pl.col("trace")
        .cast(pl.String)
        .map_elements(lambda t: family_of(labels[t].get("cc_algorithm")), return_dtype=pl.String)
        .alias("controller"),
        pl.col("trace")
        .cast(pl.String)
        .map_elements(lambda t: str(labels[t].get("scenario")), return_dtype=pl.String)
        .alias("scenario"),
        pl.col("trace")
        .cast(pl.String)
        .map_elements(lambda t: str(labels[t].get("cc_algorithm")), return_dtype=pl.String)
        .alias("cc_algorithm"),
    ).filter(pl.col("vantage").cast(pl.String) == "server")
    print(f"{frame.height} sender traces of {', '.join(args.paths)}\n")
    print("Confusion (rows: true family; columns: answer)\n")
    print(_markdown(confusion(frame)))
    print("\nAccuracy per controller\n")
    print(_markdown(accuracy_by(frame, "cc_algorithm")))
    print("\nAccuracy per controller and scenario\n")
    both = frame.with_columns(
        (pl.col("cc_algorithm") + " / " + pl.col("scenario")).alias("controller / scenario")
    )
    print(_markdown(accuracy_by(both, "controller / scenario")))
    total = accuracy_by(frame.with_columns(pl.lit("all").alias("all")), "all")
    print("\nOverall\n")
    print(_markdown(total))


if __name__ == "__main__":
    main()
