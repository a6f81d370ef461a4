"""Child processes of the lab: each in its own process group, always cleaned up.

Every child is started with ``start_new_session=True`` so that it and everything it forks
share one process group which :meth:`Child.stop` signals as a whole (SIGTERM, then SIGKILL
after a grace period). The runner stops every child in ``finally`` blocks, so Ctrl-C leaves
no orphans; :func:`stop_all` is the last line of defence.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

_LIVE: set[Child] = set()
_LIVE_LOCK = threading.Lock()


class Child:
    """A started child; stdout lines are collected by a thread, stderr goes to a file."""

    def __init__(
        self,
        argv: list[str],
        *,
        env: dict[str, str],
        stderr_path: Path,
        cwd: Path | None = None,
    ) -> None:
        self.argv = argv
        self.stderr_path = stderr_path
        self._stderr = stderr_path.open("wb")
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._eof = False
        try:
            self.proc = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                start_new_session=True,
            )
        except OSError:
            self._stderr.close()
            raise
        with _LIVE_LOCK:
            _LIVE.add(self)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:  # closed at the end of the output (no unclosed-file warning)
            for raw in self.proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                with self._cond:
                    self.lines.append(line)
                    self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def wait_line(self, predicate: Callable[[str], bool], *, timeout_s: float) -> str | None:
        """First stdout line satisfying ``predicate``, or None on timeout / end of output."""
        deadline = time.monotonic() + timeout_s
        seen = 0
        with self._cond:
            while True:
                for line in self.lines[seen:]:
                    if predicate(line):
                        return line
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    return None
                self._cond.wait(left)

    def wait(self, *, timeout_s: float) -> int | None:
        """Exit code, or None if still running after ``timeout_s``."""
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        self._reader.join(timeout=2)
        return code

    def stderr_tail(self, *, max_chars: int = 600) -> str:
        self._stderr.flush()
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""
        return text[-max_chars:].strip()

    def _killpg(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def stop(self, *, grace_s: float = 3.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; returns the exit code."""
        code = self.proc.poll()
        if code is None:
            self._killpg(signal.SIGCONT)  # a duty-cycled child may be stopped
            self._killpg(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._killpg(signal.SIGKILL)
                code = self.proc.wait()
        # children of the group that outlived the leader
        self._killpg(signal.SIGKILL)
        self._reader.join(timeout=2)
        self._stderr.close()
        with _LIVE_LOCK:
            _LIVE.discard(self)
        return code


def stop_all() -> None:
    """Stop every child still running (used when the runner is interrupted)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for child in live:
        child.stop(grace_s=1.0)
