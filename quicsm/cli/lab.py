"""``quicsm lab``: run instrumented stacks under emulated networks/devices; pack the traces."""

from __future__ import annotations

import json
import signal
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import click

from quicsm.core.errors import InputError

#: options ``lab run`` and ``lab ab`` share
_STACKS_OPTION = click.option(
    "--stacks",
    "stacks_file",
    type=click.Path(path_type=Path),
    default=Path("build/stacks.json"),
    show_default=True,
    help="Built stacks (written by instrumentation-patches/build.sh).",
)
_ONLY_OPTION = click.option(
    "--only",
    "only",
    multiple=True,
    help="Run only these scenarios (name or name prefix); repeatable.",
)


@click.group("lab")
def lab() -> None:
    """Produce traces: run scenario files against the built stacks, pack runs into corpora."""


def ensure_stacks(stacks_file: Path) -> None:
    """Build the instrumented stacks on first use, when quicsm runs from its checkout (where
    ``instrumentation-patches/build.sh`` is); elsewhere say what to do."""
    if stacks_file.exists():
        return
    import subprocess

    build = stacks_file.resolve().parent.parent / "instrumentation-patches" / "build.sh"
    if not build.is_file():
        raise InputError(
            f"{stacks_file}: no built stacks. Build them in a checkout of quicsm with "
            "scripts/setup --lab (needs Go >= 1.21, Rust's cargo, patch, cmake, g++ and "
            "libclang-dev), or point --stacks at a stacks file"
        )
    click.echo(
        f"quicsm lab: no built stacks yet; building them first ({build.parent.name}/build.sh: "
        "several minutes, once)",
        err=True,
    )
    code = subprocess.run([str(build)], check=False).returncode
    if code != 0:
        raise InputError(
            f"{build.parent.name}/build.sh failed (exit code {code}); its messages above name "
            "what is missing"
        )


def _stacks_for(plan: Any, stacks_file: Path, selectors: tuple[str, ...]) -> list[Any]:
    """The built stacks (built first if missing and needed) plus the kernel's TCP."""
    from quicsm.lab.stacks import kernel_tcp_stacks, load_stacks, needs_built_stacks

    wanted = selectors or tuple(sel for s in plan.scenarios for sel in (s.stacks or ("*",)))
    if needs_built_stacks(wanted) or stacks_file.exists():
        ensure_stacks(stacks_file)
        return [*load_stacks(stacks_file), *kernel_tcp_stacks()]
    return kernel_tcp_stacks()


@lab.command("run")
@click.argument("scenario_file", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    default=Path("traces"),
    show_default=True,
    help="Root of <stack>/<version>/<cc_algorithm>/<scenario>/run-<n>/.",
)
@_STACKS_OPTION
@_ONLY_OPTION
@click.option(
    "--stack",
    "stack_selectors",
    multiple=True,
    help='Run only these stacks ("quic-go", "quic-go@v0.65.0" or, one congestion controller, '
    '"quic-go@v0.65.0/cubic", "quinn/bbr"); repeatable.',
)
@click.option(
    "--repetitions",
    type=click.IntRange(min=1),
    default=None,
    help="Override every scenario's repetitions.",
)
@click.option("--dry-run", is_flag=True, help="List the runs without doing them.")
def run_cmd(
    scenario_file: Path,
    *,
    out_dir: Path,
    stacks_file: Path,
    only: tuple[str, ...],
    stack_selectors: tuple[str, ...],
    repetitions: int | None,
    dry_run: bool,
) -> None:
    """Run every scenario of SCENARIO_FILE; a summary table follows. Exit code 1 if any run
    failed (failed runs are recorded with their reason in run.json)."""
    from dataclasses import replace

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from quicsm.lab.runner import plan_runs, run_plan
    from quicsm.lab.scenario import load_plan
    from quicsm.lab.stacks import select_stacks

    plan = load_plan(scenario_file)
    scenarios = plan.scenarios
    if only:
        scenarios = tuple(s for s in scenarios if any(s.name.startswith(o) for o in only))
        if not scenarios:
            raise InputError(f"{scenario_file}: no scenario matches --only {', '.join(only)}")
    if repetitions is not None:
        scenarios = tuple(replace(s, repetitions=repetitions) for s in scenarios)
    plan = replace(plan, scenarios=scenarios)
    stacks = _stacks_for(plan, stacks_file, stack_selectors)
    if stack_selectors:
        select_stacks(stacks, stack_selectors, where="--stack")  # unknown selector: error
    specs = plan_runs(plan, stacks, only=stack_selectors)
    console = Console(stderr=True)
    if dry_run:
        for spec in specs:
            click.echo(f"{spec.directory(out_dir)}  seed={spec.seed}")
        return
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )
    task = progress.add_task("lab", total=len(specs))

    def on_start(spec: Any, i: int, total: int) -> None:
        progress.update(task, description=f"{spec.stack.key} {spec.scenario.name} run-{spec.run}")

    def on_done(spec: Any, labels: dict[str, Any]) -> None:
        progress.advance(task)
        if labels["status"] != "ok":
            progress.console.print(f"[red]failed[/] {spec.directory(out_dir)}: {labels['reason']}")

    results: list[dict[str, Any]] = []
    interrupted = False
    with progress:
        try:
            results = run_plan(
                plan,
                stacks,
                only=stack_selectors,
                out_dir=out_dir,
                on_start=on_start,
                on_done=on_done,
            )
        except KeyboardInterrupt:
            interrupted = True
            results = _collect_written(out_dir, specs)
    _print_summary(console, results)
    if interrupted:
        console.print("[yellow]interrupted[/]: every child process was stopped")
        sys.exit(128 + signal.SIGINT)
    if any(r["status"] != "ok" for r in results):
        sys.exit(1)


