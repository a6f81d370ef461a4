"""States from packets alone against the states a stock stack logged, per run.

A stock (unpatched) build logs its own congestion states and recovery events. For every lab run
directory given (``run.json`` and the endpoints' qlog files, as ``quicsm lab run`` writes them),
this benchmark writes a copy of each qlog file with every recovery event removed (``recovery:*``,
and the recovery events qlog's later drafts name under ``quic:``), reads the copy as a user
would (``read_transitions(..., states="derived")``: with no recovery metrics left, the states
come from the packets and their ACK frames alone, :mod:`quicsm.extract.wire`), and compares the
data sender's derived states with the states it logged, weighted by time
(:mod:`quicsm.stats.agreement`).

Two agreements are printed per run:

- **all states**: every millisecond counts, a derived state the stack cannot log (stock
  quic-go logs neither ``TailLossProbe`` nor ``RetransmissionTimeout``) counting against;
- **in the stack's states**: a derived state the producer never logs (its profile,
  :mod:`quicsm.extract.profiles`) is read as the last derived state it does log, which is what
  the stack's own log shows while, e.g., a probe timeout runs (its controller's state does not
  change on a PTO).

It also checks, per trace, that no derived state is one a warning of the same read says cannot
be derived, and prints how many such rows there were (there must be none).

    .venv/bin/python benchmarks/wire_stock.py RUN_DIR_OR_TREE...
    .venv/bin/python benchmarks/wire_stock.py --vantage client RUN_DIR_OR_TREE...
"""

from __future__ import annotations

import argparse
import io
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

#: recovery events under qlog's later drafts' ``quic:`` namespace (draft-10 and later)
_QUIC_RECOVERY = (
    "recovery_parameters_set",
    "recovery_metrics_updated",
    "metrics_updated",
    "congestion_state_updated",
    "loss_timer_updated",
    "packet_lost",
    "marked_for_retransmit",
    "ecn_state_updated",
)
_RECOVERY_NAME = re.compile(
    rb'"name"\s*:\s*"(recovery:[a-z_]*|quic:(' + "|".join(_QUIC_RECOVERY).encode() + rb'))"'
)


def strip_recovery(raw: bytes) -> tuple[bytes, int]:
    """A JSON-SEQ / NDJSON qlog file without its recovery events, and how many were removed."""
    sep = b"\x1e" if b"\x1e" in raw[:4096] else b"\n"
    kept: list[bytes] = []
    removed = 0
    for record in raw.split(sep):
        if _RECOVERY_NAME.search(record[:400]):
            removed += 1
            continue
        kept.append(record)
    return sep.join(kept), removed


def _decompressed(path: Path) -> bytes:
    raw = path.read_bytes()
    if raw[:4] == b"\x28\xb5\x2f\xfd":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)).read()
    return raw


def run_dirs(paths: Iterable[str]) -> list[Path]:
    """Every directory holding a ``run.json`` under ``paths``, sorted."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if (p / "run.json").is_file():
            found.add(p)
        found.update(q.parent for q in p.rglob("run.json"))
    return sorted(found)


@dataclass
class RunResult:
    run: str
    scenario: str
    version: str
    trace: str
    agreement: float
    in_stack_states: float
    by_state: pl.DataFrame
    warned_rows: int


def _project(frame: pl.DataFrame, logged: frozenset[str]) -> pl.DataFrame:
    """Each state the producer never logs replaced by the last one before it that it does."""
    keep = pl.col("state").is_in(sorted(logged | {"Init"}))
    return (
        frame.with_columns(pl.when(keep).then(pl.col("state")).otherwise(None).alias("state"))
        .with_columns(pl.col("state").forward_fill().over("trace"))
        .with_columns(pl.col("state").fill_null("Init"))
    )


def measure_run(run: Path, vantage: str, scratch: Path) -> RunResult | None:
    labels = json.loads((run / "run.json").read_text())
    name = labels.get(f"files.{vantage}")
    if not name or not (run / name).is_file():
        return None
    out = scratch / run.name
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(run / "run.json", out / "run.json")
    stripped, _ = strip_recovery(_decompressed(run / name))
    (out / name).write_bytes(stripped)
    diag = Diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        logged = read_transitions([str(run / name)], states="explicit")
        derived = read_transitions([str(out / name)], states="derived", diagnostics=diag)
        header = read_traces([str(run / name)]).row(0, named=True)
    if logged.filter(pl.col("source") == "explicit").height == 0:
        return None
    profile = detect_profile(
        title=header.get("title"),
        code_version=header.get("code_version"),
        labels=json.loads(header["labels"]) if header.get("labels") else {},
    )
    def renamed(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(
            pl.col("trace").cast(pl.String).str.replace(r"^(.*)#", "r#").alias("trace")
        )

    logged, derived = renamed(logged), renamed(derived)
    pairs = overlap(logged, derived)
    projected = overlap(logged, _project(derived, profile.logged_states))
    warned = {w for _, states, _ in diag.derivation for w in re.findall(r"[A-Za-z]+", states)}
    warned_rows = derived.filter(pl.col("state").is_in(sorted(warned))).height
    return RunResult(
        run=str(run),
        scenario=str(labels.get("scenario", "-")),
        version=str(labels.get("version", "?")),
        trace=name,
        agreement=overall_agreement(pairs),
        in_stack_states=overall_agreement(projected),
        by_state=agreement_by_state(pairs),
        warned_rows=warned_rows,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="lab run directories or trees of them")
    parser.add_argument(
        "--vantage", default="server", help="whose log: server (the data sender) or client"
    )
    parser.add_argument("--target", type=float, default=0.85, help="per-run target")
    args = parser.parse_args(argv)
    runs = run_dirs(args.paths)
    if not runs:
        print("no run directories (run.json) under the paths given", file=sys.stderr)
        return 1
    results: list[RunResult] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, run in enumerate(runs):
            r = measure_run(run, args.vantage, Path(tmp) / str(i))
            if r is not None:
                results.append(r)
    print(
        "| run | release | scenario | agreement, all states % | in the stack's states % | "
        "states with >= 5% of the time: agreement % (share %) | warned-about rows |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in results:
        states = ", ".join(
            f"{s} {100 * a:.1f} ({100 * sh:.1f})"
            for s, sh, a in r.by_state.iter_rows()
            if sh >= 0.05
        )
        run = "/".join(Path(r.run).parts[-2:])
        print(
            f"| {run} | {r.version} | {r.scenario} | {100 * r.agreement:.1f} | "
            f"{100 * r.in_stack_states:.1f} | {states} | {r.warned_rows} |"
        )
    if results:
        hit = sum(r.agreement >= args.target for r in results)
        hit_p = sum(r.in_stack_states >= args.target for r in results)
        print(
            f"\n{len(results)} runs: all states >= {100 * args.target:.0f} % in {hit}, "
            f"lowest {100 * min(r.agreement for r in results):.1f} %; in the stack's states "
            f">= {100 * args.target:.0f} % in {hit_p}, lowest "
            f"{100 * min(r.in_stack_states for r in results):.1f} %; warned-about rows "
            f"{sum(r.warned_rows for r in results)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
