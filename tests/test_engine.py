"""quicsm.engine: batches, mergeable aggregates, the partition cache, and the same answers in
this process, in worker processes and on a real Dask cluster (tests/test_engine_dask.py)."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from quicsm.core.diagnostics import Diagnostics
from quicsm.core.errors import QlogError
from quicsm.engine import Aggregate, extract, infer_aggregate, merge_all
from quicsm.engine.aggregate import quantiles_from_counts
from quicsm.engine.plan import plan_batches
from quicsm.extract.read import read_batch, read_metrics, read_traces, read_transitions
from quicsm.model.inference import infer
from quicsm.model.synoptic import EventLog
from quicsm.qlog.blocks import count_bytes
from quicsm.qlog.source import read_qlog
from quicsm.stats.descriptive import compute_stats
from quicsm.testing.synthetic import generate_transitions

FIXTURES = Path(__file__).parent / "fixtures"
QLOG = FIXTURES / "qlog"
REAL = FIXTURES / "real"
#: every real qlog fixture that reads cleanly in strict mode
CLEAN = sorted(
    str(p)
    for p in [*QLOG.iterdir(), *REAL.rglob("*")]
    if p.is_file() and "truncated" not in p.name and p.suffix != ".csv" and p.name != "run.json"
)


def _strict_ok(files: list[str]) -> list[str]:
    """The files that read in strict mode with nothing to report."""
    ok = []
    for f in files:
        diag = Diagnostics()
        try:
            read_transitions([f], diagnostics=diag)
        except QlogError:  # fixtures meant to fail in strict mode
            continue
        if not diag:
            ok.append(f)
    return ok


CLEAN = _strict_ok(CLEAN)


def assert_stats_match(got: Aggregate, transitions: pl.DataFrame) -> None:
    """Counts bit for bit, floats to 1e-12 relative."""
    want = compute_stats(transitions)
    stats = got.stats()
    assert (stats.traces, stats.visits) == (want.traces, want.visits)
    assert stats.duration_ms == pytest.approx(want.duration_ms, rel=1e-12)
    for a, b in (
        (stats.time_in_state, want.time_in_state),
        (stats.transition_probabilities, want.transition_probabilities),
        (stats.dwell, want.dwell),
    ):
        assert a.select(pl.col(pl.Int64)).equals(b.select(pl.col(pl.Int64)))
        assert_frame_equal(a, b, check_exact=False, rel_tol=1e-12, abs_tol=1e-12)


# -- batches ------------------------------------------------------------------------------------


@given(
    sizes=st.lists(st.integers(0, 5000), max_size=60),
    max_files=st.integers(1, 10),
    max_bytes=st.integers(1, 8000),
)
def test_batches_cover_the_files_in_order_within_limits(
    sizes: list[int], max_files: int, max_bytes: int
) -> None:
    files = [f"f{i}" for i in range(len(sizes))]
    batches = plan_batches(files, sizes, max_files=max_files, max_bytes=max_bytes)
    assert [f for b in batches for f in b.files] == files
    assert [b.index for b in batches] == list(range(len(batches)))
    for b in batches:
        assert 1 <= len(b.files) <= max_files
        assert b.nbytes <= max_bytes or len(b.files) == 1  # a large file is a batch alone


# -- mergeable aggregates ----------------------------------------------------------------------


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(st.sampled_from([0.0, 0.5, 1.0, 2.5, 1e-3, 7.0, 1e9]), st.integers(1, 5)),
        min_size=1,
        max_size=12,
        unique_by=lambda t: t[0],
    ),
    st.lists(st.floats(0, 1), min_size=1, max_size=5),
)
def test_quantiles_from_counts_are_numpys_bit_for_bit(
    pairs: list[tuple[float, int]], qs: list[float]
) -> None:
    pairs.sort()
    values = np.array([v for v, _ in pairs])
    counts = np.array([c for _, c in pairs])
    want = np.quantile(np.repeat(values, counts), qs)
    got = quantiles_from_counts(values, counts, qs)
    assert [float(x) for x in want] == list(got)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.integers(1, 79), max_size=6))
def test_aggregates_of_any_partitioning_merge_to_the_whole(seed: int, cuts: list[int]) -> None:
    df = generate_transitions(80, seed=seed)
    traces = df.get_column("trace").unique(maintain_order=True).to_list()
    bounds = [0, *sorted(set(cuts)), len(traces)]
    parts = [
        Aggregate.of(df.filter(pl.col("trace").is_in(traces[lo:hi])))
        for lo, hi in zip(bounds, bounds[1:], strict=False)
    ]
    merged = merge_all(parts)
    assert_stats_match(merged, df)
    # the weighted distinct-trace set is the log inference builds from every row
    log, want = merged.event_log(), EventLog.from_transitions(df)
    assert log.labels == want.labels
    assert np.array_equal(log.codes, want.codes)
    assert np.array_equal(log.offsets, want.offsets)
    assert np.array_equal(log.weights, want.weights)
    assert merged.distinct == want.n_unique
    # merging one by one or all at once gives the same sums
    one_by_one = Aggregate()
    for p in parts:
        one_by_one = one_by_one.merge(p)
    a, b = one_by_one.stats(), merged.stats()
    assert a.duration_ms == b.duration_ms
    assert a.dwell.equals(b.dwell) and a.time_in_state.equals(b.time_in_state)
    assert a.transition_probabilities.equals(b.transition_probabilities)
    assert {k: (v.weight, v.dwell_ms.tolist()) for k, v in one_by_one.sequences.items()} == {
        k: (v.weight, v.dwell_ms.tolist()) for k, v in merged.sequences.items()
    }


@pytest.mark.parametrize("algorithm", ["synoptic", "ktails", "observed"])
def test_infer_aggregate_gives_the_model_of_infer(algorithm: str) -> None:
    df = generate_transitions(300, seed=7)
    traces = df.get_column("trace").unique(maintain_order=True).to_list()
    parts = [Aggregate.of(df.filter(pl.col("trace").is_in(traces[i::3]))) for i in range(3)]
    got = infer_aggregate(merge_all(parts), algorithm=algorithm, k=2, seed=3)
    want = infer(df, algorithm=algorithm, k=2, seed=3)
    assert got.nodes.equals(want.nodes)
    assert got.edges.equals(want.edges)
    assert got.invariants.equals(want.invariants)
    if want.node_time is None:
        assert got.node_time is None
    else:
        assert got.node_time is not None
        assert_frame_equal(got.node_time, want.node_time, check_exact=False, rel_tol=1e-12)
    if algorithm == "observed":
        assert got.node_time is not None  # observed models attribute every visit


# -- one read per batch --------------------------------------------------------------------------


@pytest.mark.parametrize("lenient", [False, True])
def test_read_batch_is_read_transitions_and_read_traces(lenient: bool) -> None:
    files = CLEAN if not lenient else sorted(str(p) for p in QLOG.iterdir() if p.is_file())
    on_error = "skip" if lenient else "raise"
    got = read_batch(files, on_error=on_error)
    diag = Diagnostics()
    with pytest.warns() if lenient else _no_warning():
        want = read_transitions(files, on_error=on_error, diagnostics=diag)
    assert got.transitions.equals(want)
    with pytest.warns() if lenient else _no_warning():
        assert got.traces.equals(read_traces(files, on_error=on_error))
    from quicsm.engine.task import merge_diagnostics

    assert merge_diagnostics(got.diagnostics[f] for f in files).messages() == diag.messages()


class _no_warning:  # noqa: N801 - used like pytest.warns
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_qlog_errors_cross_process_boundaries_intact() -> None:
    error = QlogError("x.sqlog", "an object", record=3, line=4, got="an array")
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is QlogError and str(back) == str(error)
    assert (back.file, back.record, back.line, back.got) == ("x.sqlog", 3, 4, "an array")


def test_bytes_are_counted_inside_a_file_as_it_is_read() -> None:
    big = Path(__file__).parent.parent / "traces" / "quic-go-v0.65.0.qlog"
    seen: list[int] = []
    with count_bytes(seen.append):
        read_qlog(big, block_size=1 << 20)
    assert sum(seen) == big.stat().st_size
    assert len(seen) > 1  # advanced while the file was being read, not once at the end


# -- engines and the cache -----------------------------------------------------------------------


def _same(a: object, b: object) -> None:
    from quicsm.engine.run import Corpus

    assert isinstance(a, Corpus) and isinstance(b, Corpus)
    assert a.traces.equals(b.traces)
    assert a.aggregate is not None and b.aggregate is not None
    sa, sb = a.aggregate.stats(), b.aggregate.stats()
    assert sa.time_in_state.equals(sb.time_in_state)  # bit for bit: same batches, same order
    assert sa.transition_probabilities.equals(sb.transition_probabilities)
    assert sa.dwell.equals(sb.dwell)
    assert a.diagnostics.messages() == b.diagnostics.messages()


def test_worker_processes_give_the_answers_of_one_process(tmp_path: Path) -> None:
    inline = extract(CLEAN, workers=1, cache=False, rows=True, batch_files=2)
    pool = extract(CLEAN, engine="processes", workers=2, cache=False, rows=True, batch_files=2)
    assert inline.workers == 1 and pool.workers == 2 and pool.batches > 2
    _same(inline, pool)
    whole = read_transitions(CLEAN)
    assert inline.transitions is not None and pool.transitions is not None
    assert inline.transitions.equals(whole) and pool.transitions.equals(whole)
    assert inline.traces.equals(read_traces(CLEAN))
    with_metrics = extract(
        CLEAN, engine="processes", workers=2, cache=False, metrics=True, batch_files=2
    )
    assert with_metrics.metrics is not None
    assert with_metrics.metrics.equals(read_metrics(CLEAN))
    assert inline.aggregate is not None
    assert_stats_match(inline.aggregate, whole)


def test_a_bad_file_is_named_from_a_worker_process(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlog"
    bad.write_bytes(b'\x1e{"qlog_format":"JSON-SEQ","qlog_version":"0.3"}\n\x1e[1,2]\n')
    with pytest.raises(QlogError, match="bad.sqlog"):
        extract([*CLEAN[:3], str(bad)], engine="processes", workers=2, cache=False, batch_files=1)
    lenient = extract(
        [*CLEAN[:3], str(bad)], engine="processes", workers=2, cache=False, on_error="skip"
    )
    assert "bad.sqlog" in "\n".join(lenient.diagnostics.messages())


def test_the_cache_reads_only_new_or_changed_files(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, f in enumerate(CLEAN[:6]):
        shutil.copy(f, corpus / f"{i}-{Path(f).name}")
    files = sorted(str(p) for p in corpus.iterdir())
    cache = tmp_path / "cache"
    first = extract(files, workers=1, cache_dir=cache, rows=True, batch_files=2)
    assert (first.read_files, first.cached_files) == (6, 0)
    again = extract(files, workers=1, cache_dir=cache, rows=True, batch_files=2)
    assert (again.read_files, again.cached_files) == (0, 6)
    _same(first, again)  # same batches: the same sums, bit for bit
    other = extract(files, workers=1, cache_dir=cache, rows=True, batch_files=3)
    assert other.aggregate is not None and other.transitions is not None
    assert_stats_match(other.aggregate, other.transitions)  # other batches: floats to 1e-12
    assert again.transitions is not None and again.transitions.equals(read_transitions(files))
    # a grown corpus: only the new files are read; a moved file is found by its content
    for i, f in enumerate(CLEAN[6:9]):
        shutil.copy(f, corpus / f"new{i}-{Path(f).name}")
    (corpus / "moved.qlog").write_bytes(Path(files[0]).read_bytes())
    Path(files[0]).unlink()
    grown = sorted(str(p) for p in corpus.iterdir())
    later = extract(grown, workers=1, cache_dir=cache, rows=True)
    assert (later.read_files, later.cached_files) == (3, 6)
    fresh = extract(grown, workers=1, cache=False, rows=True)
    _same(later, fresh)
    assert later.transitions is not None and later.transitions.equals(read_transitions(grown))
    # a changed file is read again
    Path(grown[-1]).write_bytes(Path(CLEAN[0]).read_bytes())
    changed = extract(grown, workers=1, cache_dir=cache)
    assert changed.read_files == 0 or changed.read_files == 1  # its new content may be cached
    _same(changed, extract(grown, workers=1, cache=False))


def test_what_reading_reported_is_cached_with_the_rows(tmp_path: Path) -> None:
    """A file with something to report (here cut mid-write) is read once; the cached run
    reports the same, with the path the file has now."""
    truncated = QLOG / "quicgo_truncated.sqlog"
    cache = tmp_path / "cache"
    first = extract([str(truncated), CLEAN[0]], workers=1, cache_dir=cache, rows=True)
    again = extract([str(truncated), CLEAN[0]], workers=1, cache_dir=cache, rows=True)
    assert (first.read_files, again.read_files, again.cached_files) == (2, 0, 2)
    assert any("cut mid-write" in m for m in first.diagnostics.messages())
    assert again.diagnostics.messages() == first.diagnostics.messages()
    _same(again, first)
    moved = tmp_path / "elsewhere.sqlog"
    moved.write_bytes(truncated.read_bytes())
    renamed = extract([str(moved), CLEAN[0]], workers=1, cache_dir=cache)
    fresh = extract([str(moved), CLEAN[0]], workers=1, cache=False)
    assert renamed.read_files == 0
    assert renamed.diagnostics.messages() == fresh.diagnostics.messages()
    assert any(str(moved) in m for m in renamed.diagnostics.messages())
    assert not any(str(truncated) in m for m in renamed.diagnostics.messages())


def test_lenient_skips_are_reported_again_from_the_cache(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlog"
    lines = Path(CLEAN[0]).read_bytes()
    bad.write_bytes(lines.replace(b'"time"', b'"time":"x","t"', 1))
    runs = [
        extract([str(bad)], workers=1, cache_dir=tmp_path / "c", on_error="skip") for _ in range(2)
    ]
    assert runs[1].cached_files == 1
    assert runs[0].diagnostics.messages() == runs[1].diagnostics.messages()
    assert runs[0].diagnostics.skipped_records + runs[0].diagnostics.skipped_files >= 1


def test_select_keeps_the_chosen_traces() -> None:
    from functools import partial

    from quicsm.compare.grouping import labelled_traces

    files = [str(p) for p in sorted(REAL.rglob("*.sqlog"))] or CLEAN
    keep = partial(labelled_traces, where={"vantage": "server"})
    got = extract(files, workers=1, cache=False, select=keep, rows=True)
    assert got.transitions is not None
    assert set(got.transitions.get_column("vantage").cast(pl.String).unique()) == {"server"}
    assert got.aggregate is not None
    assert_stats_match(got.aggregate, got.transitions)


def test_engine_options_are_checked_with_clear_errors() -> None:
    from click.testing import CliRunner

    from quicsm.cli import main

    result = CliRunner().invoke(main, ["states", CLEAN[0], "--scheduler", "tcp://127.0.0.1:9"])
    assert result.exit_code == 1
    assert "Error: --scheduler only applies with --engine dask" in result.output
    result = CliRunner().invoke(main, ["states", CLEAN[0], "--engine", "spark"])
    assert result.exit_code == 2 and "'spark' is not one of" in result.output
    from quicsm.core.errors import InputError

    with pytest.raises(InputError, match="unknown engine 'spark'"):
        extract(CLEAN[:1], engine="spark")
    with pytest.raises(InputError, match="workers must be a positive integer"):
        extract(CLEAN[:1], workers=0)


def test_a_table_is_keyed_without_hashing_and_read_again_each_time(tmp_path: Path) -> None:
    """Transition tables are never cached, so their bytes are not hashed for a key: an edited
    table (same size, new time) is read as it is now; qlog files keep content keys."""
    import os

    from quicsm.engine.cache import TABLE_KEY_PREFIX, file_key

    table = tmp_path / "t.csv"
    table.write_text("trace,time_ms,state\na,0,Init\na,1,SlowStart\n")
    assert file_key(str(table)).startswith(TABLE_KEY_PREFIX)
    assert not file_key(CLEAN[0]).startswith(TABLE_KEY_PREFIX)
    assert file_key(CLEAN[0]) == file_key(CLEAN[0])
    cache = tmp_path / "cache"
    first = extract([str(table)], workers=1, cache_dir=cache, rows=True)
    table.write_text("trace,time_ms,state\nb,0,Init\nb,1,Recovery\n")
    os.utime(table, ns=(1, 2))
    again = extract([str(table)], workers=1, cache_dir=cache, rows=True)
    assert (first.cached_files, again.cached_files, again.read_files) == (0, 0, 1)
    assert again.transitions is not None
    assert again.transitions.get_column("trace").cast(pl.String).unique().to_list() == ["b"]


def test_metrics_are_kept_with_a_batch_and_follow_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that asks for metrics keeps them per batch of files in the cache: the same run
    again reads no file for them, a copy of the corpus elsewhere gets its own ids, and the
    rows are those of :func:`read_metrics` (a file twice in a batch included)."""
    import quicsm.engine.task as task

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i, f in enumerate(CLEAN[:4]):
        shutil.copy(f, corpus / f"{i}-{Path(f).name}")
    shutil.copy(CLEAN[0], corpus / "9-again.qlog")  # the same content twice
    files = sorted(str(p) for p in corpus.iterdir())
    cache = tmp_path / "cache"
    first = extract(files, workers=1, cache_dir=cache, metrics=True, batch_files=3)
    assert first.metrics is not None and first.metrics.equals(read_metrics(files))

    def no_reading(*args: object, **kwargs: object) -> pl.DataFrame:
        raise AssertionError("metrics read again")

    moved = tmp_path / "moved"
    shutil.copytree(corpus, moved)
    elsewhere = sorted(str(p) for p in moved.iterdir())
    with monkeypatch.context() as m:
        m.setattr(task, "read_metrics", no_reading)
        again = extract(files, workers=1, cache_dir=cache, metrics=True, batch_files=3)
        copied = extract(elsewhere, workers=1, cache_dir=cache, metrics=True, batch_files=3)
    assert again.metrics is not None and again.metrics.equals(first.metrics)
    assert copied.metrics is not None and copied.metrics.equals(read_metrics(elsewhere))
