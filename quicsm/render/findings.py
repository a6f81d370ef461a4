"""The findings of a comparison, and the evidence behind them, in words.

The statistics (:mod:`quicsm.compare.diff`) decide what is significant and rank it; the
evidence (:mod:`quicsm.compare.evidence`) compares the traces behind a change. Both return
data: this module is where they become the sentences every view (terminal, Markdown, HTML,
JSON ``summary``) quotes, so that one finding reads the same everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from quicsm.compare.diff import outcome_name
from quicsm.core.numbers import change, format_p, ms, pct

if TYPE_CHECKING:
    from quicsm.compare.diff import DiffResult, Finding
    from quicsm.compare.evidence import Evidence, Explanation

__all__ = [
    "change_text",
    "evidence_sentence",
    "evidence_short",
    "finding_sentence",
    "headline",
    "outcome_value",
    "p_status",
    "scope_text",
    "sentences",
    "why_items",
]

#: how a finding's p-value was adjusted, said beside it
ADJ = {"primary": "primary, Holm-adjusted", "exploratory": "exploratory, BH-adjusted"}


def outcome_value(metric: str, x: float) -> str:
    """An outcome's value in its unit: ``*_ms`` as milliseconds, ``*_mbit`` as Mbit/s."""
    if metric.endswith("_ms"):
        return ms(x)
    if metric.endswith("_mbit"):
        return "–" if x != x else f"{x:.1f} Mbit/s"
    return "–" if x != x else f"{x:.4g}"


def p_status(r: Mapping[str, Any]) -> str:
    """A row's one p-value as every view quotes it: adjusted within its family and labelled
    so, whether significant, and when not, what the traces could have shown."""
    if r["p_value"] is None:
        return format_p(None, note=r["note"])
    p = f"{ADJ[r['family']]} {format_p(r['p_value'])}"
    if r["significant"]:
        return f"{p}, significant"
    if "cannot reach" in (r["note"] or ""):
        return (
            f"{p}, not significant: {r['n_a']} vs {r['n_b']} traces cannot give a p-value "
            f"below {r['p_min']:.3f}"
        )
    return f"{p}, not significant"


def finding_sentence(f: Finding, d: DiffResult) -> str:
    """One significant finding as a sentence."""
    r, (na, nb) = f.row, d.names
    adj = f"{ADJ[f.family]} {format_p(f.p_value)}"
    if f.kind == "outcome":
        cell = "" if r["cell"] in ("", "all") else f" in {r['cell']}"
        return (
            f"{outcome_name(r['metric'])}{cell}: {outcome_value(r['metric'], r['a_mean'])} → "
            f"{outcome_value(r['metric'], r['b_mean'])} ({change(r['change'])}; {adj}, "
            f"n = {r['n_a']} vs {r['n_b']})"
        )
    if f.kind == "state":
        only = (
            f"appears only in {nb}; "
            if r["a_fraction"] == 0
            else f"appears only in {na}; "
            if r["b_fraction"] == 0
            else ""
        )
        return (
            f"{r['state']}: {pct(r['a_fraction'])} → {pct(r['b_fraction'])} of time "
            f"({only}{adj}, n = {r['n_a']} vs {r['n_b']})"
        )
    if f.kind == "edge":
        return (
            f"{r['source']} → {r['target']}: {pct(r['a_probability'])} → "
            f"{pct(r['b_probability'])} of exits from {r['source']} ({adj}, {r['a_count']} vs "
            f"{r['b_count']} transitions)"
        )
    if f.kind == "source":
        return (
            f"exits from {r['source']} are distributed differently ({r['test']}, {adj}, total "
            f"variation {r['effect']:.2f})"
        )
    if f.kind == "dwell":
        return (
            f"{r['state']}: median dwell {ms(r['a_median_ms'])} → {ms(r['b_median_ms'])} "
            f"({adj}, n = {r['n_a']} vs {r['n_b']} traces)"
        )
    if f.kind == "invariant":
        if r["holds_in"] == "a":
            holds, breaks, k, n_hold, n_break = na, nb, r["violations_b"], d.n_a, d.n_b
        else:
            holds, breaks, k, n_hold, n_break = nb, na, r["violations_a"], d.n_b, d.n_a
        return (
            f"“{r['a']} {r['kind']} {r['b']}” holds in all {n_hold} traces of {holds}, "
            f"broken in {k} of {n_break} of {breaks}{invariant_chances(r)} ({adj})"
        )
    raise ValueError(f"no sentence for a finding of kind {f.kind!r}")


def invariant_chances(r: Mapping[str, Any]) -> str:
    """How often the breaking group broke an invariant per chance to break it (the rate its
    test compares), e.g. ``", at 43 of 50 returns to Recovery"``; empty for older rows."""
    unit = r.get("unit")
    if not unit:
        return ""
    side = "b" if r["holds_in"] == "a" else "a"
    k, n = r[f"broken_{side}"], r[f"opportunities_{side}"]
    if unit.startswith("return to "):
        return f", at {k} of {n} returns to {unit.removeprefix('return to ')}"
    return f", {k} of the {n} that visit {unit.removeprefix('trace with ')}"


