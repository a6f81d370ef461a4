"""What went wrong while reading, and what lenient reading skipped.

The parsing core knows byte offsets, not files: it raises or records :class:`RecordProblem`
(offset into the decompressed stream). The I/O layer turns offsets into record and line numbers
(:func:`locate`) and problems into :class:`quicsm.core.errors.QlogError` with the file name.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from quicsm.core.errors import QlogError

#: how many reasons a lenient read keeps verbatim
MAX_REASONS = 5
#: how many problems a parser keeps (the rest are only counted: memory stays bounded)
MAX_KEPT_PROBLEMS = 64


#: a skipped record's identity within its file: its byte offset in the decompressed content
#: (JSON-SEQ, NDJSON) or its place (contained JSON: ``traces[0].events[17]``); the same record
#: has the same key in every read of the same content, so two reads that skip it count it once
RecordKey = int | str


def record_key(problem: RecordProblem) -> RecordKey | None:
    """The :data:`RecordKey` of a problem's record (None: the problem names no record)."""
    if problem.where is not None:
        return problem.where
    return problem.offset


class QuicsmWarning(UserWarning):
    """Something was read but deserves attention: skipped records, truncation, unknown states.
    ``diagnostics``: the :class:`Diagnostics` it summarises (:meth:`Diagnostics.warn`), so that
    a reporter can tell what of it was reported already."""

    diagnostics: Diagnostics | None = None


