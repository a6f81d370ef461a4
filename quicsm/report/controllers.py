"""Which congestion controller each group of a comparison ran (``quicsm identify``), as notes
on the comparison: the family found in each group and a warning when the two differ — a change
of controller, not of the version, may then explain what the report shows.

Naming them computes every trace's features (:func:`quicsm.controllers.api.identify_frames`);
given a cache directory, a group's counts are kept there (``families/<hash>.json``) under the
hash of what they are computed from: the group's metric and transition rows, the source of
:mod:`quicsm.controllers` and of the readers it imports (``core``, ``qlog``, ``extract``), and
the versions of quicsm and polars (whose row hash is used). The same groups again are counted
once."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from collections import Counter
from pathlib import Path

import polars as pl

from quicsm.compare.grouping import Comparison, Group, OnError
from quicsm.controllers.api import identify_frames
from quicsm.controllers.signatures import UNKNOWN
from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QuicsmError
from quicsm.core.frames import KEY_DTYPE


def group_families(
    group: Group,
    *,
    cache_dir: Path | None = None,
    on_error: OnError = "raise",
    diagnostics: Diagnostics | None = None,
) -> Counter[str] | None:
    """How many traces of the group ``identify`` names each controller family (``unknown``
    included); ``None`` when the group has no metrics to identify from (a group built from a
    transitions frame alone, or whose files are gone). A group without metrics has them read
    from its files: strict, :class:`QuicsmError` if they cannot be read; ``on_error="skip"``,
    what the read skipped is warned of and added to ``diagnostics``. ``cache_dir``: the counts
    are kept there and read back (see above)."""
    metrics = group.metrics
    if metrics is None:
        from quicsm.extract.read import read_metrics

        files = sorted({str(f) for f in group.traces["file"].to_list() if f})
        if not files or not all(Path(f).is_file() for f in files):
            return None
        own = Diagnostics()
        metrics = read_metrics(files, on_error=on_error, diagnostics=own)
        if diagnostics is not None:
            diagnostics.absorb(own)
    if group.transitions.height == 0:
        return Counter({UNKNOWN: group.n_traces})
    keys = group.traces.select(pl.col("file").cast(KEY_DTYPE), pl.col("trace").cast(KEY_DTYPE))
    metrics = metrics.join(keys, on=["file", "trace"], how="semi")
    kept = _kept(cache_dir, metrics, group.transitions) if cache_dir is not None else None
    counts = _read_kept(kept) if kept is not None else None
    if counts is None:
        frame = identify_frames(metrics, group.transitions)
        counts = Counter(str(f) for f in frame["family"].to_list())
        if kept is not None:
            _write_kept(kept, counts)
    return counts


@functools.cache
def _fingerprint() -> str:
    """The source of :mod:`quicsm.controllers` (features, signatures, calibration) and of what
    it imports (the readers' fingerprint: ``quicsm.core``, ``quicsm.qlog``, ``quicsm.extract``
    and quicsm's version), and polars's version."""
    from quicsm.engine.cache import extractor_fingerprint

    h = hashlib.sha256(f"{extractor_fingerprint()}\npolars {pl.__version__}\n".encode())
    package = Path(__file__).resolve().parent.parent / "controllers"
    for path in sorted(package.rglob("*.py")):
        h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _rows_digest(frame: pl.DataFrame) -> bytes:
    """A digest of the rows of ``frame`` in order, with its column names and types; categories
    are hashed by their text (their codes differ from process to process)."""
    text = frame.with_columns(
        pl.col(c).cast(pl.String)
        for c, t in frame.schema.items()
        if isinstance(t, pl.Categorical | pl.Enum)
    )
    h = hashlib.sha256(repr(list(frame.schema.items())).encode())
    h.update(text.hash_rows(seed=0).to_numpy().tobytes())
    return h.digest()


def _kept(cache_dir: Path, metrics: pl.DataFrame, transitions: pl.DataFrame) -> Path:
    h = hashlib.sha256(_fingerprint().encode())
    h.update(_rows_digest(metrics))
    h.update(_rows_digest(transitions))
    return cache_dir / "families" / f"{h.hexdigest()}.json"


def _read_kept(kept: Path) -> Counter[str] | None:
    """The counts kept at ``kept``; None if there are none or they cannot be read whole."""
    try:
        value = json.loads(kept.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    counts = value.get("families") if isinstance(value, dict) else None
    if not isinstance(counts, dict) or not all(
        isinstance(n, int) and n > 0 for n in counts.values()
    ):
        return None
    return Counter({str(f): n for f, n in counts.items()})


def _write_kept(kept: Path, counts: Counter[str]) -> None:
    """Keep ``counts`` at ``kept``, whole or not at all; a cache that cannot be written only
    means they are counted again next time."""
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        temp = kept.with_name(f".{kept.name}.{os.getpid()}")
        temp.write_text(json.dumps({"families": dict(sorted(counts.items()))}), encoding="utf-8")
        os.replace(temp, kept)
    except OSError:
        return


def _dominant(counts: Counter[str]) -> str | None:
    known = [(n, f) for f, n in counts.items() if f != UNKNOWN]
    if not known:
        return None
    known.sort(key=lambda item: (-item[0], item[1]))
    if len(known) > 1 and known[0][0] == known[1][0]:
        return None  # a tie names no controller
    return known[0][1]


def _describe(name: str, counts: Counter[str]) -> str:
    total = sum(counts.values())
    named = ", ".join(
        f"{family} in {n}"
        for family, n in sorted(counts.items(), key=lambda i: (-i[1], i[0]))
        if family != UNKNOWN
    )
    unknown = counts.get(UNKNOWN, 0)
    if not named:
        return f"{name}: no controller identified ({total} traces without evidence)"
    return f"{name}: {named} of {total} traces ({unknown} unknown)"


def controller_notes(
    comparison: Comparison,
    *,
    cache_dir: Path | None = None,
    on_error: OnError = "raise",
    diagnostics: Diagnostics | None = None,
) -> list[str]:
    """The identified controller of each group, and a warning when they differ (nothing when a
    group has no metrics); ``cache_dir``, ``on_error`` and ``diagnostics`` as in
    :func:`group_families`."""
    how = {"cache_dir": cache_dir, "on_error": on_error, "diagnostics": diagnostics}
    try:
        a = group_families(comparison.a, **how)  # type: ignore[arg-type]
        b = group_families(comparison.b, **how)  # type: ignore[arg-type]
    except QuicsmError as exc:
        return [f"congestion controllers not identified: {exc}"]
    if a is None or b is None:
        return []  # no metrics: nothing to identify from
    notes = [
        "congestion controller (quicsm identify): "
        + "; ".join((_describe(comparison.a.name, a), _describe(comparison.b.name, b)))
    ]
    fa, fb = _dominant(a), _dominant(b)
    if fa and fb and fa != fb:
        by = f" compared by {comparison.label}" if comparison.label else ""
        notes.append(
            f"warning: the groups{by} run different congestion controllers ({comparison.a.name}: "
            f"{fa}, {comparison.b.name}: {fb}); differences may come from the controller, not "
            "only from what the groups are compared by"
        )
    return notes


def with_controller_notes(
    comparison: Comparison,
    *,
    cache_dir: Path | None = None,
    on_error: OnError = "raise",
    diagnostics: Diagnostics | None = None,
) -> Comparison:
    """A copy of ``comparison`` with :func:`controller_notes` added to its notes."""
    notes = controller_notes(
        comparison, cache_dir=cache_dir, on_error=on_error, diagnostics=diagnostics
    )
    return dataclasses.replace(comparison, notes=[*comparison.notes, *notes])
