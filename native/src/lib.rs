//! quicsm_native: the derived-state path of quicsm's qlog reader, natively.
//!
//! `quicsm.extract.native` wraps [`PyDeriver`]; `quicsm.qlog.seq` hands it whole regions of
//! JSON-SEQ/NDJSON records through `scan`. The Python modules stay the reference
//! (`quicsm/extract/deriver.py`, `quicsm/qlog/seq.py`, `quicsm/qlog/events.py`); this crate
//! must give the same rows, and hands back every record it cannot decode exactly as they would.

mod deriver;
mod record;
mod scan;

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use deriver::{Cond, Deriver, Event, Kind, Profile, Rule, Thresholds, N_METRICS, N_STATES};

type ProfileArgs = (f64, f64, bool, Option<f64>, f64, bool, f64, bool, bool, f64);
type ThresholdArgs = (f64, f64, f64, f64, f64, f64);
/// (states it applies in, or None for any; event class; condition name; next state; trigger)
type RuleArgs = (Option<Vec<u8>>, u8, String, u8, String);

/// One trace's deriver (see `quicsm.extract.native.NativeDeriver`).
#[pyclass(name = "Deriver", module = "quicsm_native")]
struct PyDeriver {
    inner: Deriver,
    /// where the last `scan` stopped, if it handed a record back (see [`Resume`])
    resume: Option<Resume>,
}

/// The cursor of a `scan` that handed a record back, with what identifies the call that
/// continues it: the same buffer (address and length), region end and separator, starting at
/// the handed-back record's closing separator, which still holds the same bytes. Any other call
/// searches from its start, as before.
struct Resume {
    ptr: usize,
    len: usize,
    end: usize,
    sep: u8,
    rs: usize,
    re: usize,
    fingerprint: u64,
    cursor: scan::Cursor,
}

fn fingerprint(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn bytes_of<T: Copy>(py: Python<'_>, items: &[T]) -> Py<PyBytes> {
    // SAFETY: plain numbers, viewed as their bytes (native byte order, as Python's array)
    let raw = unsafe {
        std::slice::from_raw_parts(items.as_ptr() as *const u8, std::mem::size_of_val(items))
    };
    PyBytes::new(py, raw).unbind()
}

#[pymethods]
impl PyDeriver {
    #[new]
    fn new(profile: ProfileArgs, thresholds: ThresholdArgs, rules: Vec<RuleArgs>) -> PyResult<Self> {
        let p = Profile {
            datagram_bytes: profile.0,
            burst_datagrams: profile.1,
            slow_start_half_window: profile.2,
            max_cwnd_datagrams: profile.3,
            min_cwnd_datagrams: profile.4,
            logs_ssthresh: profile.5,
            ssthresh_unset_from: profile.6,
            logs_pto: profile.7,
            persistent_congestion: profile.8,
            max_ack_delay_ms: profile.9,
        };
        let th = Thresholds {
            pto_gap_fraction: thresholds.0,
            granularity_ms: thresholds.1,
            slow_start_stall_datagrams: thresholds.2,
            plateau_windows: thresholds.3,
            datagram_step_min_bytes: thresholds.4,
            datagram_step_max_bytes: thresholds.5,
        };
        let mut table = Vec::with_capacity(rules.len());
        for (current, event, cond, to, trigger) in rules {
            let cond = Cond::named(&cond)
                .ok_or_else(|| PyValueError::new_err(format!("no native condition {cond:?}")))?;
            if event as usize >= deriver::N_EVENTS || to as usize >= N_STATES {
                return Err(PyValueError::new_err("event class or state out of range"));
            }
            let mask = match current {
                None => None,
                Some(states) => {
                    let mut m = 0u16;
                    for s in states {
                        if s as usize >= N_STATES {
                            return Err(PyValueError::new_err("state out of range"));
                        }
                        m |= 1 << s;
                    }
                    Some(m)
                }
            };
            table.push(Rule { current: mask, event, cond, to, trigger });
        }
        Ok(PyDeriver { inner: Deriver::new(p, th, table), resume: None })
    }

    #[pyo3(signature = (time, kind, values, app_limited))]
    /// One event: `kind` 0 metrics, 1 packet_lost, 2 pto, 3 spurious_loss; `values` the nine
    /// normalised metrics in `METRIC_FIELDS` order (None: not logged).
    fn feed(
        &mut self,
        time: f64,
        kind: u8,
        values: [Option<f64>; N_METRICS],
        app_limited: Option<bool>,
    ) -> PyResult<()> {
        let kind = match kind {
            0 => Kind::Metrics,
            1 => Kind::Lost,
            2 => Kind::Pto,
            3 => Kind::Spurious,
            _ => return Err(PyValueError::new_err("kind must be 0..3")),
        };
        self.inner.feed(&Event { time, kind, values, app_limited });
        Ok(())
    }

    /// The derive pass over the records between the separators at `buf[pos]` and `buf[end]`.
    /// Returns `(rs, re, latest, latest_other, checked, visited)`: `rs`, `re` the separators of
    /// a record the caller must handle (-1 when the pass finished), then the trace's
    /// time-order state.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (buf, pos, end, sep, scale, latest, latest_other, feed))]
    fn scan(
        &mut self,
        buf: &Bound<'_, PyAny>,
        pos: usize,
        end: usize,
        sep: u8,
        scale: f64,
        latest: Option<f64>,
        latest_other: Option<f64>,
        feed: bool,
    ) -> PyResult<(i64, i64, Option<f64>, Option<f64>, bool, u64)> {
        let view = PyBuffer::<u8>::get(buf)?;
        let bytes = separated(&view, pos, end, sep)?;
        let order = scan::Order { latest, latest_other, checked: false };
        let ptr = bytes.as_ptr() as usize;
        let resume = self.resume.take().and_then(|r| {
            let same = r.ptr == ptr
                && r.len == bytes.len()
                && r.end == end
                && r.sep == sep
                && r.re == pos
                && fingerprint(&bytes[r.rs..=r.re]) == r.fingerprint;
            same.then_some(r.cursor)
        });
        let out = scan::scan(&mut self.inner, bytes, pos, end, sep, scale, order, feed, resume);
        if let (Some((rs, re)), Some(cursor)) = (out.fallback, out.cursor) {
            let fingerprint = fingerprint(&bytes[rs..=re]);
            self.resume = Some(Resume { ptr, len: bytes.len(), end, sep, rs, re, fingerprint, cursor });
        }
        let (rs, re) = out.fallback.map_or((-1, -1), |(a, b)| (a as i64, b as i64));
        Ok((rs, re, out.order.latest, out.order.latest_other, out.order.checked, out.visited))
    }

    /// `(times, states, triggers, trigger_names)`: float64, uint8 and uint16 arrays as bytes.
    fn rows(&self, py: Python<'_>) -> (Py<PyBytes>, Py<PyBytes>, Py<PyBytes>, Vec<String>) {
        let r = &self.inner.rows;
        (
            bytes_of(py, &r.times),
            bytes_of(py, &r.states),
            bytes_of(py, &r.triggers),
            r.trigger_names.clone(),
        )
    }

    /// `(events, seen_cwnd, seen_in_flight, seen_rtt, seen_pto, app_limited_flag, state)`.
    fn status(&self) -> (i64, bool, bool, bool, bool, Option<bool>, u8) {
        let d = &self.inner;
        (
            d.events,
            d.seen_cwnd,
            d.seen_in_flight,
            d.seen_rtt,
            d.seen_pto,
            d.app_limited_flag,
            d.state,
        )
    }
}

/// The bytes of a contiguous buffer (bytes, bytearray, memoryview), checked to hold
/// separators at `a` and `b`.
fn separated<'py>(view: &'py PyBuffer<u8>, a: usize, b: usize, sep: u8) -> PyResult<&'py [u8]> {
    if !view.is_c_contiguous() {
        return Err(PyValueError::new_err("buf must be contiguous"));
    }
    let len = view.len_bytes();
    if a > b || b >= len {
        return Err(PyValueError::new_err("a <= b < len(buf) is required"));
    }
    // SAFETY: the buffer stays exported (and the GIL held) while it is read; nothing here
    // releases the GIL, so no Python code can resize it meanwhile
    let bytes = unsafe { std::slice::from_raw_parts(view.buf_ptr() as *const u8, len) };
    if bytes[a] != sep || bytes[b] != sep {
        return Err(PyValueError::new_err("buf[a] and buf[b] must be separators"));
    }
    Ok(bytes)
}

