"""The cuts of a window series (``quicsm.controllers.features._cuts``): the one-step drops found
over all steps at once are those a step-by-step reading finds, with the same undo verdicts."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.controllers import features
from quicsm.controllers.features import (
    COLLAPSE_BELOW,
    DEFAULT_RTT_MS,
    DROP_SHARE,
    UNDO_RTTS,
    UNDO_SHARE,
)


def stepwise(
    events: list[str], times: np.ndarray, cwnd: np.ndarray, rtt: np.ndarray
) -> list[tuple[int, int, bool]]:
    """The cuts read one step at a time, as the definition says them."""
    loss_times = times[np.array([e in ("packet_lost", "pto") for e in events], dtype=bool)]
    rows = np.flatnonzero(~np.isnan(cwnd))
    out = []
    for i in range(len(rows) - 1):
        a, b = rows[i], rows[i + 1]
        before, after = cwnd[a], cwnd[b]
        if not (before > 0 and COLLAPSE_BELOW * before <= after < (1 - DROP_SHARE) * before):
            continue
        srtt = float(rtt[b]) if not math.isnan(rtt[b]) else DEFAULT_RTT_MS
        t_cut = times[b]
        near = loss_times[(loss_times <= t_cut) & (loss_times >= t_cut - 2 * srtt)]
        if not len(near) or srtt <= 0:
            continue
        undone, previous = False, after
        for c in rows[i + 2 :]:
            if times[c] - t_cut > UNDO_RTTS * srtt or cwnd[c] < (1 - DROP_SHARE) * previous:
                break
            if previous < UNDO_SHARE * before <= cwnd[c] and cwnd[c] - previous >= 0.5 * (
                before - after
            ):
                undone = True
                break
            previous = cwnd[c]
        out.append((int(a), int(b), undone))
    return out


#: one row: an event (a loss or not), how much time passes, the window (NaN: none logged), RTT
ROWS = st.tuples(
    st.sampled_from(["metrics", "metrics", "packet_lost", "pto"]),
    st.floats(0, 50),
    st.one_of(
        st.just(math.nan),
        st.sampled_from([0.0, -1.0, 1e4, 5e3, 3e3, 2.9e3, 9e3, 9.95e3, 1e4 * 0.3, 1e4 * 0.9]),
        st.floats(-1e3, 2e4, allow_nan=False),
    ),
    st.one_of(st.just(math.nan), st.floats(0, 100)),
)


@settings(max_examples=300)
@given(st.lists(ROWS, max_size=60))
def test_cuts_are_those_of_a_stepwise_reading(rows: list[tuple[str, float, float, float]]) -> None:
    events = [r[0] for r in rows]
    times = np.cumsum(np.array([r[1] for r in rows], dtype=np.float64))
    cwnd = np.array([r[2] for r in rows], dtype=np.float64)
    rtt = np.array([r[3] for r in rows], dtype=np.float64)
    assert features._cuts(events, times, cwnd, rtt) == stepwise(events, times, cwnd, rtt)


def test_a_cut_after_a_loss_is_found_and_an_undo_seen() -> None:
    events = ["metrics", "packet_lost", "metrics", "metrics", "metrics"]
    times = np.array([0.0, 1.0, 2.0, 3.0, 100.0])
    cwnd = np.array([1e4, np.nan, 7e3, 1e4, 6e3])
    rtt = np.full(5, 10.0)
    # 10000 -> 7000 after the loss, back to 10000 within an RTT: undone; 10000 -> 6000 at
    # 100 ms has no loss within two RTTs before it: no cut
    assert features._cuts(events, times, cwnd, rtt) == [(0, 2, True)]


def test_the_drop_bounds_are_kept_exactly() -> None:
    """A step to exactly (1 - DROP_SHARE) of the window is no cut; one to exactly
    COLLAPSE_BELOW of it is (the bounds of the definition, compared as it compares them)."""
    events = ["packet_lost", "metrics", "metrics", "packet_lost", "metrics"]
    times = np.array([0.0, 0.0, 1.0, 2.0, 3.0])
    before = 1e4
    cwnd = np.array([np.nan, before, (1 - DROP_SHARE) * before, before, COLLAPSE_BELOW * before])
    rtt = np.full(5, 10.0)
    assert features._cuts(events, times, cwnd, rtt) == [(3, 4, False)]
    assert stepwise(events, times, cwnd, rtt) == [(3, 4, False)]
