"""Running a piece of code in a fresh interpreter and measuring its peak resident set size, so
that one test's allocations do not hide another's (test_read_large, test_read_memory)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass


@dataclass(frozen=True)
class ChildRun:
    returncode: int
    stdout: str
    stderr: str
    peak_mb: float


def run_child(code: str, *, show_warnings: bool = True, timeout: float = 300) -> ChildRun:
    """Run ``code`` in a fresh interpreter; its exit code, output and peak RSS in MB."""
    wrapper = textwrap.dedent(
        """
        import sys
        try:
        {body}
        finally:
            # VmHWM is this process image's peak (ru_maxrss would keep the forking parent's)
            status = open("/proc/self/status").read()
            peak = int(status.split("VmHWM:")[1].split()[0]) / 1024
            print(f"PEAK_MB={{peak:.1f}}", file=sys.stderr)
        """
    ).format(body=textwrap.indent(textwrap.dedent(code), "    "))
    flags = [] if show_warnings else ["-W", "ignore"]
    proc = subprocess.run(
        [sys.executable, *flags, "-c", wrapper], capture_output=True, text=True, timeout=timeout
    )
    peak = float(proc.stderr.rsplit("PEAK_MB=", 1)[1].split()[0])
    return ChildRun(proc.returncode, proc.stdout, proc.stderr, peak)
