"""Text views of a :class:`quicsm.compare.diff.DiffResult` (and the evidence that explains it):
JSON, Markdown and a terminal table. Each leads with what changed, then why, then the caveats,
then the detail.

All three are deterministic (fixed float rounding, fixed order) so they can be golden-tested.
The JSON layout is documented in ``docs/diff.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from quicsm.compare.families.policy import PRIMARY_SHARE
from quicsm.core.numbers import MISSING, change, format_p, ms, pct, pp
from quicsm.core.version import __version__
from quicsm.render.app_limited import BREAKDOWN_NOTE, BREAKDOWN_TITLE, breakdown_table
from quicsm.render.findings import (
    change_text,
    evidence_sentence,
    headline,
    invariant_chances,
    outcome_value,
    scope_text,
    sentences,
    why_items,
)
from quicsm.render.test_words import length_caution, plan_length_words, policy_sentence

if TYPE_CHECKING:
    from quicsm.compare.diff import DiffResult
    from quicsm.compare.evidence import Explanation

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


def explanation_dict(
    e: Explanation, d: DiffResult, explanations: Sequence[Explanation] = ()
) -> dict[str, Any]:
    return {
        "change": change_text(e, d),
        "scope": scope_text(e),
        "significant": e.significant,
        "evidence": [
            {
                "indicator": v.indicator,
                "a_mean": _clean(v.a_mean),
                "b_mean": _clean(v.b_mean),
                "a_traces": v.a_traces,
                "b_traces": v.b_traces,
                "n_a": v.n_a,
                "n_b": v.n_b,
                "cliffs_delta": _clean(v.delta),
                "example_a": v.example_a,
                "example_b": v.example_b,
                "unlogged": list(v.unlogged),
                "a_from": v.sources[0] or None,
                "b_from": v.sources[1] or None,
                "a_note": v.notes[0],
                "b_note": v.notes[1],
                "sentence": evidence_sentence(v),
            }
            for v in e.evidence
        ],
        "same_as": (
            change_text(explanations[e.same_as], d)
            if e.same_as is not None and e.same_as < len(explanations)
            else None
        ),
    }


def accounts_dict(accounts: Sequence[pl.DataFrame | None]) -> list[dict[str, Any]]:
    """Every compared trace's connection account (:mod:`quicsm.extract.account`): its counts
    with their provenance, one object per trace (each group's in turn, a trace once)."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for frame in accounts:
        if frame is None:
            continue
        for row in frame.iter_rows(named=True):
            if str(row["trace"]) in seen:
                continue
            seen.add(str(row["trace"]))
            out.append({k: _clean(v) for k, v in row.items()})
    return out


def to_dict(
    d: DiffResult,
    *,
    explanations: Sequence[Explanation] = (),
    accounts: Sequence[pl.DataFrame | None] = (),
) -> dict[str, Any]:
    """The diff as JSON-ready data; ``accounts``: the groups' connection accounts, listed under
    ``accounts`` (the counts the evidence reads)."""
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
        "settings": {**d.settings, "policy": policy_sentence(d)},
        "within": list(d.within),
        "strata": {k: {"a": v[0], "b": v[1]} for k, v in d.strata.items()},
        "tests": d.n_tests,
        "caveats": cautions(d),
        "notes": list(d.notes),
        "any_significant": d.any_significant,
        "summary": sentences(d),
        "explanations": [explanation_dict(e, d, explanations) for e in explanations],
        "outcomes": _records(d.outcomes, list(d.outcomes.columns)),
        "states": _records(d.states, list(d.states.columns)),
        "sources": _records(d.sources, list(d.sources.columns)),
        "edges": _records(d.edges, list(d.edges.columns)),
        "dwell": _records(d.dwell, list(d.dwell.columns)),
        "invariants": inv,
        "presence": d.presence,
        "accounts": accounts_dict(accounts),
        "app_limited": _app_limited_records(accounts),
    }


def _app_limited_records(accounts: Sequence[pl.DataFrame | None]) -> list[dict[str, Any]]:
    """Each group's ApplicationLimited time by cause
    (:func:`quicsm.compare.app_limited.app_limited_breakdown`); empty without accounts."""
    from quicsm.compare.app_limited import app_limited_breakdown

    if all(a is None for a in accounts) or not accounts:
        return []
    frame = app_limited_breakdown(accounts)
    return _records(frame, list(frame.columns))


