"""Every qlog file of a directory, read the way a new user would: the per-file table.

Each regular file under DIR (recursively, whatever its name: public examples come as
``.qlog``, ``.txt``, ``.json`` and qvis's ``.qlog.js``) is

1. inspected (:func:`quicsm.qlog.inspect.inspect_file`: the format detected, its traces, every
   record validated);
2. read by default (:func:`quicsm.read_transitions`, hybrid states, strict), and only if that
   raised our error, read again leniently (``on_error="skip"``);
3. given a model (:func:`quicsm.infer`, the observed algorithm) from what was read.

A file ends in one of four results: ``read`` (by default), ``lenient`` (only leniently),
``error`` (our error, a :class:`quicsm.QuicsmError`, in both modes; the message is printed so
that it can be judged) or ``traceback`` (any other exception: a defect). For each read file the
table gives its traces, those whose states are only ``Init`` (nothing derivable), the states
seen, and the warnings of the read. The summary groups the files by their directory under DIR
(where they came from: one directory per source and vintage) and the qlog version of their
first trace.

    .venv/bin/python benchmarks/public_qlog.py DIR
    .venv/bin/python benchmarks/public_qlog.py DIR --summary-only
    .venv/bin/python benchmarks/public_qlog.py DIR --json results.json
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
import warnings
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import polars as pl

import quicsm
from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QuicsmError
from quicsm.core.states import CANONICAL_STATES
from quicsm.qlog.inspect import inspect_file

#: the order states are listed in (the canonical order of the paper's eight)
_ORDER = {s: i for i, s in enumerate(CANONICAL_STATES)}
_SHORT = {
    "Init": "Init",
    "SlowStart": "SS",
    "CongestionAvoidance": "CA",
    "CongestionAvoidanceMaxed": "CAM",
    "ApplicationLimited": "AL",
    "RetransmissionTimeout": "RTO",
    "Recovery": "Rec",
    "TailLossProbe": "TLP",
}


@dataclass
class FileResult:
    file: str
    group: str
    format: str = ""
    result: str = ""
    traces: int = 0
    init_only: int = 0
    states: list[str] = field(default_factory=list)
    model_nodes: int = 0
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    inspect_problems: int = 0


def _short(text: str, root: Path) -> str:
    """A message without the directory the files were read from."""
    return text.replace(str(root) + "/", "")


def _read(path: Path, *, lenient: bool, root: Path) -> tuple[pl.DataFrame, list[str]]:
    diag = Diagnostics()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = quicsm.read_transitions(
            [path], on_error="skip" if lenient else "raise", diagnostics=diag
        )
    notes = [_short(str(w.message).splitlines()[0], root) for w in caught]
    return frame, notes


def examine(path: Path, root: Path) -> FileResult:
    rel = path.relative_to(root)
    group = rel.parent.as_posix()
    out = FileResult(str(rel), group)
    try:
        inspection = inspect_file(path)
        versions = sorted({t.format for t in inspection.traces})
        out.format = ", ".join(versions) if versions else inspection.format
        out.inspect_problems = inspection.n_problems
    except QuicsmError as exc:
        out.format = "-"
        out.error = _short(str(exc), root)
    except Exception:  # noqa: BLE001 - a defect, reported as such
        out.result = "traceback"
        out.error = _short(traceback.format_exc(limit=3).strip().splitlines()[-1], root)
        return out
    frame = None
    try:
        frame, out.warnings = _read(path, lenient=False, root=root)
        out.result = "read"
    except QuicsmError as exc:
        out.error = _short(str(exc), root)
        try:
            frame, out.warnings = _read(path, lenient=True, root=root)
            out.result = "lenient" if frame.height else "error"
        except QuicsmError as exc2:
            out.result = "error"
            out.error = _short(str(exc2), root)
        except Exception:  # noqa: BLE001
            out.result = "traceback"
            out.error = traceback.format_exc(limit=3).strip().splitlines()[-1]
    except Exception:  # noqa: BLE001
        out.result = "traceback"
        out.error = traceback.format_exc(limit=3).strip().splitlines()[-1]
    if frame is None or frame.height == 0:
        return out
    per_trace = frame.group_by("trace").agg(pl.col("state").cast(pl.String).unique())
    out.traces = per_trace.height
    out.init_only = sum(1 for s in per_trace["state"].to_list() if set(s) <= {"Init"})
    seen = {s for states in per_trace["state"].to_list() for s in states}
    out.states = sorted(seen, key=lambda s: _ORDER.get(s, 99))
    try:
        model = quicsm.infer(frame, algorithm="observed")
        out.model_nodes = len(model.nodes)
    except QuicsmError as exc:
        out.warnings.append(f"model: {exc}")
    except Exception:  # noqa: BLE001
        out.result = "traceback"
        out.error = "model: " + traceback.format_exc(limit=3).strip().splitlines()[-1]
    return out


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))


def _version(fmt: str) -> str:
    """The qlog version part of a trace format (``JSON draft-01`` -> ``draft-01``)."""
    first = fmt.split(", ")[0]
    return first.split(" ", 1)[1] if " " in first else first


def summary_rows(results: list[FileResult]) -> list[dict[str, object]]:
    groups: dict[tuple[str, str], list[FileResult]] = defaultdict(list)
    for r in results:
        groups[(r.group, _version(r.format) if r.format not in ("", "-") else "-")].append(r)
    rows = []
    for (group, version), rs in sorted(groups.items()):
        count = Counter(r.result for r in rs)
        rows.append(
            {
                "source": group,
                "qlog": version,
                "files": len(rs),
                "read by default": count["read"],
                "lenient only": count["lenient"],
                "clean errors": count["error"],
                "tracebacks": count["traceback"],
                "traces": sum(r.traces for r in rs),
                "Init-only traces": sum(r.init_only for r in rs),
            }
        )
    total = Counter(r.result for r in results)
    rows.append(
        {
            "source": "all",
            "qlog": "",
            "files": len(results),
            "read by default": total["read"],
            "lenient only": total["lenient"],
            "clean errors": total["error"],
            "tracebacks": total["traceback"],
            "traces": sum(r.traces for r in results),
            "Init-only traces": sum(r.init_only for r in results),
        }
    )
    return rows


def _table(rows: list[dict[str, object]]) -> list[str]:
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(r[h]) for h in head) + " |" for r in rows]
    return lines


def file_rows(results: list[FileResult]) -> list[dict[str, object]]:
    rows = []
    for r in results:
        note = r.error if r.result in ("error", "traceback", "lenient") else "; ".join(r.warnings)
        rows.append(
            {
                "file": r.file,
                "format": r.format,
                "result": r.result,
                "traces": r.traces,
                "Init-only": r.init_only,
                "states": " ".join(_SHORT.get(s, s) for s in r.states),
                "note": (note or "").replace("|", "\\|")[:160],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path, help="directory of qlog files")
    parser.add_argument(
        "--summary-only", action="store_true", help="print the summary, not every file's result"
    )
    parser.add_argument("--json", type=Path, help="also write every file's result here")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    results = [examine(p, root) for p in files_under(root)]
    if not args.summary_only:
        print("\n".join(_table(file_rows(results))))
        print()
    print("\n".join(_table(summary_rows(results))))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 1 if any(r.result == "traceback" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
