"""What a lenient read skipped, said in an output itself and not only on stderr: the report's
box above the comparisons and its Methods item, and ``quicsm diff``'s JSON (``skipped``),
Markdown and text. Nothing is said when nothing was skipped, so the output of undamaged input
is the same byte for byte."""

from __future__ import annotations

from typing import Any

from quicsm.core.diagnostics import Diagnostics, RecordKey
from quicsm.render.escape import esc

#: the heading of what was skipped, in every format
TITLE = "Skipped input (lenient reading)"
#: what each reason names
REASON_WORDS = "file, record (line), what was expected and what was found, trace"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _key_order(key: RecordKey) -> tuple[bool, int | str]:
    return (isinstance(key, str), key)


def anything_skipped(diagnostics: Diagnostics | None) -> bool:
    return diagnostics is not None and bool(
        diagnostics.skipped_records or diagnostics.skipped_files
    )


def skipped_summary(diagnostics: Diagnostics) -> str:
    """One sentence: how many records of which files, and which files whole, lenient reading
    skipped (records no read could place in a file counted apart)."""
    d = diagnostics
    what = []
    if d.skipped_records:
        where = [f"{len(keys)} of {file}" for file, keys in sorted(d.skipped_at.items()) if keys]
        if d.unnamed_records():
            where.append(f"{d.unnamed_records()} not placed in a file")
        what.append(f"{_count(d.skipped_records, 'record')} ({'; '.join(where)})")
    if d.skipped_files:
        where = sorted(d.skipped_file_names)
        if d.skipped_files > len(where):
            where.append(f"{d.skipped_files - len(where)} not named")
        what.append(f"{_count(d.skipped_files, 'file')} whole ({'; '.join(where)})")
    return f"skipped {' and '.join(what)}; what they hold is not counted"


def skipped_lines(diagnostics: Diagnostics) -> list[str]:
    """The summary, then the first reasons (:data:`REASON_WORDS`), one a line."""
    lines = [skipped_summary(diagnostics)]
    k = len(diagnostics.reasons)
    if k:
        lines.append(f"the first {_count(k, 'reason')} ({REASON_WORDS}):")
        lines += list(diagnostics.reasons)
    return lines


def skipped_dict(diagnostics: Diagnostics) -> dict[str, Any]:
    """What was skipped as JSON-ready data: the counts, each file's count of skipped records
    and their keys (``record_keys``: each record's byte offset into the decompressed file, or
    its place ``traces[i].events[j]`` in contained JSON), the records no read could place, the
    files skipped whole and the first reasons (:data:`REASON_WORDS`)."""
    d = diagnostics
    return {
        "records": d.skipped_records,
        "files": d.skipped_files,
        "records_by_file": {file: len(keys) for file, keys in sorted(d.skipped_at.items()) if keys},
        "record_keys": {
            file: sorted(keys, key=_key_order)
            for file, keys in sorted(d.skipped_at.items())
            if keys
        },
        "records_not_placed": d.unnamed_records(),
        "files_skipped_whole": sorted(d.skipped_file_names),
        "reasons": list(d.reasons),
    }


def skipped_text(diagnostics: Diagnostics | None) -> list[str]:
    """Plain text lines (``quicsm diff``'s table): nothing when nothing was skipped."""
    if diagnostics is None or not anything_skipped(diagnostics):
        return []
    first, *rest = skipped_lines(diagnostics)
    out = [f"LENIENT: {first}"]
    if rest:
        out.append(f"  {rest[0]}")
        out += [f"    {r}" for r in rest[1:]]
    return [*out, ""]


def skipped_markdown(diagnostics: Diagnostics | None, *, md_cell: Any) -> list[str]:
    """Markdown lines (a quoted warning): nothing when nothing was skipped. ``md_cell`` makes
    a text safe in Markdown."""
    if diagnostics is None or not anything_skipped(diagnostics):
        return []
    first, *rest = skipped_lines(diagnostics)
    out = [f"> **{TITLE}:** {md_cell(first)}"]
    if rest:
        out += [">", f"> {md_cell(rest[0])}", ">"]
        out += [f"> - {md_cell(r)}" for r in rest[1:]]
    return [*out, ""]


def skipped_html(diagnostics: Diagnostics | None) -> str:
    """The report's box (``id="skipped"``): nothing when nothing was skipped."""
    if diagnostics is None or not anything_skipped(diagnostics):
        return ""
    first, *rest = skipped_lines(diagnostics)
    reasons = ""
    if rest:
        items = "".join(f"<li>{esc(r)}</li>" for r in rest[1:])
        reasons = f'<p class="quiet">{esc(rest[0])}</p><ul class="files">{items}</ul>'
    return (
        f'<div class="card" id="skipped" role="alert"><h3>{esc(TITLE)}</h3>'
        f'<p class="caution"><b>Caution:</b> {esc(first)}</p>{reasons}</div>'
    )