def to_json(
    d: DiffResult,
    *,
    explanations: Sequence[Explanation] = (),
    accounts: Sequence[pl.DataFrame | None] = (),
) -> str:
    doc = to_dict(d, explanations=explanations, accounts=accounts)
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"


# -- text tables ------------------------------------------------------------------------------


def _p(row: dict[str, Any]) -> str:
    """The row's one p-value, adjusted within its family, and the family's adjustment."""
    p = row["p_value"]
    if p is None:
        return format_p(None, note=row["note"])
    how = {"primary": "Holm", "exploratory": "BH"}.get(row.get("family") or "", "")
    return f"{'<0.001' if p < 0.001 else f'{p:.3f}'} {how}".rstrip()


#: the last columns of every tested table: the smallest change its test would detect with
#: 80% power (minimum detectable effect), its one p-value (adjusted within its family: Holm
#: for primary rows, Benjamini-Hochberg for exploratory ones) and whether it is significant
_COLS = ["MDE", "adj. p", "significant"]


def _mde(row: dict[str, Any], fmt: Any) -> str:
    """The smallest change the row's test would detect with 80% power, for rows that are
    not significant (``–`` when it has none: no test, or a permutation test)."""
    x = row.get("mde")
    if row["significant"] or x is None or x != x:
        return MISSING
    if x == math.inf:
        return "none"
    return str(fmt(x))


def _mark(row: dict[str, Any]) -> str:
    return "yes" if row["significant"] else ""


def _tables(
    d: DiffResult, *, short_names: bool = False
) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of each table; ``short_names`` heads the group columns "A" and
    "B" (the header line says which is which) to keep terminal tables narrow."""
    a, b = ("A", "B") if short_names else d.names
    outcomes = [
        [
            r["metric"],
            r["cell"],
            outcome_value(r["metric"], r["a_mean"]),
            outcome_value(r["metric"], r["b_mean"]),
            change(r["change"]),
            f"{r['n_a']} vs {r['n_b']}",
            r["test"],
            _mde(r, lambda x, m=r["metric"]: "±" + outcome_value(m, x)),
            _p(r),
            _mark(r),
        ]
        for r in d.outcomes.iter_rows(named=True)
    ]
    states = [
        [
            r["state"],
            pct(r["a_fraction"]),
            pct(r["b_fraction"]),
            pp(r["difference"]),
            f"[{pp(r['ci_low'])}, {pp(r['ci_high'])}]" if r["ci_low"] == r["ci_low"] else MISSING,
            _mde(r, lambda x: "±" + pp(x).lstrip("+") if x < 1 else "none"),
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
            MISSING if r["effect"] is None or r["effect"] != r["effect"] else f"{r['effect']:.3f}",
            r["test"],
            _p(r),
            _mark(r),
        ]
        for r in d.sources.iter_rows(named=True)
    ]
    edges = [
        [
            f"{r['source']} → {r['target']}",
            f"{pct(r['a_probability'])} ({r['a_count']})",
            f"{pct(r['b_probability'])} ({r['b_count']})",
            pp(r["difference"]),
            r["test"],
            _mde(r, lambda x: "±" + pp(x).lstrip("+") if x < 1 else "none"),
            _p(r),
            _mark(r),
        ]
        for r in d.edges.iter_rows(named=True)
    ]
    dwell = [
        [
            r["state"],
            ms(r["a_median_ms"]),
            ms(r["b_median_ms"]),
            MISSING if r["log2_ratio"] != r["log2_ratio"] else f"×{2 ** r['log2_ratio']:.2f}",
            f"{r['n_a']} vs {r['n_b']}",
            r["test"],
            _mde(r, lambda x: f"×{2**x:.2f}"),
            _p(r),
            _mark(r),
        ]
        for r in d.dwell.iter_rows(named=True)
    ]
    tables: list[tuple[str, list[str], list[list[str]]]] = []
    if outcomes:
        tables.append(
            (
                "Outcomes (mean over traces per cell; relative change of B from A)",
                ["metric", "cell", a, b, "change", "traces", "test", *_COLS],
                outcomes,
            )
        )
    within = " within strata" if d.within else ""
    return tables + [
        (
            f"Time in state (mean of per-trace shares; difference{within})",
            ["state", a, b, "difference", "95% CI", *_COLS],
            states,
        ),
        (
            "Outgoing transitions per source state (total variation distance)",
            ["source", f"{a} exits", f"{b} exits", "effect", "test", "p", "significant"],
            sources,
        ),
        (
            "Transition probabilities",
            ["edge", a, b, "B − A", "test", *_COLS],
            edges,
        ),
        (
            "Dwell time (median over traces of each trace's median dwell)",
            ["state", a, b, "ratio", "traces", "test", *_COLS],
            dwell,
        ),
    ]


def what_changed(d: DiffResult, explanations: Sequence[Explanation] = ()) -> list[str]:
    """The outcomes that changed most (each with its strongest evidence, and whether it is
    significant), then the significant changes of the state machine."""
    outcome_lines = [e for e in explanations if e.kind == "outcome"]
    covered = any(e.significant for e in outcome_lines)
    lines: list[str] = []
    # significant primary findings first, marked; then the exploratory ones (each sentence
    # says "exploratory, BH-adjusted")
    # (an outcome is marked primary only when its test was: --primary may leave it out)
    for family, mark in (("primary", "[PRIMARY] "), ("exploratory", "")):
        lines += [
            f"{mark}{headline(e, d)}"
            for e in outcome_lines
            if e.significant and (e.outcome or {}).get("family", "primary") == family
        ]
        for f, text in zip(d.findings(), sentences(d), strict=True):
            if f.family != family or (f.kind == "outcome" and covered):
                continue
            lines.append(f"{mark}{text}")
    # the largest outcome changes that are not significant, with their evidence, said so
    lines += [headline(e, d) for e in outcome_lines if not e.significant]
    lines.append(verdict_line(d))
    return lines


def verdict_line(d: DiffResult) -> str:
    """How many tests of each family are significant, out of how many were run."""
    counts = {}
    for family in ("primary", "exploratory"):
        rows = [f.filter(pl.col("family") == family) for f in d.frames() if f.height]
        run = sum(r.height - r["p_value"].null_count() for r in rows)
        hits = sum(int(r["significant"].sum()) for r in rows)
        counts[family] = (hits, run)
    (hp, rp), (he, re_) = counts["primary"], counts["exploratory"]
    text = (
        f"{hp} of {rp} primary tests (Holm) and {he} of {re_} exploratory tests "
        f"(Benjamini-Hochberg) significant at α = {d.alpha:g} (split between the families)"
    )
    if not hp and not he:
        return f"Nothing differs significantly: {text}."
    return text[0].upper() + text[1:] + "."


def cautions(d: DiffResult) -> list[str]:
    """What the comparison cannot separate, shown above the findings: the groups' own caveats
    (how they were formed), then whether their traces' lengths differ."""
    span = length_caution(d)
    return [*d.caveats, *([span] if span else [])]


