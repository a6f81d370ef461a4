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
#: every read's diagnostics reported in this command (by identity, as they are now): what was
#: skipped is said once for all of them, a record two reads skipped once
_reads: dict[int, Diagnostics] = {}
#: the records and files said to be skipped so far, and the reasons given
_said = [0, 0]
_reasons_given: set[str] = set()


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
    _reads.clear()
    _said[:] = [0, 0]
    _reasons_given.clear()


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
    """A read's diagnostics (lenient skips, truncation, unknown state names). What was skipped
    is counted over every read of the command (:meth:`Diagnostics.absorb`: a record that two
    reads skipped is one) and only what was not said yet is said: ``skipped 2 records``, then
    after another read ``skipped 1 more record (3 in all)``."""
    for key, earlier in list(_reads.items()):
        if earlier is not diagnostics and diagnostics.covers(earlier):
            del _reads[key]  # a union of reads said before (one warning for a call's reads)
    _reads[id(diagnostics)] = diagnostics
    union = Diagnostics()
    for d in _reads.values():
        union.absorb(d)
    records = union.skipped_records - _said[0]
    files = union.skipped_files - _said[1]
    reasons = [r for r in union.reasons if r not in _reasons_given]
    if records > 0 or files > 0:
        first = not any(_said)
        lines = (
            union.skip_lines()
            if first
            else union.skip_lines(records=max(0, records), files=max(0, files), reasons=reasons)
        )
        _said[:] = [union.skipped_records, union.skipped_files]
        _reasons_given.update(union.reasons)
        for line in lines:
            warn(line)
    for line in diagnostics.other_messages():
        warn(line)


def warned(warning: Warning | str) -> None:
    """A Python warning raised while a command ran, in the CLI's words; a
    :class:`~quicsm.core.diagnostics.QuicsmWarning` summarising a read's diagnostics says only
    what was not said yet."""
    diagnostics = getattr(warning, "diagnostics", None)
    if isinstance(diagnostics, Diagnostics):
        print_warnings(diagnostics)
    elif not already_reported(str(warning)):
        warn(str(warning))


def already_reported(text: str) -> bool:
    """Whether every line of ``text`` was printed already (a QuicsmWarning summarising a
    Diagnostics the command printed itself)."""
    lines = [terminal_safe(line) for line in text.splitlines() if line.strip()]
    return bool(lines) and all(f"warning: {line}" in _printed or line in _printed for line in lines)
