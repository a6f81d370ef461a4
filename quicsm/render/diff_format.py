"""Text views of a :class:`quicsm.compare.diff.DiffResult`: JSON, Markdown and a terminal table.

All three are deterministic (fixed float rounding, fixed order) so they can be golden-tested.
The JSON layout is documented in ``docs/diff.md``.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from quicsm.core.version import __version__
from quicsm.stats.significance import format_p

if TYPE_CHECKING:
    from quicsm.compare.diff import DiffResult

#: digits kept for every float in JSON
_DIGITS = 6


def _clean(v: Any) -> Any:
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return None
        return round(v, _DIGITS) + 0.0  # + 0.0 turns -0.0 into 0.0
    return v


def _records(df: pl.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    return [
        {k: _clean(v) for k, v in row.items()} for row in df.select(columns).iter_rows(named=True)
    ]


def to_dict(d: DiffResult) -> dict[str, Any]:
    cols = [c for c in d.invariants.columns if c != "holds_in"]
    inv = {
        side: _records(d.invariants.filter(pl.col("holds_in") == side[-1]), cols)
        for side in ("only_a", "only_b")
    }
    return {
        "quicsm_version": __version__,
        "groups": {
            "a": {"name": d.names[0], "n_traces": d.n_a, "files": d.files_a},
            "b": {"name": d.names[1], "n_traces": d.n_b, "files": d.files_b},
        },
        "alpha": d.alpha,
        "settings": d.settings,
        "any_significant": d.any_significant,
        "summary": [f.sentence for f in d.findings()],
        "states": _records(d.states, list(d.states.columns)),
        "sources": _records(d.sources, list(d.sources.columns)),
        "edges": _records(d.edges, list(d.edges.columns)),
        "dwell": _records(d.dwell, list(d.dwell.columns)),
        "invariants": inv,
        "presence": d.presence,
    }


def to_json(d: DiffResult) -> str:
    return orjson.dumps(to_dict(d), option=orjson.OPT_INDENT_2).decode() + "\n"


# -- text tables ------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    if x is None or x != x:
        return "–"
    return f"{100 * x:.1f}%"


def _pp(x: float | None) -> str:
    """A difference of fractions in percentage points, signed."""
    if x is None or x != x:
        return "–"
    return f"{100 * x:+.1f} pp"


def _ms(x: float | None) -> str:
    if x is None or x != x:
        return "–"
    return f"{x:.1f} ms"


def _p(row: dict[str, Any]) -> str:
    return format_p(row["p_value"], note=row["note"])


def _mark(row: dict[str, Any]) -> str:
    return "yes" if row["significant"] else ""


def _tables(d: DiffResult) -> list[tuple[str, list[str], list[list[str]]]]:
    a, b = d.names
    states = [
        [
            r["state"],
            _pct(r["a_fraction"]),
            _pct(r["b_fraction"]),
            _pp(r["difference"]),
            f"[{_pp(r['ci_low'])}, {_pp(r['ci_high'])}]" if r["ci_low"] == r["ci_low"] else "–",
            _p(r),
            _mark(r),
        ]
        for r in d.states.iter_rows(named=True)
    ]
    sources = [
        [
            r["source"],
            str(r["a_count"]),
            str(r["b_count"]),
            "–" if r["effect"] is None or r["effect"] != r["effect"] else f"{r['effect']:.3f}",
            r["test"],
            _p(r),
            _mark(r),
        ]
        for r in d.sources.iter_rows(named=True)
    ]
    edges = [
        [
            f"{r['source']} → {r['target']}",
            f"{_pct(r['a_probability'])} ({r['a_count']})",
            f"{_pct(r['b_probability'])} ({r['b_count']})",
            _pp(r["difference"]),
            r["test"],
            _p(r),
            _mark(r),
        ]
        for r in d.edges.iter_rows(named=True)
    ]
    dwell = [
        [
            r["state"],
            _ms(r["a_median_ms"]),
            _ms(r["b_median_ms"]),
            "–" if r["log2_ratio"] != r["log2_ratio"] else f"×{2 ** r['log2_ratio']:.2f}",
            f"{r['n_a']} vs {r['n_b']}",
            _p(r),
            _mark(r),
        ]
        for r in d.dwell.iter_rows(named=True)
    ]
    return [
        (
            "Time in state (mean of per-trace fractions; Welch t-test, Holm)",
            ["state", a, b, "difference", "95% CI", "p", "significant"],
            states,
        ),
        (
            "Outgoing transitions per source state (total variation distance)",
            ["source", f"{a} exits", f"{b} exits", "effect", "test", "p", "significant"],
            sources,
        ),
        (
            "Transition probabilities",
            ["edge", a, b, "difference", "test", "p", "significant"],
            edges,
        ),
        (
            "Dwell time (median over traces of each trace's median; Mann-Whitney U, Holm)",
            ["state", a, b, "ratio", "traces", "p", "significant"],
            dwell,
        ),
    ]


def _summary_lines(d: DiffResult) -> list[str]:
    lines = [f.sentence for f in d.findings()]
    if not lines:
        lines = [f"Nothing differs significantly at α = {d.alpha:g}."]
    untested, total = d.untested()
    if untested:
        reasons = ", ".join(d.untested_reasons())
        lines.append(f"{untested} of {total} tests not run ({reasons}).")
    return lines


def _traces(n: int) -> str:
    return "1 trace" if n == 1 else f"{n} traces"


def _header(d: DiffResult) -> str:
    a, b = d.names
    return (
        f"A = {a} ({_traces(d.n_a)}), B = {b} ({_traces(d.n_b)}); α = {d.alpha:g}; "
        "differences are B − A"
    )


_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY = re.compile(r"&(?=#?\w+;)")


def md_cell(s: str) -> str:
    """Table-safe and inert Markdown: pipes escaped; anything that could start an HTML tag
    or entity is escaped, so text from traces shows as text."""
    s = _TAG_START.sub("&lt;", _ENTITY.sub("&amp;", s))
    return s.replace("|", "\\|").replace("\n", " ")


def to_markdown(d: DiffResult, *, heading: str = "##") -> str:
    out = [f"{heading} quicsm diff: {md_cell(d.names[1])} vs {md_cell(d.names[0])}", ""]
    out += [md_cell(_header(d)), "", f"{heading}# Summary", ""]
    out += [f"- {md_cell(s)}" for s in _summary_lines(d)]
    for title, head, rows in _tables(d):
        out += ["", f"{heading}# {title}", ""]
        if not rows:
            out.append("(none)")
            continue
        out.append("| " + " | ".join(md_cell(h) for h in head) + " |")
        out.append("|" + "|".join("---" for _ in head) + "|")
        out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    out += ["", f"{heading}# Invariants and presence", ""]
    out += [f"- {md_cell(s)}" for s in _presence_lines(d)]
    return "\n".join(out) + "\n"


def _presence_lines(d: DiffResult) -> list[str]:
    a, b = d.names
    lines = []
    for key, label in (
        ("states_only_a", f"states only in {a}"),
        ("states_only_b", f"states only in {b}"),
        ("edges_only_a", f"transitions only in {a}"),
        ("edges_only_b", f"transitions only in {b}"),
    ):
        lines.append(f"{label}: {', '.join(d.presence[key]) or 'none'}")
    for side, holds, breaks in (("a", a, b), ("b", b, a)):
        inv = d.invariants.filter(pl.col("holds_in") == side)
        col = "violations_b" if side == "a" else "violations_a"
        n = d.n_b if side == "a" else d.n_a
        names = [
            f"{r['a']} {r['kind']} {r['b']} (broken in {r[col]}/{n}, "
            f"{format_p(r['p_value'], note=r['note'])})"
            for r in inv.iter_rows(named=True)
        ]
        lines.append(
            f"invariants holding in {holds} but broken in {breaks}: {', '.join(names) or 'none'}"
        )
    return lines


def to_table(d: DiffResult) -> str:
    out = [_header(d), "", "Summary:"]
    out += [f"  - {s}" for s in _summary_lines(d)]
    for title, head, rows in _tables(d):
        out += ["", title + ":"]
        if not rows:
            out.append("  (none)")
            continue
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        out.append("  " + "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
        out.append("  " + "  ".join("-" * w for w in widths))
        for r in rows:
            out.append(
                "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            )
    out += ["", "Invariants and presence:"]
    out += [f"  - {s}" for s in _presence_lines(d)]
    return "\n".join(out) + "\n"
