"""``quicsm infer`` end to end: inputs (CSV, Parquet, qlog), outputs, formats, errors."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest
from click.testing import CliRunner
from test_model import GOLDEN, fig13_transitions

from quicsm.cli import main
from quicsm.extract.read import read_transitions
from quicsm.model.inference import infer

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture()
def csv_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # beside, not inside, the output directory (one holding other files is left alone)
    path = tmp_path_factory.mktemp("input") / "fig13.csv"
    fig13_transitions().write_csv(path)
    return path


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["infer", *map(str, args)], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_writes_every_output_and_a_summary(csv_input: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, stdout, stderr = run(csv_input, "-o", out, "--algorithm", "observed")
    assert code == 0, stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == ["model.dot", "model.json", "model.svg", "stats.csv", "transitions.csv"]
    # the CLI is the library: same model, byte for byte, and the Fig. 13 golden diagram
    expected = infer(read_transitions([str(csv_input)]), algorithm="observed")
    assert (out / "model.json").read_text() == expected.to_json()
    assert (out / "model.dot").read_text() == (GOLDEN / "fig13_observed.dot").read_text()
    assert (out / "model.svg").read_bytes().lstrip().startswith((b"<?xml", b"<svg"))
    assert "6 traces, 34 state entries" in stdout
    assert "ApplicationLimited" in stdout and "44.9%" in stdout
    assert f"wrote {out / 'model.json'}" in stdout


def test_stats_csv_layout(csv_input: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(csv_input, "-o", out, "--algorithm", "observed", "--format", "json")
    stats = pl.read_csv(out / "stats.csv")
    assert stats.columns == [
        "state", "seconds", "fraction", "mean_fraction", "traces", "visits", "censored", "nodes",
        "dwell_mean_ms", "dwell_median_ms", "dwell_p10_ms", "dwell_p90_ms",
    ]  # fmt: skip
    assert stats["fraction"].sum() == pytest.approx(1.0)
    assert stats["visits"].sum() == 34
    tr = pl.read_csv(out / "transitions.csv")
    assert tr.columns == [
        "source", "target", "count", "traces", "probability", "ci_low", "ci_high"
    ]  # fmt: skip
    sums = tr.group_by("source").agg(pl.col("probability").sum())
    assert sums["probability"].to_list() == pytest.approx([1.0] * sums.height)


@pytest.mark.parametrize(
    ("fmt", "image", "magic"),
    [("png", "model.png", b"\x89PNG"), ("pdf", "model.pdf", b"%PDF"), ("dot", None, None),
     ("json", None, None)],
)  # fmt: skip
def test_formats(
    csv_input: Path, tmp_path: Path, fmt: str, image: str | None, magic: bytes | None
) -> None:
    code, _, stderr = run(csv_input, "-o", tmp_path, "--format", fmt, "--quiet")
    assert code == 0, stderr
    rendered = [p.name for p in tmp_path.iterdir() if p.suffix in (".svg", ".png", ".pdf")]
    if image is None:
        assert rendered == []
    else:
        assert rendered == [image]
        assert (tmp_path / image).read_bytes().startswith(magic or b"")


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_outputs_follow_the_users_umask(csv_input: Path, tmp_path: Path, umask: int) -> None:
    """The output directory is created as mkdir would under the user's umask (not mkdtemp's
    private 0700), and so are the files."""
    import os
    import stat

    previous = os.umask(umask)
    try:
        out = tmp_path / "out"
        code, _, stderr = run(csv_input, "-o", out, "--algorithm", "observed", "--format", "dot")
    finally:
        os.umask(previous)
    assert code == 0, stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~umask
    for f in out.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o666 & ~umask, f.name


def test_same_seed_gives_byte_identical_outputs(csv_input: Path, tmp_path: Path) -> None:
    for d in ("a", "b"):
        code, _, stderr = run(
            csv_input, "-o", tmp_path / d, "--seed", "5", "--algorithm", "synoptic", "--quiet"
        )
        assert code == 0, stderr
    for name in ("model.json", "model.dot", "stats.csv", "transitions.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    data = orjson.loads((tmp_path / "a" / "model.json").read_bytes())
    assert (data["algorithm"], data["seed"], data["k"]) == ("synoptic", 5, 1)


def test_parquet_and_k_options(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    fig13_transitions().write_parquet(path)
    code, _, stderr = run(path, "-o", tmp_path / "o", "--algorithm", "ktails", "-k", "2", "-q")
    assert code == 0, stderr
    data = orjson.loads((tmp_path / "o" / "model.json").read_bytes())
    assert (data["algorithm"], data["k"]) == ("ktails", 2)


def test_real_qlog_traces(tmp_path: Path) -> None:
    code, stdout, stderr = run(FIXTURES / "real", "-o", tmp_path, "--format", "png")
    assert code == 0, stderr
    data = orjson.loads((tmp_path / "model.json").read_bytes())
    assert data["traces"] >= 2
    assert {n["state"] for n in data["nodes"]} >= {"INITIAL", "TERMINAL", "Init"}
    assert (tmp_path / "model.png").read_bytes().startswith(b"\x89PNG")
    # the default picture is the observed model (one node per state, as in Fig. 13)
    assert "observed model" in stdout and data["algorithm"] == "observed"
    states = [n["state"] for n in data["nodes"]]
    assert len(states) == len(set(states))
    code, stdout, stderr = run(FIXTURES / "real", "-o", tmp_path / "s", "--algorithm", "synoptic")
    assert code == 0, stderr
    assert "synoptic model" in stdout


def test_quiet_prints_nothing(csv_input: Path, tmp_path: Path) -> None:
    code, stdout, stderr = run(csv_input, "-o", tmp_path / "out", "--quiet")
    assert (code, stdout, stderr) == (0, "", "")


def test_missing_input_is_a_clean_error(tmp_path: Path) -> None:
    code, _, stderr = run(tmp_path / "nope.qlog", "-o", tmp_path / "o")
    assert code == 1
    assert stderr.startswith("Error: ") and "nope.qlog" in stderr
    assert "Traceback" not in stderr


def test_bad_file_is_named_and_lenient_skips_it(csv_input: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.qlog"
    bad.write_text("this is not qlog")
    code, _, stderr = run(csv_input, bad, "-o", tmp_path / "o")
    assert code == 1 and "bad.qlog" in stderr and stderr.startswith("Error: ")
    code, stdout, stderr = run(csv_input, bad, "-o", tmp_path / "o", "--lenient")
    assert code == 0, stderr
    assert "warning: skipped 1 file" in stderr and "bad.qlog" in stderr
    assert "6 traces" in stdout


def test_lenient_with_every_file_skipped_says_so(tmp_path: Path) -> None:
    """A lenient run whose every input was skipped (qvis's .qlog.js wrappers) says that, not
    that the input had no state rows."""
    files = []
    for name in ("a.qlog.js", "b.qlog.js"):
        (tmp_path / name).write_text('var trace = {"qlog_version": "draft-01"};\n')
        files.append(tmp_path / name)
    code, _, stderr = run(*files, "-o", tmp_path / "o", "--lenient")
    assert code == 1 and "warning: skipped 2 files" in stderr
    assert stderr.rstrip().endswith(
        "Error: no model to infer: all 2 input files were skipped (the reasons are above)"
    )
    code, _, stderr = run(files[0], "-o", tmp_path / "o", "--lenient")
    assert stderr.rstrip().endswith(
        "Error: no model to infer: the input file was skipped (the reasons are above)"
    )


def test_unknown_algorithm_lists_choices(csv_input: Path) -> None:
    result = CliRunner().invoke(main, ["infer", str(csv_input), "--algorithm", "perfume"])
    assert result.exit_code == 2
    assert "'perfume' is not one of 'synoptic', 'ktails', 'observed'" in result.output


def test_missing_dot_keeps_json_and_says_why(
    csv_input: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "")
    out = tmp_path / "out"
    code, _, stderr = run(csv_input, "-o", out, "--quiet")
    assert code == 1
    assert "Error: rendering a diagram needs Graphviz's `dot` program" in stderr
    assert (out / "model.json").exists() and (out / "model.dot").exists()
    assert not (out / "model.svg").exists()
    code, _, stderr = run(csv_input, "-o", out, "--quiet", "--format", "dot")
    assert code == 0, stderr


def test_output_path_that_is_a_file_is_an_error(csv_input: Path, tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    result = CliRunner().invoke(main, ["infer", str(csv_input), "-o", str(target)])
    assert result.exit_code != 0
    assert "file" in result.output


def test_progress_bar_counts_bytes_with_the_same_result(tmp_path: Path) -> None:
    import io

    from rich.console import Console

    from quicsm.cli.engine_options import EngineChoice
    from quicsm.cli.infer import _Progress, _progress, _read
    from quicsm.stats.descriptive import compute_stats

    df = fig13_transitions()
    files = []
    for i, part in enumerate(df.partition_by("trace", maintain_order=True)):
        files.append(tmp_path / f"part{i}.csv")
        part.write_csv(files[-1])
    sink = io.StringIO()
    console = Console(file=sink, force_terminal=True, width=100)
    choice = EngineChoice("local", None, 1, tmp_path / "cache", True)
    with _Progress(files, enabled=True, console=console) as progress:
        got = _read(files, select=None, lenient=False, progress=progress, choice=choice)
        progress.stage("inferring the model")
    whole = compute_stats(read_transitions([str(f) for f in files]))
    assert (got.traces, got.visits) == (whole.traces, whole.visits)
    assert got.stats().transition_probabilities.equals(whole.transition_probabilities)
    assert "reading traces" in sink.getvalue()
    # shown only on a terminal, for long inputs, and never with --quiet
    with _progress(files * 10, quiet=True, console=console) as p:
        assert not p.enabled
    with _progress(files * 10, quiet=False, console=console) as p:
        assert p.enabled
    with _progress(files, quiet=False, console=console) as p:
        assert not p.enabled


def test_where_keeps_matching_traces_and_mixed_ends_are_noted(tmp_path: Path) -> None:
    code, stdout, stderr = run(FIXTURES / "real", "-o", tmp_path / "all", "--format", "json")
    assert code == 0, stderr
    assert "note: the input mixes client and server traces" in stderr
    assert "--where vantage=server to analyse one end only" in stderr
    every = orjson.loads((tmp_path / "all" / "model.json").read_bytes())["traces"]

    code, stdout, stderr = run(
        FIXTURES / "real", "-o", tmp_path / "srv", "--format", "json", "--where", "vantage=server"
    )
    assert code == 0, stderr
    assert "note:" not in stderr
    servers = orjson.loads((tmp_path / "srv" / "model.json").read_bytes())["traces"]
    assert servers == 3 and every == 6  # three stacks, one connection each, two ends

    # run.json labels select too; several conditions must all hold
    code, stdout, stderr = run(
        FIXTURES / "real", "-o", tmp_path / "qg", "--format", "json",
        "--where", "stack=quic-go", "--where", "vantage=server",
    )  # fmt: skip
    assert code == 0, stderr
    assert orjson.loads((tmp_path / "qg" / "model.json").read_bytes())["traces"] == 2


def test_where_matching_nothing_is_a_clean_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["infer", str(FIXTURES / "real"), "-o", str(tmp_path), "--where", "scenario=nope"]
    )
    assert result.exit_code == 1
    assert result.stderr.endswith(
        f"Error: no traces match --where scenario=nope under {FIXTURES / 'real'} "
        "(scenario takes loopback-blackout (6))\n"
    )
    # an unknown key lists the keys that exist
    result = CliRunner().invoke(
        main, ["infer", str(FIXTURES / "real"), "-o", str(tmp_path), "--where", "scenari=x"]
    )
    assert result.exit_code == 1
    assert "Error: --where scenari: no trace has the label 'scenari' (did you mean scenario?)" in (
        result.stderr
    )
    assert "device, format, max_cwnd_packets," in result.stderr
    result = CliRunner().invoke(
        main, ["infer", str(FIXTURES / "real"), "-o", str(tmp_path), "--where", "scenario"]
    )
    assert result.exit_code == 1
    assert "Error: --where 'scenario': expected KEY=VALUE, e.g. scenario=jitter" in result.stderr


@pytest.mark.parametrize("algorithm", ["observed", "synoptic"])
def test_a_csv_through_the_cli_gives_the_apis_model(tmp_path: Path, algorithm: str) -> None:
    """The CLI reads a table through the engine (one aggregate of the file, no frame kept) and
    writes what the API infers from ``read_transitions`` of the same file: rows out of order,
    traces interleaved and without Init, repeated states, aliases, an ``end_ms`` given on some
    rows and a label column."""
    from quicsm.render.outputs import write_outputs
    from quicsm.testing.synthetic import generate_transitions

    df = generate_transitions(300, seed=7).select("trace", "time_ms", "state")
    df = df.with_columns(
        pl.when(pl.int_range(pl.len()) % 7 == 3)
        .then(pl.lit("recovery"))  # an alias of Recovery
        .otherwise(pl.col("state").cast(pl.String))
        .alias("state"),
        pl.when(pl.int_range(pl.len()) % 11 == 0).then(pl.col("time_ms") + 5000.0).alias("end_ms"),
        (pl.col("trace").cast(pl.String).str.slice(-1).cast(pl.Int64) % 3).alias("scenario"),
    )
    df = df.filter(~((pl.col("state") == "Init") & (pl.int_range(pl.len()) % 2 == 0)))
    df = pl.concat([df, df.slice(5, 40)]).sample(fraction=1.0, shuffle=True, seed=3)
    csv = tmp_path / "in" / "messy.csv"
    csv.parent.mkdir()
    df.write_csv(csv)
    code, _, stderr = run(csv, "-o", tmp_path / "cli", "-q", "--algorithm", algorithm)
    assert code == 0, stderr
    model = infer(read_transitions(csv), algorithm=algorithm)
    write_outputs(model, tmp_path / "api", fmt="dot")
    for name in ("model.json", "model.dot", "stats.csv", "transitions.csv"):
        assert (tmp_path / "cli" / name).read_bytes() == (tmp_path / "api" / name).read_bytes()
