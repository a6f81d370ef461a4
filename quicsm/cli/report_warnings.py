"""The one way the CLI reports warnings and notes on stderr.

Every warning is printed as ``warning: <text>`` and every note as ``note: <text>`` (not with
``-q``), once per command (repeats are dropped), with trace-provided text made safe for a
terminal first (:func:`terminal_safe`). Python warnings raised while a command runs are caught
by the command group and reported the same way, so none leaks with a file name and source line.
"""

from __future__ import annotations

import unicodedata

import click

from quicsm.core.diagnostics import Diagnostics

_printed: set[str] = set()
_quiet = False


def terminal_safe(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` with control characters (terminal escape sequences among them) and bidi
    overrides shown as escapes, so a trace's labels cannot drive the user's terminal."""
    out = []
    for ch in text:
        if ch in "\n\t" and keep_newlines:
            out.append(ch)
        elif unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\u200d":
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def reset() -> None:
    """Forget what was printed (each command invocation starts afresh)."""
    global _quiet
    _printed.clear()
    _quiet = False


def set_quiet(quiet: bool) -> None:
    """``-q``: notes are not printed (warnings and errors still are)."""
    global _quiet
    _quiet = quiet


def _emit(prefix: str, text: str) -> None:
    for line in terminal_safe(text).splitlines() or [""]:
        message = f"{prefix}{line}" if not line.startswith("  ") else line
        if message in _printed:
            continue
        _printed.add(message)
        click.echo(message, err=True)


def warn(text: str) -> None:
    _emit("warning: ", text)


def caution(text: str) -> None:
    """A caveat about a comparison (printed even with ``-q``)."""
    _emit("caution: ", text)


def note(text: str) -> None:
    if not _quiet:
        _emit("note: ", text)


def print_warnings(diagnostics: Diagnostics) -> None:
    """A read's diagnostics (lenient skips, truncation, unknown state names)."""
    for line in diagnostics.messages():
        warn(line)


def already_reported(text: str) -> bool:
    """Whether every line of ``text`` was printed already (a QuicsmWarning summarising a
    Diagnostics the command printed itself)."""
    lines = [terminal_safe(line) for line in text.splitlines() if line.strip()]
    return bool(lines) and all(f"warning: {line}" in _printed or line in _printed for line in lines)