def caveat_lines(d: DiffResult) -> list[str]:
    """How the groups were matched and what was left out or not tested."""
    lines = list(d.notes)
    untested, total = d.untested()
    if untested:
        reasons = ", ".join(d.untested_reasons())
        lines.append(f"{untested} of {total} tests not run ({reasons}).")
    return lines


def why_lines(d: DiffResult, explanations: Sequence[Explanation]) -> list[tuple[str, list[str]]]:
    """Each explained change (with the traces compared) and its evidence, strongest first."""
    return [
        (f"{change_text(e, d)} [{scope_text(e)}]", why_items(e, d, explanations))
        for e in explanations
    ]


def _traces(n: int) -> str:
    return "1 trace" if n == 1 else f"{n} traces"


def header(d: DiffResult) -> str:
    """One line saying what is compared with what, and how significance is decided."""
    a, b = d.names
    text = (
        f"A = {a} ({_traces(d.n_a)}), B = {b} ({_traces(d.n_b)}); α = {d.alpha:g}; "
        "differences are B − A"
    )
    if d.within:
        used = sum(1 for na, nb in d.strata.values() if na and nb)
        text += f"; compared within {', '.join(d.within)} ({used} shared strata)"
        left = d.stratified_left_out()
        if left:
            text += f", left out (one group only): {', '.join(left)}"
    primary = d.settings.get("family", d.n_tests)
    explore = d.settings.get("exploratory", 0)
    return text + (
        f"; significance: {policy_sentence(d)} ({primary} primary and {explore} "
        f"exploratory tests can reach significance, of {d.n_tests} run)"
    )


_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY = re.compile(r"&(?=#?\w+;)")