def _collect_written(out_dir: Path, specs: list[Any]) -> list[dict[str, Any]]:
    out = []
    for spec in specs:
        path = spec.directory(out_dir) / "run.json"
        if path.is_file():
            out.append(json.loads(path.read_text()))
    return out


def _print_summary(console: Any, results: list[dict[str, Any]]) -> None:
    from rich.table import Table

    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[(r["stack"], r["version"], r.get("cc_algorithm") or "-", r["scenario"])].append(r)
    table = Table(title="quicsm lab run")
    for col in (
        "stack",
        "version",
        "cc",
        "scenario",
        "ok",
        "completion ms (median)",
        "Mbit/s (median)",
        "relay drops (loss+queue)",
        "reordered",
    ):
        table.add_column(
            col, justify="left" if col in ("stack", "version", "cc", "scenario") else "right"
        )
    for (stack, version, cc, scenario), rs in sorted(groups.items()):
        ok = [r for r in rs if r["status"] == "ok"]
        comp = [r["completion_ms"] for r in ok if isinstance(r.get("completion_ms"), int | float)]
        thr = [
            r["throughput_mbit"] for r in ok if isinstance(r.get("throughput_mbit"), int | float)
        ]
        drops = sum(
            int(r.get(f"relay.{d}.{k}", 0) or 0)
            for r in rs
            for d in ("up", "down")
            for k in ("dropped_loss", "dropped_queue")
        )
        reord = sum(int(r.get(f"relay.{d}.reordered", 0) or 0) for r in rs for d in ("up", "down"))
        table.add_row(
            stack,
            version,
            cc,
            scenario,
            f"{len(ok)}/{len(rs)}",
            f"{statistics.median(comp):.0f}" if comp else "-",
            f"{statistics.median(thr):.1f}" if thr else "-",
            str(drops),
            str(reord),
        )
    console.print(table)
    failed = [r for r in results if r["status"] != "ok"]
    for r in failed:
        console.print(
            f"[red]failed[/] {r['stack']} {r['version']} {r.get('cc_algorithm') or ''} "
            f"{r['scenario']} "
            f"run-{r['run']}: {r['reason']}"
        )
    console.print(f"{len(results) - len(failed)} ok, {len(failed)} failed")


def _one_stack(stacks: list[Any], selector: str, *, where: str) -> Any:
    from quicsm.lab.stacks import select_stacks

    found = select_stacks(stacks, (selector,), where=where)
    if len(found) > 1:
        raise InputError(
            f"{where}: {selector!r} names {len(found)} builds "
            f"({', '.join(s.key for s in found)}); name one, e.g. {found[0].key}"
        )
    return found[0]