/// `(rs, re)` of each record between the separators at `buf[a]` and `buf[b]` that contains
/// `needle` and does not begin with one of `prefixes` (`quicsm.qlog.seq._header_candidates`).
#[pyfunction]
fn header_candidates(
    buf: &Bound<'_, PyAny>,
    a: usize,
    b: usize,
    sep: u8,
    needle: &[u8],
    prefixes: Vec<Vec<u8>>,
) -> PyResult<Vec<(usize, usize)>> {
    let view = PyBuffer::<u8>::get(buf)?;
    let bytes = separated(&view, a, b, sep)?;
    let finder = memchr::memmem::Finder::new(needle);
    let mut out = Vec::new();
    let mut from = a;
    while from < b {
        let hit = match finder.find(&bytes[from..b]) {
            Some(i) => i + from,
            None => break,
        };
        let rs = memchr::memrchr(sep, &bytes[a..hit]).map_or(a, |i| i + a);
        let re = memchr::memchr(sep, &bytes[hit..=b]).map_or(b, |i| i + hit);
        let content = &bytes[rs + 1..];
        if !prefixes.iter().any(|p| content.starts_with(p)) {
            out.push((rs, re));
        }
        from = re;
    }
    Ok(out)
}

/// `(rs, re)` of each record between the separators at `buf[a]` and `buf[b]` that contains
/// `needle` (the explicit-state pass of `quicsm.qlog.seq.SeqScanner._decode_hits`).
#[pyfunction]
fn records_with(
    buf: &Bound<'_, PyAny>,
    a: usize,
    b: usize,
    sep: u8,
    needle: &[u8],
) -> PyResult<Vec<(usize, usize)>> {
    header_candidates(buf, a, b, sep, needle, Vec::new())
}

#[pymodule]
fn quicsm_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDeriver>()?;
    m.add_function(wrap_pyfunction!(header_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(records_with, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
