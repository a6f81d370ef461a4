"""The report names each group's congestion controller and warns when the two groups differ."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl
import pytest
from identify_helpers import window_trace

from quicsm.compare.grouping import Comparison, group_from_frame
from quicsm.compare.load import compare_paths
from quicsm.report import build_report
from quicsm.report.controllers import controller_notes, group_families

FIXTURES = Path(__file__).resolve().parent / "fixtures"
STOCK_QUICGO = FIXTURES / "stock" / "quic-go-v0.48.2" / "server.sqlog.zst"


def _group(name: str, **kw: object) -> object:
    metrics, transitions = window_trace(**kw)  # type: ignore[arg-type]
    metrics = metrics.with_columns(pl.lit(name).alias("file"))
    transitions = transitions.with_columns(pl.lit(name).alias("file"))
    return group_from_frame(name, transitions, metrics=metrics)


def test_different_controllers_are_named_and_warned_about() -> None:
    reno = _group("v1", beta=0.5)
    cubic = _group("v2", beta=0.7, cubic=True, rtt_ms=100.0, rounds_between_losses=60)
    notes = controller_notes(Comparison(reno, cubic, label="version"))  # type: ignore[arg-type]
    assert notes[0].startswith("congestion controller (quicsm identify): v1: NewReno/Reno in 1")
    assert "v2: Cubic in 1" in notes[0]
    assert (
        len(notes) == 2 and "compared by version run different congestion controllers" in notes[1]
    )


def test_same_controller_gives_no_warning() -> None:
    a = _group("v1", beta=0.5)
    b = _group("v2", beta=0.5, rtt_ms=80.0)
    notes = controller_notes(Comparison(a, b, label="version"))  # type: ignore[arg-type]
    assert len(notes) == 1 and "warning" not in notes[0]


def test_groups_without_evidence_name_no_controller() -> None:
    a = _group("v1", losses=0, rounds_between_losses=0)
    assert group_families(a) == {"unknown": 1}  # type: ignore[arg-type]
    notes = controller_notes(Comparison(a, _group("v2", beta=0.5)))  # type: ignore[arg-type]
    assert "v1: no controller identified" in notes[0] and len(notes) == 1


def test_report_on_real_traces_shows_the_warning() -> None:
    comparison = compare_paths([str(STOCK_QUICGO)], [str(FIXTURES / "qlog" / "quiche_bbr.sqlog")])
    html = build_report([comparison], fmt="html", permutations=99)
    assert "NewReno/Reno in 1 of 1 traces" in html and "BBRv2/v3 in 1 of 1 traces" in html
    assert "run different congestion controllers" in html
    md = build_report([comparison], fmt="md", permutations=99)
    assert "- warning: the groups run different congestion controllers" in md


def test_groups_without_metrics_add_no_note() -> None:
    _, transitions = window_trace(beta=0.5)
    bare = group_from_frame("v1", transitions.with_columns(pl.lit("gone/v1.sqlog").alias("file")))
    other = _group("v2", beta=0.5)
    assert group_families(bare) is None  # type: ignore[arg-type]
    assert controller_notes(Comparison(bare, other)) == []  # type: ignore[arg-type]


def test_the_families_of_a_group_are_kept_and_counted_again_when_its_rows_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a cache directory, a group's controller families are counted once and read back
    (the same counts) by the next report of the same rows; another group's rows, or a change
    of a single value, are counted anew, and a damaged copy is counted again."""
    import quicsm.report.controllers as controllers

    calls: list[int] = []
    real = controllers.identify_frames

    def counting(*args: object, **kwargs: object) -> pl.DataFrame:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(controllers, "identify_frames", counting)
    reno = _group("v1", beta=0.5)
    cubic = _group("v2", beta=0.7, cubic=True, rtt_ms=100.0, rounds_between_losses=60)
    cache = tmp_path / "cache"
    expected = group_families(reno)  # type: ignore[arg-type]
    assert len(calls) == 1 and expected is not None and expected["NewReno/Reno"] == 1
    assert group_families(reno, cache_dir=cache) == expected and len(calls) == 2  # type: ignore[arg-type]
    (kept,) = (cache / "families").glob("*.json")
    assert group_families(reno, cache_dir=cache) == expected and len(calls) == 2  # type: ignore[arg-type]
    assert group_families(cubic, cache_dir=cache) == {"Cubic": 1} and len(calls) == 3  # type: ignore[arg-type]
    # one value changed: another key, counted anew
    changed = dataclasses.replace(
        reno,  # type: ignore[type-var]
        metrics=reno.metrics.with_columns(  # type: ignore[attr-defined]
            pl.when(pl.int_range(pl.len()) == 5)
            .then(pl.col("cwnd_bytes") + 1)
            .otherwise(pl.col("cwnd_bytes"))
            .alias("cwnd_bytes")
        ),
    )
    group_families(changed, cache_dir=cache)
    assert len(calls) == 4 and len(list((cache / "families").glob("*.json"))) == 3
    kept.write_text('{"families": {"Cubic": "one"}}')
    assert group_families(reno, cache_dir=cache) == expected and len(calls) == 5  # type: ignore[arg-type]
    assert group_families(reno, cache_dir=cache) == expected and len(calls) == 5  # type: ignore[arg-type]
    notes = controller_notes(Comparison(reno, cubic, label="version"), cache_dir=cache)  # type: ignore[arg-type]
    assert notes == controller_notes(Comparison(reno, cubic, label="version"))  # type: ignore[arg-type]
