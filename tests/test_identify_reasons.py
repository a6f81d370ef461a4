"""identify's reasons: counts in the right number, and every abstention names the evidence that
was missing and a run that would give it (issue 43)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

import quicsm
from quicsm.controllers.fitted import DEFAULT_SIGNATURES
from quicsm.controllers.reasons import count
from quicsm.controllers.signatures import UNKNOWN, classify

ROOT = Path(__file__).resolve().parent.parent
STOCK_V054 = ROOT / "tests" / "fixtures" / "stock" / "quic-go-v0.54.0.qlog"
NOUNS = ["window reduction", "reduction", "loss", "collapse to the minimum window",
         "congestion-avoidance interval"]  # fmt: skip
#: "1 <noun>s": a count of one with a plural noun
ONE_PLURAL = re.compile(r"(?<![\d.])1 (window reductions|reductions|losses|collapses|"
                        r"congestion-avoidance intervals)\b")  # fmt: skip


@given(st.integers(min_value=0, max_value=10_000), st.sampled_from(NOUNS))
def test_count_is_singular_exactly_for_one(n: int, noun: str) -> None:
    text = count(n, noun)
    assert text.startswith(f"{n} ")
    assert (text == f"1 {noun}") == (n == 1)
    if n != 1:
        assert text != f"{n} {noun}" and len(text) > len(f"{n} {noun}")


@given(
    n=st.integers(min_value=1, max_value=40),
    losses=st.integers(min_value=0, max_value=60),
    epochs=st.integers(min_value=0, max_value=8),
    beta=st.floats(min_value=0.3, max_value=0.9),
    spread=st.floats(min_value=0.0, max_value=0.1),
)
def test_every_abstention_says_what_was_missing_and_what_would_settle_it(
    n: int, losses: int, epochs: int, beta: float, spread: float
) -> None:
    row = {"n_reductions": n, "beta": beta, "beta_spread": spread, "n_losses": max(losses, n),
           "n_epochs": epochs, "epoch_rtts": 5.0 * epochs, "growth": 1.0 if epochs else None,
           "curvature": 0.0 if epochs else None, "round_basis": "acked",
           "rtt_ms": 40.0}  # fmt: skip
    verdict = classify(row, DEFAULT_SIGNATURES)
    assert not ONE_PLURAL.search(verdict.evidence), verdict.evidence
    if verdict.family == UNKNOWN:
        assert "would settle it: " in verdict.evidence, verdict.evidence
        assert "missing: " in verdict.evidence, verdict.evidence
    if verdict.family == UNKNOWN and not epochs:
        assert "growth between cuts" in verdict.evidence or "reductions or more" in (
            verdict.evidence
        ), verdict.evidence


def test_one_reduction_reads_in_the_singular() -> None:
    verdict = classify(
        {"n_reductions": 1, "beta": 0.7, "n_losses": 1, "n_epochs": 0}, DEFAULT_SIGNATURES
    )
    assert verdict.family == UNKNOWN
    assert verdict.evidence.startswith("1 window reduction on loss, factor 0.70;")
    assert "missing: 3 reductions or more" in verdict.evidence


def test_real_stock_senders_abstain_with_reasons() -> None:
    # stock quic-go v0.54.0 (a release no box was fitted on): every unknown sender says what
    # it lacked; no count of one reads in the plural
    frame = quicsm.identify([STOCK_V054]).filter(pl.col("vantage") == "server")
    assert frame.height > 0
    unknown = frame.filter(pl.col("family") == UNKNOWN)
    assert unknown.height > 0
    for evidence in unknown["evidence"].to_list():
        assert "would settle it: " in evidence, evidence
    for evidence in frame["evidence"].to_list():
        assert not ONE_PLURAL.search(evidence), evidence
