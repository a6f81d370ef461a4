//! The derive pass over one region of records (`SeqScanner._decode_hits` with the derive
//! needles, in `quicsm/qlog/seq.py`).
//!
//! A record is visited when it contains a derive needle, in file order, and skipped when it
//! contains the explicit-state needle (the state pass decoded it) or was found only by the
//! timer needle without "expired" in it. Each visited record is decoded ([`crate::record`]),
//! its time checked against the trace's latest time of non-state events, and its event fed to
//! the deriver. The first record this cannot do exactly as the Python reader would stops the
//! pass: its bounds are returned, the Python reader handles it, and calls again after it.
//!
//! A hand-back does not restart the search: the outcome carries a [`Cursor`] (the next hit of
//! every needle at or after the handed-back record), and the call after it resumes from that
//! cursor. Each byte of a region is searched once per needle however many records are handed
//! back (searching the rest of the region again at every hand-back made a region of n
//! handed-back records cost O(n^2)).

use memchr::memmem::Finder;
use std::sync::OnceLock;

use crate::deriver::Deriver;
use crate::record::{blank_event, decode_into};

// the needles and the value budget: generated from quicsm/core/tables.json (src/tables.rs)
use crate::tables::{
    DERIVE_NEEDLES, MAX_RECORD_VALUES, STATE_NEEDLE, TIMER_NEEDLE_AT as TIMER, TIMER_REQUIRED,
};

/// Whether a record may be over the value budget (`quicsm.qlog.budget.MAX_RECORD_VALUES`): the
/// cheap bound of `quicsm.qlog.budget` (every `{`, `[` and `,`, strings included). A record that
/// may be over is handed back, for the Python reader to count its values exactly (and report the
/// record if it is over).
pub(crate) fn may_be_over_budget(record: &[u8]) -> bool {
    record.len() > MAX_RECORD_VALUES
        && memchr::memchr3_iter(b'{', b'[', b',', record).count() > MAX_RECORD_VALUES
}

struct Finders {
    derive: Vec<Finder<'static>>,
    state: Finder<'static>,
    expired: Finder<'static>,
}

fn finders() -> &'static Finders {
    static F: OnceLock<Finders> = OnceLock::new();
    F.get_or_init(|| Finders {
        derive: DERIVE_NEEDLES.iter().map(Finder::new).collect(),
        state: Finder::new(STATE_NEEDLE),
        expired: Finder::new(TIMER_REQUIRED),
    })
}

/// The trace's time-order state (`TraceBuilder.latest` and its latest non-state time).
#[derive(Clone, Copy, Debug)]
pub struct Order {
    pub latest: Option<f64>,
    pub latest_other: Option<f64>,
    /// whether a time was checked (then `latest_other` is to be stored)
    pub checked: bool,
}

/// Where a pass stopped at a hand-back: the next hit of each needle at or after the end of the
/// handed-back record (`usize::MAX`: none before the region's end).
#[derive(Clone, Copy, Debug)]
pub struct Cursor {
    next: [usize; 4],
    next_state: usize,
}

pub struct Outcome {
    /// the record the Python reader must handle: (its opening separator, its closing one)
    pub fallback: Option<(usize, usize)>,
    pub order: Order,
    pub visited: u64,
    /// with `fallback`: where the next call over the same region resumes
    pub cursor: Option<Cursor>,
}

/// Next hit of `finder` in `buf[from..end]` (absolute), `usize::MAX` if none.
#[inline]
fn next_hit(finder: &Finder, buf: &[u8], from: usize, end: usize) -> usize {
    if from >= end {
        return usize::MAX;
    }
    finder.find(&buf[from..end]).map_or(usize::MAX, |i| i + from)
}