@lab.command("ab")
@click.argument("scenario_file", type=click.Path(path_type=Path))
@click.argument("build_a", metavar="A")
@click.argument("build_b", metavar="B")
@click.option(
    "-o",
    "--out",
    "out_dir",
    type=click.Path(path_type=Path),
    required=True,
    help="The experiment's directory: runs under A/ and B/, ab.json, the packs and the "
    "report. Run the same command again to resume.",
)
@_STACKS_OPTION
@_ONLY_OPTION
@click.option(
    "--max-runs",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Budget: pairs (runs of each build) per scenario.",
)
@click.option(
    "--margin",
    type=float,
    default=0.05,
    show_default=True,
    help="Equivalence margin of every state's time share (0.05 = ±5 points).",
)
@click.option(
    "--time-margin",
    type=float,
    default=0.10,
    show_default=True,
    help="Equivalence margin of the completion time (0.10 = ±10%).",
)
@click.option(
    "--alpha",
    type=float,
    default=0.05,
    show_default=True,
    help="Family-wise error over every scenario and quantity.",
)
@click.option(
    "--seed",
    type=int,
    default=1,
    show_default=True,
    help="Seed of the order within each pair.",
)
def ab_cmd(
    scenario_file: Path,
    build_a: str,
    build_b: str,
    *,
    out_dir: Path,
    stacks_file: Path,
    only: tuple[str, ...],
    max_runs: int,
    margin: float,
    time_margin: float,
    alpha: float,
    seed: int,
) -> None:
    """Compare two builds A and B (e.g. quic-go@v0.48.2 quic-go@v0.65.0/newreno) on the
    scenarios of SCENARIO_FILE with the fewest runs: pairs of runs, A and B in random order,
    until each scenario shows a change, shows equivalence within the margins, or reaches
    --max-runs. Progress goes to stderr, the report (also OUT/ab-report.md) to stdout; the
    runs are packed into OUT/A.qlog and OUT/B.qlog for quicsm diff and report. Ctrl-C stops
    cleanly (exit code 130); the same command resumes without rerunning a finished run."""
    from dataclasses import replace

    from quicsm.compare.ab import AbConfig, AbExperiment, result_table, write_result
    from quicsm.lab.pack import pack_runs
    from quicsm.lab.scenario import load_plan
    from quicsm.lab.stacks import load_stacks
    from quicsm.render.ab_text import progress_line, report_markdown

    config = AbConfig(
        alpha=alpha, share_margin=margin, time_margin=time_margin, max_pairs=max_runs, seed=seed
    )
    plan = load_plan(scenario_file)
    scenarios = plan.scenarios
    if only:
        scenarios = tuple(s for s in scenarios if any(s.name.startswith(o) for o in only))
        if not scenarios:
            raise InputError(f"{scenario_file}: no scenario matches --only {', '.join(only)}")
    plan = replace(plan, scenarios=scenarios)
    ensure_stacks(stacks_file)
    stacks = load_stacks(stacks_file)
    a = _one_stack(stacks, build_a, where="A")
    b = _one_stack(stacks, build_b, where="B")
    experiment = AbExperiment(plan, a, b, out_dir=out_dir, config=config)
    resumed = experiment.claim_directory()
    click.echo(
        f"quicsm lab ab: {a.key} (A) vs {b.key} (B), {len(scenarios)} scenarios, "
        f"{experiment.hypotheses} quantities; a claim needs e >= "
        f"{experiment.hypotheses / alpha:g}"
        + ("; resuming from the runs on disk" if resumed else ""),
        err=True,
    )

    def on_run(scenario: Any, arm: str, pair: int, position: int) -> None:
        click.echo(f"  {scenario.name} pair {pair}: run {position}/2 = {arm}", err=True)

    def on_pair(p: Any) -> None:
        click.echo(progress_line(p, max_pairs=max_runs), err=True)

    # the directory stays locked until the arms are packed: a second invocation must not
    # resume (or pack) while this one writes OUT/A.qlog and OUT/B.qlog
    try:
        try:
            progress = experiment.run(on_run=on_run, on_pair=on_pair)
        except KeyboardInterrupt:
            click.echo(
                "interrupted: every child process was stopped; the same command resumes", err=True
            )
            sys.exit(128 + signal.SIGINT)
        table = result_table(progress)
        settings = experiment.settings()
        write_result(out_dir, settings, table)
        report = report_markdown(settings, table)
        (out_dir / "ab-report.md").write_text(report)
        click.echo(report, nl=False)
        for arm in ("A", "B"):
            if (out_dir / arm).is_dir():
                # a qlog whose last record was cut mid-write is packed as the tests read it:
                # every complete record (the reader's warning names the file)
                packed = pack_runs([out_dir / arm], output=out_dir / f"{arm}.qlog", lenient=True)
                cut = f", {len(packed.cut)} files cut mid-write packed without their last record"
                click.echo(
                    f"{out_dir / arm}.qlog: {packed.traces} traces from {packed.runs} runs "
                    f"({len(packed.skipped)} runs without qlog files skipped"
                    f"{cut if packed.cut else ''})",
                    err=True,
                )
    finally:
        experiment.close()