class RecordProblem(Exception):
    """A record at ``offset`` (bytes into the decompressed stream) is not what was expected.

    ``offset`` may be ``None`` when the problem has a position given some other way
    (``where``, e.g. ``traces[0].events[17]`` in a contained JSON file).
    """

    def __init__(
        self,
        offset: int | None,
        expected: str,
        got: str | None = None,
        *,
        where: str | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(expected)
        self.offset = offset
        self.expected = expected
        self.got = got
        self.where = where
        self.line = line


class RecordTooLarge(RecordProblem):
    """A record (or contained-JSON value) grew past the reader's cap before it ended."""

    def __init__(self, offset: int | None, size: int) -> None:
        super().__init__(offset, "a record within the size cap", f"more than {size} bytes")
        self.size = size


def locate(data: bytes, offset: int, *, sep: bytes) -> tuple[int, int]:
    """1-based (record, line) of the record that contains ``offset``.

    Records are the pieces between separators (RS for JSON-SEQ, LF for NDJSON); the record
    count includes the piece before the first separator only when it holds more than whitespace.
    """
    offset = max(0, min(offset, len(data)))
    line = data.count(b"\n", 0, offset) + 1
    if sep == b"\n":
        return line, line
    first = data.find(sep)
    record = data.count(sep, 0, offset + 1)
    if first == -1 or data[:first].strip():
        record += 1
    return max(record, 1), line


def describe(value: object) -> str:
    """How an unexpected JSON value is named in error messages."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {text!r}"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null"
    return f"the number {value!r}"


@dataclass
class Diagnostics:
    """Everything a read reported besides its rows. Pass one in to read it afterwards."""

    skipped_records: int = 0
    skipped_files: int = 0
    reasons: list[str] = field(default_factory=list)
    truncated: list[str] = field(default_factory=list)
    unknown_states: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    #: ``(trace, states, reason)``: states a trace's events cannot show (derived states;
    #: ``states`` empty: none can be shown)
    derivation: list[tuple[str, str, str]] = field(default_factory=list)
    #: each file's skipped records by :data:`RecordKey` (the records counted in
    #: ``skipped_records`` that a read could name; the rest it only counted)
    skipped_at: dict[str, set[RecordKey]] = field(default_factory=dict)
    #: the record each of ``reasons`` is about, ``(file, key)`` (None: not known)
    reason_at: list[tuple[str, RecordKey] | None] = field(default_factory=list)
    #: the files counted in ``skipped_files`` that a read could name
    skipped_file_names: set[str] = field(default_factory=set)

    def cannot_derive(self, trace: str, states: str, reason: str) -> None:
        self.derivation.append((trace, states, reason))

    def derivation_messages(self) -> list[str]:
        """One line per distinct notice: ``<states> cannot be derived: <reason>`` (``no state
        can be derived: <reason>`` when no states are named), with the number of traces and the
        first of them."""
        groups: dict[tuple[str, str], list[str]] = {}
        for trace, states, reason in self.derivation:
            groups.setdefault((states, reason), []).append(trace)
        out = []
        for (states, reason), traces in groups.items():
            where = traces[0] if len(traces) == 1 else f"{len(traces)} traces, e.g. {traces[0]}"
            head = f"{states} cannot be derived" if states else "no state can be derived"
            out.append(f"{head}: {reason} ({where})")
        return out

    def skip(self, error: QlogError, *, file_level: bool = False) -> None:
        if file_level:
            if error.file in self.skipped_file_names:
                return  # that file was skipped (and its reason given) already
            self.skipped_files += 1
            self.skipped_file_names.add(error.file)
        else:
            self.skipped_records += 1
        if len(self.reasons) < MAX_REASONS:
            self.reasons.append(str(error))
            self.reason_at.append(None)

    def skip_records(
        self,
        file: str,
        *,
        skipped: int,
        keys: Iterable[RecordKey],
        reasons: Sequence[tuple[RecordKey | None, str]],
    ) -> None:
        """One read of ``file`` skipped ``skipped`` records, those of ``keys`` among them (the
        rest it could not name), the first ones for ``reasons`` (``(key, reason)``). A record
        an earlier read of the file skipped already is neither counted nor given again."""
        part = Diagnostics(skipped_records=skipped, skipped_at={file: set(keys)})
        for key, reason in reasons:
            part.reasons.append(reason)
            part.reason_at.append(None if key is None else (file, key))
        self.absorb(part)

    def unnamed_records(self) -> int:
        """How many of the skipped records no key names (counted, never deduplicated)."""
        return max(0, self.skipped_records - sum(len(k) for k in self.skipped_at.values()))

    def absorb(self, other: Diagnostics) -> None:
        """Add what ``other`` reported: a record both skipped (the same file and key) is
        counted, and its reason given, once; everything else is added."""
        known: dict[str, set[RecordKey]] = {}  # of other's records, those counted before
        new = 0
        for file, keys in other.skipped_at.items():
            mine = self.skipped_at.setdefault(file, set())
            known[file] = keys & mine
            mine |= keys
            new += len(keys) - len(known[file])
        self.skipped_records += other.unnamed_records() + new
        files = other.skipped_file_names - self.skipped_file_names
        unnamed_files = max(0, other.skipped_files - len(other.skipped_file_names))
        self.skipped_files += len(files) + unnamed_files
        self.skipped_file_names |= files
        at_list = other.reason_at + [None] * (len(other.reasons) - len(other.reason_at))
        given = {at for at in self.reason_at if at is not None}
        for reason, at in zip(other.reasons, at_list, strict=False):
            if len(self.reasons) >= MAX_REASONS:
                break
            if at is not None and (at in given or at[1] in known.get(at[0], ())):
                continue  # that record was reported already
            if at is None and reason in self.reasons:
                continue  # a file's reason (or an unnamed record's), given already
            self.reasons.append(reason)
            self.reason_at.append(at)
            if at is not None:
                given.add(at)
        self.truncated.extend(t for t in other.truncated if t not in self.truncated)
        self.unknown_states.update(other.unknown_states)
        for note in other.notes:
            self.note(note)
        self.derivation.extend(other.derivation)

    def unknown_state(self, raw: str) -> None:
        self.unknown_states[raw] += 1

    def note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)

    def skip_lines(
        self, *, records: int | None = None, files: int | None = None, reasons: Sequence[str] = ()
    ) -> list[str]:
        """What was skipped: ``skipped N records and M files; first K reasons:`` and the
        reasons. ``records``, ``files`` and ``reasons`` say only those (what a reporter has not
        said yet), with the totals in words (``1 more record (3 in all)``)."""
        more = records is not None or files is not None
        n_records = self.skipped_records if records is None else records
        n_files = self.skipped_files if files is None else files
        shown = list(self.reasons) if not more else list(reasons)
        if not (n_records or n_files):
            return []
        what = []
        extra = " more" if more else ""
        if n_records:
            total = f" ({self.skipped_records} in all)" if more else ""
            what.append(f"{n_records}{extra} record{'s' * (n_records != 1)}{total}")
        if n_files:
            total = f" ({self.skipped_files} in all)" if more else ""
            what.append(f"{n_files}{extra} file{'s' * (n_files != 1)}{total}")
        k = len(shown)
        head = f"skipped {' and '.join(what)}"
        if not k:
            return [head]
        return [f"{head}; first {k} reason{'s' * (k != 1)}:", *(f"  {r}" for r in shown)]

    def messages(self) -> list[str]:
        """Human-readable lines, most important first (what the CLI prints on stderr)."""
        return [*self.skip_lines(), *self.other_messages()]

    def other_messages(self) -> list[str]:
        """The lines of :meth:`messages` after what was skipped."""
        out: list[str] = []
        out.extend(self.truncated)
        if self.unknown_states:
            names = ", ".join(f"{k!r} ({v}x)" for k, v in sorted(self.unknown_states.items()))
            out.append(f"state names not in the alias table were kept as Unknown: {names}")
        out.extend(self.notes)
        out.extend(self.derivation_messages())
        return out

    def __bool__(self) -> bool:
        return bool(self.messages())

    def to_json(self) -> str:
        """Everything as JSON (stored beside cached rows); :meth:`from_json` reads it back."""
        return json.dumps(
            {
                "skipped_records": self.skipped_records,
                "skipped_files": self.skipped_files,
                "reasons": self.reasons,
                "truncated": self.truncated,
                "unknown_states": dict(self.unknown_states),
                "notes": self.notes,
                "derivation": [list(d) for d in self.derivation],
                "skipped_at": {
                    f: sorted(k, key=lambda v: (isinstance(v, str), v))
                    for f, k in sorted(self.skipped_at.items())
                },
                "reason_at": [None if a is None else list(a) for a in self.reason_at],
                "skipped_file_names": sorted(self.skipped_file_names),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str, *, rename: tuple[str, str] | None = None) -> Diagnostics:
        """Diagnostics stored by :meth:`to_json`; ``rename=(old, new)`` replaces a file's old
        path by its new one in every message (the file was read under another name)."""

        def moved(value: str) -> str:
            return value.replace(rename[0], rename[1]) if rename and rename[0] else value

        d = json.loads(text)
        return cls(
            skipped_records=int(d["skipped_records"]),
            skipped_files=int(d["skipped_files"]),
            reasons=[moved(r) for r in d["reasons"]],
            truncated=[moved(t) for t in d["truncated"]],
            unknown_states=Counter({k: int(v) for k, v in d["unknown_states"].items()}),
            notes=[moved(n) for n in d["notes"]],
            derivation=[(moved(t), s, moved(r)) for t, s, r in d["derivation"]],
            skipped_at={moved(f): set(k) for f, k in d.get("skipped_at", {}).items()},
            reason_at=[None if a is None else (moved(a[0]), a[1]) for a in d.get("reason_at", [])],
            skipped_file_names={moved(f) for f in d.get("skipped_file_names", [])},
        )

    def covers(self, other: Diagnostics) -> bool:
        """Whether everything ``other`` reports is reported here too: its named records and
        files, no more unnamed records than here, its reasons and its other messages."""
        if any(not keys <= self.skipped_at.get(f, set()) for f, keys in other.skipped_at.items()):
            return False
        if not other.skipped_file_names <= self.skipped_file_names:
            return False
        if other.unnamed_records() > self.unnamed_records():
            return False
        if max(0, other.skipped_files - len(other.skipped_file_names)) > max(
            0, self.skipped_files - len(self.skipped_file_names)
        ):
            return False
        given = set(self.reasons)
        at_list = other.reason_at + [None] * (len(other.reasons) - len(other.reason_at))
        full = len(self.reasons) >= MAX_REASONS  # a reason not kept here was counted
        for reason, at in zip(other.reasons, at_list, strict=False):
            counted = at is not None and at[1] in self.skipped_at.get(at[0], ())
            if not (full or reason in given or counted):
                return False
        mine = set(self.other_messages())
        return all(m in mine for m in other.other_messages())

    def warn(self, *, stacklevel: int = 3) -> None:
        """Emit one :class:`QuicsmWarning` summarising everything, if there is anything."""
        lines = self.messages()
        if lines:
            warning = QuicsmWarning("\n".join(lines))
            warning.diagnostics = self
            warnings.warn(warning, stacklevel=stacklevel)


@contextmanager
def warned_once(union: Diagnostics, *, stacklevel: int = 5) -> Iterator[None]:
    """Within: the :class:`QuicsmWarning` of each read whose diagnostics ``union`` covers
    (:meth:`Diagnostics.covers`: the reads add what they report to ``union``) is held back;
    on leaving, ``union`` is warned of once (:meth:`Diagnostics.warn`), so that a record several
    reads skipped is in one warning, and every other warning is given as it was. When the
    block raises, every warning held back is given as it was."""
    caught: list[warnings.WarningMessage] = []
    done = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        done = True
    finally:
        for w in caught:
            d = getattr(w.message, "diagnostics", None)
            if done and isinstance(d, Diagnostics) and (d is union or union.covers(d)):
                continue
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    union.warn(stacklevel=stacklevel)