/// The records between the separators at `buf[pos]` and `buf[end]`. `resume` is the cursor
/// of the previous call over the same region when that call handed back the record ending at
/// `buf[pos]`: the search continues from it instead of starting again.
#[allow(clippy::too_many_arguments)]
pub fn scan(
    deriver: &mut Deriver,
    buf: &[u8],
    pos: usize,
    end: usize,
    sep: u8,
    scale: f64,
    order: Order,
    feed: bool,
    resume: Option<Cursor>,
) -> Outcome {
    scan_region(deriver, buf, pos, end, sep, scale, order, feed, resume, false)
}

/// [`scan`], told whether the caller knows that no record of the region holds the
/// explicit-state needle (`no_states`: its own state pass over the same bytes found none), so
/// the region is not searched for it a second time.
#[allow(clippy::too_many_arguments)]
pub fn scan_region(
    deriver: &mut Deriver,
    buf: &[u8],
    pos: usize,
    end: usize,
    sep: u8,
    scale: f64,
    mut order: Order,
    feed: bool,
    resume: Option<Cursor>,
    no_states: bool,
) -> Outcome {
    let f = finders();
    let state_hit = |from: usize| {
        if no_states {
            usize::MAX
        } else {
            next_hit(&f.state, buf, from, end)
        }
    };
    let mut next: [usize; 4] = [0; 4];
    let mut next_state;
    match resume {
        Some(c) => {
            // every cached hit lies at or after `pos` (the end of the handed-back record);
            // one that does not is searched again, from `pos`
            for (k, finder) in f.derive.iter().enumerate() {
                next[k] =
                    if c.next[k] >= pos { c.next[k] } else { next_hit(finder, buf, pos, end) };
            }
            next_state = if c.next_state >= pos { c.next_state } else { state_hit(pos) };
        }
        None => {
            for (k, finder) in f.derive.iter().enumerate() {
                next[k] = next_hit(finder, buf, pos, end);
            }
            next_state = state_hit(pos);
        }
    }
    let mut visited = 0u64;
    let mut event = blank_event(); // each decoded record's event, written in place
    loop {
        let hit = *next.iter().min().unwrap();
        if hit == usize::MAX {
            break;
        }
        // the record around the hit: buf[rs] and buf[re] are its separators
        let rs = memchr::memrchr(sep, &buf[pos..hit]).map_or(pos, |i| i + pos);
        let re = memchr::memchr(sep, &buf[hit..=end]).map_or(end, |i| i + hit);
        let mut matched = 0u8;
        for (k, finder) in f.derive.iter().enumerate() {
            if next[k] < re {
                matched |= 1 << k;
                next[k] = next_hit(finder, buf, re, end);
            }
        }
        while next_state < rs {
            next_state = state_hit(next_state + 1);
        }
        if next_state < re {
            continue; // an explicit-state record: the state pass decoded it
        }
        if matched == 1 << TIMER && f.expired.find(&buf[rs..re]).is_none() {
            continue; // a timer set or cancelled
        }
        visited += 1;
        if may_be_over_budget(&buf[rs + 1..re]) {
            let cursor = Some(Cursor { next, next_state });
            return Outcome { fallback: Some((rs, re)), order, visited, cursor };
        }
        let (kind, t, has_event) = match decode_into(&buf[rs + 1..re], scale, &mut event) {
            Ok(d) => d,
            Err(_) => {
                let cursor = Some(Cursor { next, next_state });
                return Outcome { fallback: Some((rs, re)), order, visited, cursor };
            }
        };
        if kind.is_none() {
            continue;
        }
        if let Some(latest) = order.latest_other {
            if t < latest {
                // times going backwards: the Python reader reports it
                let cursor = Some(Cursor { next, next_state });
                return Outcome { fallback: Some((rs, re)), order, visited, cursor };
            }
        }
        order.latest_other = Some(t);
        order.checked = true;
        if order.latest.is_none_or(|l| t > l) {
            order.latest = Some(t);
        }
        if feed && has_event {
            deriver.feed(&event);
        }
    }
    Outcome { fallback: None, order, visited, cursor: None }
}