@lab.command("pack")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="The packed file (zstd-compressed JSON-SEQ qlog).",
)
@click.option(
    "--level",
    type=click.IntRange(1, 22),
    default=15,
    show_default=True,
    help="zstd compression level.",
)
@click.option(
    "--role",
    "roles",
    type=click.Choice(["server", "client"]),
    multiple=True,
    help="Pack only this endpoint's files (repeatable; default: both).",
)
@click.option(
    "--events",
    default=None,
    metavar="NAME,...",
    help="Keep only events of these names, without category (e.g. "
    "metrics_updated,packet_lost,congestion_state_updated); default: every event.",
)
def pack_cmd(
    run_dirs: tuple[Path, ...],
    *,
    output: Path,
    level: int,
    roles: tuple[str, ...],
    events: str | None,
) -> None:
    """Pack RUN_DIRS (run directories or trees of them) into one multi-trace file whose every
    trace header carries the run's labels (trace.quicsm_labels)."""
    from quicsm.lab.pack import ROLES, pack_runs

    names = None if events is None else [n.strip() for n in events.split(",") if n.strip()]
    report = pack_runs(run_dirs, output=output, level=level, roles=roles or ROLES, events=names)
    for line in report.skipped:
        click.echo(f"skipped {line}", err=True)
    click.echo(
        f"{output}: {report.traces} traces from {report.runs} runs, {report.events} events, "
        f"{report.bytes_written / 1e6:.2f} MB ({len(report.skipped)} runs skipped)"
    )


@lab.command("relay")
@click.option("--listen", default="127.0.0.1:0", show_default=True, help="HOST:PORT to listen on.")
@click.option("--target", required=True, help="HOST:PORT to forward to.")
@click.option("--rate-mbit", type=float, default=None, help="Bottleneck rate, both directions.")
@click.option("--queue-packets", type=int, default=1000, show_default=True)
@click.option("--delay-ms", type=float, default=0.0, show_default=True, help="One-way delay.")
@click.option("--jitter-ms", type=float, default=0.0, show_default=True)
@click.option("--loss", type=float, default=0.0, show_default=True, help="Bernoulli loss.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--config",
    type=click.Path(path_type=Path),
    default=None,
    help='JSON {"up": {...}, "down": {...}} instead of the options above.',
)
def relay_cmd(
    *,
    listen: str,
    target: str,
    rate_mbit: float | None,
    queue_packets: int,
    delay_ms: float,
    jitter_ms: float,
    loss: float,
    seed: int,
    config: Path | None,
) -> None:
    """Run the impairment relay in the foreground until Ctrl-C; prints its counters."""
    from quicsm.lab.link import link_config_from_dict
    from quicsm.lab.relay import Relay, RelayConfig, parse_address, raise_priority

    try:
        if config is not None:
            raw = json.loads(config.read_text())
            up = link_config_from_dict(raw.get("up", {}), where=f"{config}: up")
            down = link_config_from_dict(raw.get("down", {}), where=f"{config}: down")
        else:
            both: dict[str, object] = {
                "queue_packets": queue_packets,
                "delay_ms": delay_ms,
                "jitter_ms": jitter_ms,
                "loss": loss,
            }
            if rate_mbit is not None:
                both["rate_mbit"] = rate_mbit
            up = down = link_config_from_dict(both, where="options")
        cfg = RelayConfig(
            listen=parse_address(listen), target=parse_address(target), up=up, down=down, seed=seed
        )
    except OSError as exc:
        raise InputError(str(exc)) from None
    relay = Relay(cfg)
    relay.scheduling = raise_priority()
    host, port = relay.address
    click.echo(f"relay listening on {host}:{port} -> {target} (Ctrl-C to stop)", err=True)
    try:
        relay.serve(should_stop=lambda: False)
    except KeyboardInterrupt:
        pass
    finally:
        relay.close()
    click.echo(json.dumps(relay.counters(), indent=1, sort_keys=True))