def sentences(d: DiffResult) -> list[str]:
    """Every finding of ``d``, ranked (:meth:`DiffResult.findings`), as sentences."""
    return [finding_sentence(f, d) for f in d.findings()]


# -- evidence ---------------------------------------------------------------------------------


#: a source of the connection account in words (:mod:`quicsm.extract.account`)
_SOURCE_WORDS = {
    "logged": "logged",
    "packets": "from packets",
    "metrics": "derived from metrics",
    "absent": "absent",
    "mixed": "from mixed sources",
}


def provenance_text(v: Evidence) -> str:
    """Where the values come from, when not both logged: ``, from packets: quic-go v0.48.2
    logs none`` (empty for indicators that are not facts of the connection account)."""
    sa, sb = v.sources
    if (not sa and not sb) or (sa == sb == "logged"):
        return ""
    if sa == sb:
        head = _SOURCE_WORDS.get(sa, sa)
    else:
        words = [_SOURCE_WORDS.get(s, s or "not counted") for s in (sa, sb)]
        head = f"A {words[0]}, B {words[1]}"
    notes = "; ".join(dict.fromkeys(n for n in v.notes if n))
    return f", {head}" + (f": {notes}" if notes else "")


def evidence_short(v: Evidence) -> str:
    """``indicator a → b`` in a few words."""
    if v.unit == "share":
        return f"{v.indicator} {100 * v.a_mean:.1f}% → {100 * v.b_mean:.1f}%"
    if v.unit.startswith("outcome:"):
        metric = v.unit.split(":", 1)[1]
        a, b = outcome_value(metric, v.a_mean), outcome_value(metric, v.b_mean)
        return f"{v.indicator} {a} → {b}"
    logged = f" (none logged in {', '.join(v.unlogged)})" if v.unlogged else ""
    return f"{v.indicator} {v.a_mean:.1f} → {v.b_mean:.1f} {v.unit}{provenance_text(v)}{logged}"


def evidence_sentence(v: Evidence) -> str:
    """One indicator compared between the groups, with its Cliff's δ and example traces."""
    if v.unit == "share":
        values = f"{100 * v.a_mean:.1f}% → {100 * v.b_mean:.1f}% of time (mean of per-trace shares)"
    elif v.unit.startswith("outcome:"):
        metric = v.unit.split(":", 1)[1]
        values = (
            f"{outcome_value(metric, v.a_mean)} → {outcome_value(metric, v.b_mean)} "
            "(mean over traces)"
        )
    else:
        values = (
            f"{v.a_mean:.1f} → {v.b_mean:.1f} {v.unit} (non-zero in "
            f"{v.a_traces} of {v.n_a} vs {v.b_traces} of {v.n_b} traces){provenance_text(v)}"
        )
    caution = "".join(
        f"; none logged in any trace of {g} (not logged, or never happened)" for g in v.unlogged
    )
    return (
        f"{v.indicator}: {values}; Cliff's δ {v.delta:+.2f}; "
        f"e.g. {v.example_b} (B), {v.example_a} (A){caution}"
    )


def scope_text(e: Explanation) -> str:
    """Which traces were compared, e.g. ``jitter: 10 vs 10 server traces``."""
    where = f"{e.cell}: " if e.cell is not None else ""
    servers = " server" if e.servers else ""
    return f"{where}{e.n_a} vs {e.n_b}{servers} traces"


def change_text(e: Explanation, d: DiffResult) -> str:
    """The change an explanation is about, in words: a finding's sentence, or an outcome
    change with its status (significant or not, and why not)."""
    if e.finding is not None:
        return finding_sentence(e.finding, d)
    r = e.outcome
    assert r is not None
    cell = "" if e.cell is None else f" in {e.cell}"
    values = (
        f"{outcome_value(r['metric'], r['a_mean'])} → {outcome_value(r['metric'], r['b_mean'])}"
    )
    return (
        f"{outcome_name(r['metric'])}{cell}: {values} ({100 * r['change']:+.0f}%; "
        f"{p_status(r)} — {r['test']}, n = {r['n_a']} vs {r['n_b']})"
    )


def headline(e: Explanation, d: DiffResult, *, evidence: int = 2) -> str:
    """The change and its strongest evidence in one sentence."""
    text = change_text(e, d)
    if not e.evidence:
        return text
    why = "; ".join(evidence_short(v) for v in e.evidence[:evidence])
    return f"{text} — why: {why} [{scope_text(e)}]"


def why_items(e: Explanation, d: DiffResult, explanations: Sequence[Explanation] = ()) -> list[str]:
    """The evidence of one explained change, strongest first (or where it was shown)."""
    if e.same_as is not None and e.same_as < len(explanations):
        first = change_text(explanations[e.same_as], d)
        return [f"the same traces and indicators as for “{first}” (shown there)"]
    return [evidence_sentence(v) for v in e.evidence] or [
        "no indicator separates the groups' traces (|Cliff's δ| < 0.3)"
    ]