def md_cell(s: str) -> str:
    """Table-safe and inert Markdown: pipes escaped; anything that could start an HTML tag
    or entity is escaped, so text from traces shows as text."""
    s = _TAG_START.sub("&lt;", _ENTITY.sub("&amp;", s))
    return s.replace("|", "\\|").replace("\n", " ")


def to_markdown(
    d: DiffResult,
    *,
    heading: str = "##",
    explanations: Sequence[Explanation] = (),
    accounts: Sequence[pl.DataFrame | None] = (),
) -> str:
    """The diff as Markdown; ``accounts`` (the groups' connection accounts, A's then B's) adds
    the breakdown of ApplicationLimited time by cause."""
    out = [f"{heading} quicsm diff: {md_cell(d.names[1])} vs {md_cell(d.names[0])}", ""]
    out += [md_cell(header(d)), ""]
    out += [f"> **Caution:** {md_cell(c)}" for c in cautions(d)]
    if cautions(d):
        out.append("")
    out += [f"{heading}# What changed", ""]
    out += [f"- {md_cell(s)}" for s in what_changed(d, explanations)]
    if explanations:
        out += ["", f"{heading}# Why", ""]
        for change, items in why_lines(d, explanations):
            out.append(f"- {md_cell(change)}")
            out += [f"  - {md_cell(i)}" for i in items]
    caveats = caveat_lines(d)
    if caveats:
        out += ["", f"{heading}# Caveats", ""]
        out += [f"- {md_cell(c)}" for c in caveats]
    for title, head, rows in _tables(d):
        out += ["", f"{heading}# {title}", ""]
        if not rows:
            out.append("(none)")
            continue
        out.append("| " + " | ".join(md_cell(h) for h in head) + " |")
        out.append("|" + "|".join("---" for _ in head) + "|")
        out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    out += app_limited_markdown(accounts, d.names, heading=f"{heading}#")
    out += ["", f"{heading}# Invariants and presence", ""]
    out += [f"- {md_cell(s)}" for s in _presence_lines(d)]
    return "\n".join(out) + "\n"


def app_limited_markdown(
    accounts: Sequence[pl.DataFrame | None], names: tuple[str, str], *, heading: str
) -> list[str]:
    """The breakdown of ApplicationLimited time by cause as Markdown lines (a section whose
    title has the ``heading`` level); none without accounts."""
    head, rows = breakdown_table(accounts, names)
    if not rows:
        return []
    out = ["", f"{heading} {BREAKDOWN_TITLE}", ""]
    out.append("| " + " | ".join(md_cell(h) for h in head) + " |")
    out.append("|---" + "|---:" * (len(head) - 1) + "|")
    out += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows]
    out += ["", md_cell(BREAKDOWN_NOTE)]
    return out


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
            f"{r['a']} {r['kind']} {r['b']} (broken in {r[col]}/{n}{invariant_chances(r)}, "
            f"{format_p(r['p_value'], note=r['note'])})"
            for r in inv.iter_rows(named=True)
        ]
        lines.append(
            f"invariants holding in {holds} but broken in {breaks}: {', '.join(names) or 'none'}"
        )
    return lines


#: width the plain-text table wraps its prose at
TABLE_WIDTH = 100


def _wrapped(text: str, *, first: str, rest: str) -> list[str]:
    import textwrap

    keep = "\u00a0"  # "B − A" and "A → B" stay on one line: no break around the operator
    glued = text.replace(" − ", f"{keep}−{keep}").replace(" → ", f"{keep}→{keep}")
    lines = textwrap.wrap(
        glued,
        width=TABLE_WIDTH,
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        break_long_words=False,
    ) or [first.rstrip()]
    return [line.replace(keep, " ") for line in lines]


def table_sections(
    d: DiffResult, *, explanations: Sequence[Explanation] = ()
) -> tuple[
    str,
    list[tuple[str, list[tuple[str, list[str]]]]],
    list[tuple[str, list[str], list[list[str]]]],
    list[str],
]:
    """The pieces of the text views: the header line; the prose sections (title, sentences:
    cautions, what changed, why, caveats), each sentence with the items listed under it (a
    change in "Why": its evidence, strongest first, each once; other sentences have none); the
    tables (title, header with the group columns headed "A" and "B", rows whose last column is
    "yes" when significant); the invariants-and-presence sentences."""

    def plain(sentences: Sequence[str]) -> list[tuple[str, list[str]]]:
        return [(s, []) for s in sentences]

    sections: list[tuple[str, list[tuple[str, list[str]]]]] = []
    if cautions(d):
        sections.append(("CAUTION", plain(cautions(d))))
    sections.append(("What changed", plain(what_changed(d, explanations))))
    if explanations:
        sections.append(("Why", why_lines(d, explanations)))
    caveats = caveat_lines(d)
    if caveats:
        sections.append(("Caveats", plain(caveats)))
    return header(d), sections, _tables(d, short_names=True), _presence_lines(d)


