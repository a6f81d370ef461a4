"""A report of groups read without metrics names their controllers by reading the metrics
itself (:func:`quicsm.report.controllers.group_families`): lenient (``build_report(...,
on_error="skip")``), that read skips a bad record and reports it into the report's
diagnostics, shown on the page, instead of failing to name the controllers; strict, the error
names the record. On a real quic-go trace with a metrics record cut short
(:mod:`test_skipped_once`)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from test_skipped_once import _broken

from quicsm.compare.load import compare_paths
from quicsm.core.diagnostics import Diagnostics, QuicsmWarning
from quicsm.core.errors import QlogError
from quicsm.report import build_report
from quicsm.report.controllers import controller_notes, group_families

#: a metrics record cut short: only the metrics' read decodes it (hybrid states)
BAD_METRICS = b'{"time":53.51,"name":"recovery:metrics_updated","data":{"congestion_window":\n'
GOT = '{"time":53.51,"name":"recovery:metrics_u'


def _comparison(tmp_path: Path, on_error: str = "skip") -> tuple[object, Path, Diagnostics]:
    (tmp_path / "clean").mkdir()
    bad = _broken(tmp_path, BAD_METRICS)
    clean = _broken(tmp_path / "clean")
    diag = Diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        comp = compare_paths(
            [str(bad)], [str(clean)], metrics=False, on_error=on_error, diagnostics=diag
        )  # type: ignore[arg-type]
    assert comp.a.metrics is None and diag.skipped_records == 0  # the states' read skips none
    return comp, bad, diag


def test_lenient_report_reads_the_metrics_leniently(tmp_path: Path) -> None:
    comp, bad, diag = _comparison(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        md = build_report([comp], fmt="md", permutations=99, on_error="skip", diagnostics=diag)
    reason = f"{bad}: record 100 (line 100): expected a JSON text, got {GOT!r} (trace {bad}#0000)"
    assert diag.skipped_records == 1 and diag.reasons == [reason]
    assert "not identified" not in md
    assert f"congestion controller (quicsm identify): {bad}: no controller identified (2 " in md
    assert f"- **Skipped input**: skipped 1 record (1 of {bad})" in md
    assert sum(f"{bad}: record 100" in str(w.message) for w in caught) == 1
    # no diagnostics given: the report keeps its own, and shows it
    html = build_report([comp], fmt="html", permutations=99, on_error="skip")
    assert 'id="skipped"' in html and "not identified" not in html


def test_group_families_skips_into_the_diagnostics(tmp_path: Path) -> None:
    comp, bad, _ = _comparison(tmp_path)
    diag = Diagnostics()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QuicsmWarning)
        counts = group_families(comp.a, on_error="skip", diagnostics=diag)  # type: ignore[attr-defined]
    assert counts is not None and sum(counts.values()) == 2
    assert diag.skipped_records == 1
    notes = controller_notes(comp, on_error="skip", diagnostics=Diagnostics())  # type: ignore[arg-type]
    assert not any("not identified" in n for n in notes)


def test_strict_report_names_the_record(tmp_path: Path) -> None:
    comp, bad, _ = _comparison(tmp_path, on_error="raise")
    with pytest.raises(QlogError, match=r"record 100 \(line 100\): expected a JSON text"):
        group_families(comp.a)  # type: ignore[attr-defined]
    notes = controller_notes(comp)  # type: ignore[arg-type]
    assert notes == [
        f"congestion controllers not identified: {bad}: record 100 (line 100): expected a JSON "
        f"text, got {GOT!r}"
    ]
