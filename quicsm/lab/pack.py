"""Pack lab runs into one multi-trace, zstd-compressed JSON-SEQ qlog file.

JSON-SEQ (RFC 7464, qlog main schema §5 / draft-ietf-quic-qlog-main-schema "sequential"
serialization): every record is ``0x1E`` + JSON + ``\\n``. A packed file is a sequence of
traces, each one header record followed by its event records, and every header's
``trace.quicsm_labels`` holds the run's ``run.json`` labels (flat ``name -> scalar``) plus
``role`` (server/client) and ``run_dir``. Readers start a new trace at every header record.

Inputs may be JSON-SEQ (``.sqlog``) or JSON (``.qlog``, one or more ``traces`` with an
``events`` list), optionally gzip/zstd compressed; JSON traces are converted to one header
plus one record per event (events written as arrays with ``event_fields`` are turned into
objects). Runs are packed in sorted directory order, server before client, so the same runs
give the same bytes.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import zstandard

from quicsm.core.errors import InputError, QlogError

RS = b"\x1e"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
ROLES = ("server", "client")


@dataclass(kw_only=True)
class PackReport:
    """What :func:`pack_runs` wrote and what it skipped (and why)."""

    output: Path
    runs: int = 0
    traces: int = 0
    events: int = 0
    bytes_written: int = 0
    skipped: list[str] = field(default_factory=list)
    #: files whose last record was cut mid-write and left out (``lenient`` packing only)
    cut: list[str] = field(default_factory=list)


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Run directories (holding a run.json) at or below each path, sorted, no duplicates."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if not p.exists():
            raise InputError(f"{p}: no such run directory")
        if (p / "run.json").is_file():
            found.add(p)
        elif p.is_dir():
            found.update(r.parent for r in p.rglob("run.json"))
        else:
            raise InputError(f"{p}: expected a run directory (with run.json) or a tree of them")
    if not found:
        raise InputError(f"no run.json under {', '.join(map(str, paths))}")
    return sorted(found)


def _read_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if data.startswith(ZSTD_MAGIC):
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as r:
            return r.read()
    if data.startswith(GZIP_MAGIC):
        return gzip.decompress(data)
    return data


def _json_seq_traces(
    path: Path, data: bytes, cut: list[str] | None = None
) -> Iterator[tuple[dict[str, Any], list[bytes]]]:
    """Split a JSON-SEQ file into (header, raw event records); several headers allowed. With
    ``cut`` (a list), a last record cut mid-write (no newline after it) is left out and
    described in ``cut``, as the readers keep every complete record of such a file."""
    header: dict[str, Any] | None = None
    events: list[bytes] = []
    line = 1
    chunks = data.split(RS)[1:]
    for i, chunk in enumerate(chunks, start=1):
        text = chunk.strip()
        if not text:
            line += chunk.count(b"\n")
            continue
        try:
            record = orjson.loads(text)
        except orjson.JSONDecodeError:
            if cut is not None and i == len(chunks) and not chunk.endswith(b"\n"):
                cut.append(
                    f"{path}: record {i} (line {line}) is incomplete: the file was cut "
                    "mid-write; every complete record before it was kept"
                )
                break
            # a truncated last record (endpoint killed mid-write) is reported, never guessed
            raise QlogError(
                str(path),
                "a JSON record",
                record=i,
                line=line,
                got=repr(text[:60].decode(errors="replace")),
            ) from None
        if not isinstance(record, dict):
            raise QlogError(
                str(path), "a JSON object", record=i, line=line, got=type(record).__name__
            )
        if "trace" in record and (
            "qlog_version" in record or "file_schema" in record or "qlog_format" in record
        ):
            if header is not None:
                yield header, events
            header, events = record, []
        elif header is None:
            raise QlogError(str(path), "a qlog header record first", record=i, line=line)
        else:
            events.append(text)
        line += chunk.count(b"\n")
    if header is not None:
        yield header, events


def _json_traces(path: Path, data: bytes) -> Iterator[tuple[dict[str, Any], list[bytes]]]:
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise QlogError(str(path), "a JSON qlog document", got=str(exc)) from None
    traces = doc.get("traces") if isinstance(doc, dict) else None
    if not isinstance(traces, list):
        raise QlogError(str(path), 'a qlog object with a "traces" list')
    for t, trace in enumerate(traces):
        if not isinstance(trace, dict) or not isinstance(trace.get("events"), list):
            raise QlogError(str(path), f'trace {t + 1} to be an object with an "events" list')
        meta = {k: v for k, v in trace.items() if k != "events"}
        fields = meta.get("event_fields") or (meta.get("configuration") or {}).get("event_fields")
        events = []
        for e in trace["events"]:
            if isinstance(e, list) and fields:
                e = dict(zip(fields, e, strict=False))
            events.append(orjson.dumps(e))
        header = {
            "qlog_version": doc.get("qlog_version", "0.3"),
            "qlog_format": "JSON-SEQ",
            "title": doc.get("title", ""),
            "trace": meta,
        }
        yield header, events


def read_qlog_traces(
    path: Path, cut: list[str] | None = None
) -> list[tuple[dict[str, Any], list[bytes]]]:
    """The traces of one qlog file as (header, event records) pairs (``cut``: see
    :func:`_json_seq_traces`)."""
    data = _read_bytes(path)
    if data.lstrip()[:1] == RS:
        return list(_json_seq_traces(path, data, cut))
    return list(_json_traces(path, data))


def _run_files(run_dir: Path, labels: dict[str, Any]) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    for role in ROLES:
        listed = labels.get(f"files.{role}")
        names = (
            [n for n in str(listed).split(",") if n]
            if listed
            else sorted(
                p.name
                for p in run_dir.iterdir()
                if p.name.startswith(role) and p.suffix in (".qlog", ".sqlog")
            )
        )
        out.extend((role, run_dir / n) for n in names)
    return out


def _scalar_labels(raw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in raw.items() if v is None or isinstance(v, str | int | float | bool)}


def event_name(record: bytes) -> str:
    """The name of an event record without its category (``metrics_updated`` for
    ``recovery:metrics_updated``; draft-01/02 records name it ``event``)."""
    try:
        ev = orjson.loads(record)
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(ev, dict):
        return ""
    name = ev.get("name", ev.get("event", ""))
    return str(name).rsplit(":", 1)[-1]


def pack_runs(
    run_dirs: Iterable[str | Path],
    *,
    output: str | Path,
    level: int = 15,
    roles: Iterable[str] = ROLES,
    events: Iterable[str] | None = None,
    lenient: bool = False,
) -> PackReport:
    """Write the runs under ``run_dirs`` into ``output`` (see the module docstring).

    A run whose qlog files are missing is skipped and listed in the report with its status
    and reason; a malformed qlog file is an error naming the file and record. The label
    ``run_dir`` is ``<stack>/<version>/[<cc_algorithm>/]<scenario>/run-<n>`` (machine
    independent). ``roles`` packs only those endpoints' files; ``events`` only the events of
    those names (without category: ``metrics_updated``, ``packet_lost``, ...), every header
    kept, and the trace header then lists the names kept under
    ``trace.quicsm_labels.events_kept``.
    ``lenient``: a JSON-SEQ file whose last record was cut mid-write (an endpoint stopped
    while writing) is packed without that record, and listed in ``report.cut``; strict
    packing makes it an error.
    """
    roles = tuple(roles)
    unknown = sorted(set(roles) - set(ROLES))
    if unknown or not roles:
        raise InputError(f"roles: expected some of {', '.join(ROLES)}, got {', '.join(unknown)}")
    kept = frozenset(events) if events is not None else None
    dirs = find_run_dirs(run_dirs)
    output = Path(output)
    report = PackReport(output=output)
    tmp = output.with_name(output.name + ".tmp")
    output.parent.mkdir(parents=True, exist_ok=True)
    cctx = zstandard.ZstdCompressor(level=level)
    try:
        with tmp.open("wb") as fh, cctx.stream_writer(fh) as out:
            for run_dir in dirs:
                try:
                    labels = json.loads((run_dir / "run.json").read_text())
                except ValueError as exc:
                    raise InputError(
                        f"{run_dir / 'run.json'}: expected a JSON object: {exc}"
                    ) from None
                if not isinstance(labels, dict):
                    raise InputError(f"{run_dir / 'run.json'}: expected a JSON object")
                files = [
                    (r, f) for r, f in _run_files(run_dir, labels) if f.is_file() and r in roles
                ]
                if not files:
                    report.skipped.append(
                        f"{run_dir}: no qlog files (status {labels.get('status')}: "
                        f"{labels.get('reason')})"
                    )
                    continue
                report.runs += 1
                depth = 5 if labels.get("cc_algorithm") else 4
                rel = Path(*run_dir.resolve().parts[-depth:])
                for role, path in files:
                    cut = report.cut if lenient else None
                    for header, records in read_qlog_traces(path, cut):
                        trace = dict(header.get("trace") or {})
                        trace["quicsm_labels"] = {
                            **_scalar_labels(labels),
                            "role": role,
                            "run_dir": rel.as_posix(),
                        }
                        if kept is not None:
                            trace["quicsm_labels"]["events_kept"] = ",".join(sorted(kept))
                            records = [ev for ev in records if event_name(ev) in kept]
                        header = {**header, "trace": trace}
                        out.write(RS + orjson.dumps(header, option=orjson.OPT_SORT_KEYS) + b"\n")
                        for ev in records:
                            out.write(RS + ev + b"\n")
                        report.traces += 1
                        report.events += len(records)
        tmp.replace(output)
    finally:
        tmp.unlink(missing_ok=True)
    report.bytes_written = output.stat().st_size
    return report