def to_table(
    d: DiffResult,
    *,
    explanations: Sequence[Explanation] = (),
    accounts: Sequence[pl.DataFrame | None] = (),
) -> str:
    """Plain fixed-width text: the group columns headed A and B (the first line says which is
    which), prose wrapped at :data:`TABLE_WIDTH` columns; ``accounts`` (the groups' connection
    accounts) adds the breakdown of ApplicationLimited time by cause."""
    out = _wrapped(header(d), first="", rest="  ") + [""]
    for c in cautions(d):
        out += _wrapped(c, first="CAUTION: ", rest="  ")
    if cautions(d):
        out.append("")
    out += ["What changed:"]
    for s in what_changed(d, explanations):
        out += _wrapped(s, first="  - ", rest="    ")
    if explanations:
        out += ["", "Why:"]
        for change, items in why_lines(d, explanations):
            out += _wrapped(change, first="  - ", rest="    ")
            for i in items:
                out += _wrapped(i, first="      · ", rest="        ")
    caveats = caveat_lines(d)
    if caveats:
        out += ["", "Caveats:"]
        for c in caveats:
            out += _wrapped(c, first="  - ", rest="    ")
    tables = _tables(d, short_names=True)
    head, rows = breakdown_table(accounts, ("A", "B"))
    if rows:
        tables.append((BREAKDOWN_TITLE, head, rows))
    for title, head, rows in tables:
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
        if title == BREAKDOWN_TITLE:
            out += _wrapped(BREAKDOWN_NOTE, first="  ", rest="  ")
    out += ["", "Invariants and presence:"]
    for s in _presence_lines(d):
        out += _wrapped(s, first="  - ", rest="    ")
    return "\n".join(out) + "\n"


# -- the plan ---------------------------------------------------------------------------------


def _effect_text(kind: str, x: float | None) -> str:
    if x is None or x != x:
        return MISSING
    if kind == "outcome":
        return change(x)
    if kind == "dwell":
        return f"×{2**x:.2f}"
    return pp(x)


def plan_text(d: DiffResult, table: pl.DataFrame, *, effect: float | None = None) -> str:
    """The planning view of :func:`quicsm.compare.plan.plan`: traces per group each test
    needs, primary tests first."""
    a, b = d.names
    target = "the pilot's own difference" if effect is None else f"an effect of {effect:g}"
    import textwrap

    intro = (
        f"Plan from the pilot A = {a} ({_traces(d.n_a)}), B = {b} ({_traces(d.n_b)}): traces "
        f"per group for 80% power to detect {target} at α = {d.alpha:g} (the K primary tests "
        f"at {PRIMARY_SHARE:g}α/K, Holm; the m exploratory ones at {1 - PRIMARY_SHARE:g}α/m, a "
        "single discovery under Benjamini-Hochberg), from the pilot's own variance and the "
        "reference each test's results use (Student's t, its degrees of freedom growing with "
        "the traces, or the normal); outcomes and transitions never below what their exact "
        "test needs to reach that level."
    )
    lines = [*textwrap.wrap(intro, width=100, subsequent_indent="  "), ""]
    strata = plan_length_words(d)
    if strata is not None:
        lines += [*textwrap.wrap(strata, width=100, subsequent_indent="  "), ""]
    head = ["family", "test of", "effect", "traces per group"]
    rows = [
        [
            str(r["family"]),
            f"{r['kind']} {r['subject']}",
            _effect_text(r["kind"], r["effect"]),
            MISSING if r["traces_per_group"] is None else str(r["traces_per_group"]),
        ]
        for r in table.iter_rows(named=True)
    ]
    widths = [
        max(len(h), *(len(x[i]) for x in rows)) if rows else len(h) for i, h in enumerate(head)
    ]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines) + "\n"
