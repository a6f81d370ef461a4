"""States from packets alone against the states a stock stack logged, per run.

A stock (unpatched) build logs its own congestion states and recovery events. For the server
traces of every qlog file given, and the server's log of every lab run directory given
(``run.json`` and the endpoints' qlog files, as ``quicsm lab run`` writes them), this benchmark
writes a copy of the file with every recovery event removed (:mod:`quicsm.testing.strip`),
reads the copy as a user would (``read_transitions(..., states="derived")``: with no recovery
metrics left, the states come from the packets and their ACK frames alone,
:mod:`quicsm.extract.wire`), and compares the data sender's derived states with the states it
logged, weighted by time (:mod:`quicsm.stats.agreement`). Only the data sender's log is
compared: from a client's log of a download the packets give the server's sender, which the
client's own logged states do not describe.

Two agreements are printed per run:

- **all states**: every millisecond counts, a derived state the stack cannot log (stock
  quic-go logs neither ``TailLossProbe`` nor ``RetransmissionTimeout``) counting against;
- **in the stack's states**: both timelines read in the producer's vocabulary (its profile,
  :mod:`quicsm.extract.profiles`): a derived state the producer never logs is read as the last
  derived state before it that it does log, which is what the stack's own log shows while, e.g.,
  a probe timeout runs (quic-go's controller logs nothing on a PTO); and the state a producer
  logs when its controller is created, before any decision (quic-go's ``slow_start``), is read
  as ``Init``, as hybrid mode reads it (``creation_state_is_init``).

It also checks, per trace, that no derived state is one a warning of the same read says cannot
be derived, and prints how many such rows there were (there must be none).

    .venv/bin/python benchmarks/wire_stock.py RUN_DIRS_OR_QLOG_FILES...
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.extract.profiles import detect_profile
from quicsm.extract.read import read_traces, read_transitions
from quicsm.stats.agreement import agreement_by_state, overall_agreement, overlap
from quicsm.testing.strip import strip_recovery_file


def inputs(paths: Iterable[str], vantage: str) -> list[Path]:
    """The qlog files to measure: each lab run directory's (``run.json``) log of ``vantage``
    under ``paths``, and every other file given, sorted."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if p.is_file():
            found.add(p)
            continue
        for run in [p] if (p / "run.json").is_file() else [q.parent for q in p.rglob("run.json")]:
            name = json.loads((run / "run.json").read_text()).get(f"files.{vantage}")
            # the file run.json names, or it compressed (a committed run); without a name, the
            # lab's <vantage>.sqlog
            found.update(p for p in run.glob(f"{name or vantage + '.sqlog'}*") if p.is_file())
    return sorted(found)


@dataclass
class TraceResult:
    trace: str
    version: str
    scenario: str
    run: int
    agreement: float
    in_stack_states: float
    by_state: pl.DataFrame
    warned_rows: int


def _creation_as_init(frame: pl.DataFrame) -> pl.DataFrame:
    """The first state after ``Init`` at the trace's first instant read as ``Init``."""
    first = (pl.col("state").cum_count().over("trace") == 2) & (pl.col("time_ms") == 0.0)
    return frame.with_columns(
        pl.when(first)
        .then(pl.lit("Init"))
        .otherwise(pl.col("state").cast(pl.String))
        .alias("state")
    )


def _project(frame: pl.DataFrame, logged: frozenset[str]) -> pl.DataFrame:
    """Each state the producer never logs replaced by the last one before it that it does."""
    keep = pl.col("state").is_in(sorted(logged | {"Init"}))
    return (
        frame.with_columns(
            pl.when(keep).then(pl.col("state").cast(pl.String)).otherwise(None).alias("state")
        )
        .with_columns(pl.col("state").forward_fill().over("trace"))
        .with_columns(pl.col("state").fill_null("Init"))
    )


