"""CPU time and peak memory of each reader on each reproducer family of the hostile campaign
(``quicsm.testing.hostile``), one child process per read (its peak RSS is its own), at sizes
given on the command line. A read ends in rows or in our error; either is reported.

::

    .venv/bin/python benchmarks/hostile_families.py            # the sizes quoted in docs/formats.md
    .venv/bin/python benchmarks/hostile_families.py --scale 0.1  # a quick look
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import zstandard

from quicsm.testing import hostile

#: family -> (generator call on (path, n), n at scale 1, readers)
FAMILIES = {
    "handed-back metrics, strict": ("handed_back_metrics", 100_000, ["read_transitions"]),
    "invalid metrics lines, lenient": ("invalid", 300_000, ["read_transitions"]),
    "CSV quoted field of line feeds (60 MiB)": (
        "csv_quoted_line_feeds",
        60 << 20,
        ["read_transitions"],
    ),
    "empty JSON-SEQ records (64 MiB)": (
        "empty_records",
        64 << 20,
        ["read_transitions", "inspect_file"],
    ),
    "empty NDJSON lines (64 MiB)": ("empty_ndjson", 64 << 20, ["read_transitions", "inspect_file"]),
    "one record of [{},{},...] (60 MiB)": (
        "wide_record",
        20 << 20,
        ["read_transitions", "read_metrics"],
    ),
    "contained-JSON top-level member (60 MiB)": (
        "contained_member",
        60 << 20,
        ["read_transitions"],
    ),
    "packet numbers out of range (-2 acknowledged), strict": (
        "out_of_range_packets",
        100_000,
        ["read_transitions"],
    ),
    "packet numbers out of range (-2 acknowledged), lenient": (
        "out_of_range_packets",
        100_000,
        ["read_transitions"],
    ),
    "metrics-only trace, zstd (1 GiB)": (
        "metrics_only",
        1 << 30,
        ["read_transitions", "read_traces", "inspect_file", "read_metrics"],
    ),
}


def make(kind: str, path: Path, n: int) -> Path:
    if kind == "invalid":
        return hostile.handed_back_metrics(path, n, invalid=True)
    if kind == "empty_ndjson":
        return hostile.empty_records(path, n, sep=b"\n")
    if kind == "metrics_only":
        plain = hostile.metrics_only(path, n)
        packed = path.with_name(path.name + ".zst")
        with plain.open("rb") as src, packed.open("wb") as dst:
            zstandard.ZstdCompressor(level=3).copy_stream(src, dst)
        plain.unlink()
        return packed
    maker = getattr(hostile, kind)
    return maker(path, n)  # type: ignore[no-any-return]


def measure(reader: str, path: Path, lenient: bool) -> dict[str, object]:
    module = "quicsm.qlog.inspect" if reader == "inspect_file" else "quicsm.extract.read"
    mode = "" if reader == "inspect_file" else f", on_error={'skip' if lenient else 'raise'!r}"
    # the 1 GiB file compresses past the default ratio cap (it repeats itself)
    limits = "" if reader == "inspect_file" else ", limits=ReadLimits(max_ratio=float('inf'))"
    code = textwrap.dedent(
        f"""
        import json, resource, time, warnings
        warnings.simplefilter("ignore")
        from quicsm.core.errors import QuicsmError
        from {module} import {reader} as read
        from quicsm.qlog.blocks import ReadLimits
        start = time.process_time()
        try:
            out = read({str(path)!r}{mode}{limits})
            result = f"rows {{getattr(out, 'height', '-')}}"
        except QuicsmError as exc:
            result = f"{{type(exc).__name__}}: {{str(exc)[-90:]}}"
        cpu = time.process_time() - start
        peak = int(open("/proc/self/status").read().split("VmHWM:")[1].split()[0]) / 1024
        print(json.dumps({{"cpu_s": round(cpu, 2), "peak_mb": round(peak), "result": result}}))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode != 0:
        return {"cpu_s": None, "peak_mb": None, "result": proc.stderr.strip()[-200:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every size")
    parser.add_argument("--only", help="families whose name contains this")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name, (kind, n, readers) in FAMILIES.items():
            if args.only and args.only not in name:
                continue
            size = max(1, int(n * args.scale))
            path = make(kind, Path(tmp) / f"input-{kind}", size)
            for reader in readers:
                lenient = "lenient" in name
                got = measure(reader, path, lenient)
                print(
                    f"| {name} | n={size} | {path.stat().st_size / 2**20:.1f} MiB | {reader} | "
                    f"{got['cpu_s']} s | {got['peak_mb']} MB | {got['result']} |",
                    flush=True,
                )
            path.unlink()


if __name__ == "__main__":
    main()
