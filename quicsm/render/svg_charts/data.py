"""What the report's charts are drawn from: one value per state and group (:class:`Bar`,
:class:`Box`), a representative trace (:class:`Series`), a scenario-matrix cell (:class:`Cell`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bar:
    """A state's mean share of time in each group (fractions), with 95% intervals."""

    label: str
    values: tuple[float, float]  # group A, group B (fractions)
    lows: tuple[float, float]
    highs: tuple[float, float]
    note: str  # "p < 0.001 *" etc.
    significant: bool


@dataclass(frozen=True)
class Box:
    """A state's dwell times per visit in each group: p10, p25, p50, p75, p90 (ms)."""

    label: str
    quantiles: tuple[list[float] | None, list[float] | None]
    counts: tuple[int, int]
    note: str
    significant: bool


@dataclass(frozen=True)
class Series:
    """The congestion window of one trace for the report's small multiples."""

    times_ms: list[float]
    cwnd_bytes: list[float | None]
    in_flight_bytes: list[float | None]
    losses_ms: list[float]
    ptos_ms: list[float]
    bands: list[tuple[float, float, str]]  # start_ms, end_ms, state


@dataclass(frozen=True)
class Cell:
    """A scenario-matrix cell: B's percent difference from A and its test."""

    percent: float | None  # (mean_b - mean_a) / mean_a * 100
    significant: bool
    text: str  # second line: "p = 0.003" / "n.s." / "n=2 < 3: no test"
    counts: tuple[int, int]