def measure_file(path: Path, vantage: str, scratch: Path) -> list[TraceResult]:
    """Every trace of ``path`` of ``vantage`` that logs its states: its packets-only states
    (recovery events stripped) against them."""
    scratch.mkdir(parents=True, exist_ok=True)
    if (path.parent / "run.json").is_file():
        shutil.copy(path.parent / "run.json", scratch / "run.json")
    copy = scratch / path.name.removesuffix(".zst")
    strip_recovery_file(path, copy)
    diag = Diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        logged = read_transitions([str(path)], states="explicit")
        derived = read_transitions([str(copy)], states="derived", diagnostics=diag)
        traces = read_traces([str(path)])

    def local(frame: pl.DataFrame, file: Path) -> pl.DataFrame:
        return frame.with_columns(
            pl.col("trace").cast(pl.String).str.replace(str(file), "", literal=True)
        )

    logged, derived = local(logged, path), local(derived, copy)
    warned: dict[str, set[str]] = {}
    for trace, states, _ in diag.derivation:
        key = str(trace).replace(str(copy), "")
        warned.setdefault(key, set()).update(re.findall(r"[A-Za-z]+", states))
    explicit = set(logged.filter(pl.col("source") == "explicit")["trace"].to_list())
    out: list[TraceResult] = []
    for row in local(traces, path).iter_rows(named=True):
        tid = row["trace"]
        if tid not in explicit or row["vantage"] != vantage:
            continue
        labels = json.loads(row["labels"]) if row.get("labels") else {}
        profile = detect_profile(
            title=row.get("title"), code_version=row.get("code_version"), labels=labels
        )
        ref = logged.filter(pl.col("trace") == tid)
        cand = derived.filter(pl.col("trace") == tid)
        pairs = overlap(ref, cand)
        reference = _creation_as_init(ref) if profile.creation_state_is_init else ref
        projected = overlap(reference, _project(cand, profile.logged_states))
        out.append(
            TraceResult(
                trace=f"{path}{tid}",
                version=str(labels.get("version") or row.get("code_version") or "?"),
                scenario=str(labels.get("scenario", "-")),
                run=int(labels.get("run") or 0),
                agreement=overall_agreement(pairs),
                in_stack_states=overall_agreement(projected),
                by_state=agreement_by_state(pairs),
                warned_rows=cand.filter(pl.col("state").is_in(sorted(warned.get(tid, ())))).height,
            )
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="qlog files, lab run directories or trees")
    parser.add_argument("--target", type=float, default=0.85, help="per-run target")
    args = parser.parse_args(argv)
    # the data sender's log: a client's log of a download derives the server's sender, which
    # its own logged states do not describe
    files = inputs(args.paths, "server")
    if not files:
        print("no qlog files or run directories under the paths given", file=sys.stderr)
        return 1
    results: list[TraceResult] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, path in enumerate(files):
            results.extend(measure_file(path, "server", Path(tmp) / str(i)))
    results.sort(key=lambda r: (r.version, r.scenario, r.run, r.trace))
    print(
        "| release | scenario | run | agreement, all states % | in the stack's states % | "
        "logged states with >= 5% of the time: agreement, all states % (share %) | "
        "warned-about rows |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        states = ", ".join(
            f"{s} {100 * a:.1f} ({100 * sh:.1f})"
            for s, sh, a in r.by_state.iter_rows()
            if sh >= 0.05
        )
        print(
            f"| {r.version} | {r.scenario} | {r.run or '-'} | {100 * r.agreement:.1f} | "
            f"{100 * r.in_stack_states:.1f} | {states} | {r.warned_rows} |"
        )
    if not results:
        print("no trace of that vantage logs its states", file=sys.stderr)
        return 1
    target = 100 * args.target
    print(
        f"\n{len(results)} runs: all states >= {target:.0f} % in "
        f"{sum(r.agreement >= args.target for r in results)}, lowest "
        f"{100 * min(r.agreement for r in results):.1f} %; in the stack's states >= "
        f"{target:.0f} % in {sum(r.in_stack_states >= args.target for r in results)}, lowest "
        f"{100 * min(r.in_stack_states for r in results):.1f} %; rows of a state a warning "
        f"says cannot be derived: {sum(r.warned_rows for r in results)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
