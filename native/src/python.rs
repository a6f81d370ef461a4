//! The Python bindings of the native core: the extension module `quicsm._native`.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::contained;
use crate::deriver::{self, Cond, Deriver, Event, Profile, Rule, Thresholds, N_METRICS, N_STATES};
use crate::packets;
use crate::scan;
use crate::tables;

/// `quicsm.extract.profiles.Profile`, read attribute by attribute (by name: a field renamed or
/// missing on either side is an error, not a silent swap).
#[derive(FromPyObject)]
struct ProfileArgs {
    datagram_bytes: f64,
    burst_datagrams: f64,
    slow_start_half_window: bool,
    max_cwnd_datagrams: Option<f64>,
    min_cwnd_datagrams: f64,
    logs_ssthresh: bool,
    ssthresh_unset_from: f64,
    logs_pto: bool,
    persistent_congestion: bool,
    max_ack_delay_ms: f64,
}

/// `quicsm.extract.rules.Thresholds`, read by name as [`ProfileArgs`].
#[derive(FromPyObject)]
struct ThresholdArgs {
    pto_gap_fraction: f64,
    granularity_ms: f64,
    slow_start_stall_datagrams: f64,
    plateau_windows: f64,
    datagram_step_min_bytes: f64,
    datagram_step_max_bytes: f64,
}

/// (states it applies in, or None for any; event class; condition name; next state; trigger)
type RuleArgs = (Option<Vec<u8>>, u8, String, u8, String);

/// One trace's deriver (see `quicsm.extract.native.NativeDeriver`).
#[pyclass(name = "Deriver", module = "quicsm._native")]
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
    fn new(
        profile: ProfileArgs,
        thresholds: ThresholdArgs,
        rules: Vec<RuleArgs>,
    ) -> PyResult<Self> {
        let p = Profile {
            datagram_bytes: profile.datagram_bytes,
            burst_datagrams: profile.burst_datagrams,
            slow_start_half_window: profile.slow_start_half_window,
            max_cwnd_datagrams: profile.max_cwnd_datagrams,
            min_cwnd_datagrams: profile.min_cwnd_datagrams,
            logs_ssthresh: profile.logs_ssthresh,
            ssthresh_unset_from: profile.ssthresh_unset_from,
            logs_pto: profile.logs_pto,
            persistent_congestion: profile.persistent_congestion,
            max_ack_delay_ms: profile.max_ack_delay_ms,
        };
        let th = Thresholds {
            pto_gap_fraction: thresholds.pto_gap_fraction,
            granularity_ms: thresholds.granularity_ms,
            slow_start_stall_datagrams: thresholds.slow_start_stall_datagrams,
            plateau_windows: thresholds.plateau_windows,
            datagram_step_min_bytes: thresholds.datagram_step_min_bytes,
            datagram_step_max_bytes: thresholds.datagram_step_max_bytes,
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

    #[pyo3(signature = (time, kind, values, app_limited, trigger=None))]
    /// One event: `kind` 0 metrics, 1 packet_lost, 2 pto, 3 spurious_loss; `values` the nine
    /// normalised metrics in `METRIC_FIELDS` order (None: not logged); `trigger` what a
    /// recorder keeps of a metrics or loss event.
    fn feed(
        &mut self,
        time: f64,
        kind: u8,
        values: [Option<f64>; N_METRICS],
        app_limited: Option<bool>,
        trigger: Option<String>,
    ) -> PyResult<()> {
        let kind = *tables::FEED_KINDS
            .get(kind as usize)
            .ok_or_else(|| PyValueError::new_err("kind is not a position in FEED_KINDS"))?;
        self.inner.feed(&Event { time, kind, values, app_limited, trigger });
        Ok(())
    }

    /// A deriver that derives nothing and keeps every event fed to it, or found by its
    /// `scan` or by `contained_events`, as columns (`take_columns`).
    #[staticmethod]
    fn recorder() -> Self {
        PyDeriver { inner: Deriver::recorder(), resume: None }
    }

    /// How many events a recorder holds (0 for a deriver).
    fn recorded(&self) -> usize {
        self.inner.columns.as_ref().map_or(0, |c| c.len())
    }

    /// A recorder's events, taken (it keeps none): `(times, kinds, values, triggers,
    /// trigger_names)`: float64 and uint8 arrays as bytes, one float64 array per metric in
    /// `METRIC_FIELDS` order (NaN: not logged), uint16 trigger codes (0: none, else 1 + the
    /// position in `trigger_names`).
    #[allow(clippy::type_complexity)]
    fn take_columns(
        &mut self,
        py: Python<'_>,
    ) -> PyResult<(Py<PyBytes>, Py<PyBytes>, Vec<Py<PyBytes>>, Py<PyBytes>, Vec<String>)> {
        let columns = self
            .inner
            .columns
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("not a recorder"))?
            .take();
        Ok((
            bytes_of(py, &columns.times),
            bytes_of(py, &columns.kinds),
            columns.values.iter().map(|v| bytes_of(py, v)).collect(),
            bytes_of(py, &columns.triggers),
            columns.trigger_names,
        ))
    }

    /// A recorder's events, taken as [`crate::arrow::bindings::ArrowBlock`] (`pl.DataFrame`
    /// of it: `_t`, `kind`, the metrics by name, `trigger`) and the trigger names so far.
    fn take_arrow(&mut self) -> PyResult<(crate::arrow::bindings::ArrowBlock, Vec<String>)> {
        let columns =
            self.inner.columns.as_mut().ok_or_else(|| PyValueError::new_err("not a recorder"))?;
        let block = crate::arrow::bindings::ArrowBlock::new(columns.take_arrow());
        Ok((block, columns.trigger_names.clone()))
    }

    /// The derive pass over the records between the separators at `buf[pos]` and `buf[end]`.
    /// Returns `(rs, re, latest, latest_other, checked, visited)`: `rs`, `re` the separators of
    /// a record the caller must handle (-1 when the pass finished), then the trace's
    /// time-order state. `no_states`: the caller's own search of the region for the
    /// explicit-state needle found nothing (the scan does not search for it again).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (buf, pos, end, sep, scale, latest, latest_other, feed, no_states=false))]
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
        no_states: bool,
    ) -> PyResult<ScanOut> {
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
        let out = scan::scan_region(
            &mut self.inner,
            bytes,
            pos,
            end,
            sep,
            scale,
            order,
            feed,
            resume,
            no_states,
        );
        if let (Some((rs, re)), Some(cursor)) = (out.fallback, out.cursor) {
            let fingerprint = fingerprint(&bytes[rs..=re]);
            self.resume =
                Some(Resume { ptr, len: bytes.len(), end, sep, rs, re, fingerprint, cursor });
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
pub(crate) fn separated(view: &PyBuffer<u8>, a: usize, b: usize, sep: u8) -> PyResult<&[u8]> {
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

/// How many records lie between the separators at `buf[a]` and `buf[b]`, counted as
/// `quicsm.qlog.seq.SeqScanner._segment` counts them in Python (`scan::count_records`).
#[pyfunction]
fn count_records(buf: &Bound<'_, PyAny>, a: usize, b: usize, sep: u8) -> PyResult<usize> {
    let view = PyBuffer::<u8>::get(buf)?;
    let bytes = separated(&view, a, b, sep)?;
    Ok(scan::count_records(bytes, a, b, sep))
}

/// What `Deriver.scan` returns: `(rs, re, latest, latest_other, checked, visited)`.
type ScanOut = (i64, i64, Option<f64>, Option<f64>, bool, u64);

/// What `contained_events` returns: `(next, events, lines, again, previous, first_time,
/// last_time, latest, last_derive_time, counts, states)`.
type ContainedOut = (
    usize,
    u64,
    u64,
    bool,
    f64,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Option<f64>,
    Vec<(String, u64)>,
    Vec<(f64, String, Option<String>, Option<String>)>,
);

/// The events of a contained-JSON `events` array from `buf[start]` (just after its `[` or a
/// comma) up to `buf[end]` (exclusive: the bytes held), read natively while each is one the Python parser would read the same way
/// (`native/src/contained.rs`); the trace's clock comes in and goes out. `deriver`: fed the
/// metric, loss and PTO events (`None`: checked only). Returns where the next element begins,
/// how many events were read and the line feeds in them, whether to call again from there at once (after a state when
/// `stop_at_state`, or when the call's table of event names is full), the clock, the event
/// names with their counts and the explicit states read.
#[allow(clippy::too_many_arguments)]
#[pyfunction]
#[pyo3(signature = (buf, start, end, max_record_bytes, scale, delta, previous, first_time, last_time,
    latest, last_derive_time, repairs_backward, stop_at_state, deriver=None))]
fn contained_events(
    buf: &Bound<'_, PyAny>,
    start: usize,
    end: usize,
    max_record_bytes: usize,
    scale: f64,
    delta: bool,
    previous: f64,
    first_time: Option<f64>,
    last_time: Option<f64>,
    latest: Option<f64>,
    last_derive_time: Option<f64>,
    repairs_backward: bool,
    stop_at_state: bool,
    deriver: Option<&Bound<'_, PyDeriver>>,
) -> PyResult<ContainedOut> {
    let view = PyBuffer::<u8>::get(buf)?;
    if !view.is_c_contiguous() {
        return Err(PyValueError::new_err("buf must be contiguous"));
    }
    let len = view.len_bytes();
    if start > end || end > len {
        return Err(PyValueError::new_err("start <= end <= len(buf) is required"));
    }
    // SAFETY: as in `separated`: the buffer stays exported and the GIL held while it is read
    let bytes = unsafe { std::slice::from_raw_parts(view.buf_ptr() as *const u8, end) };
    let mut clock = contained::Clock {
        scale,
        delta,
        previous,
        first_time,
        last_time,
        latest,
        last_derive_time,
        repairs_backward,
    };
    let mut guard = match deriver {
        Some(d) => Some(d.try_borrow_mut()?),
        None => None,
    };
    let inner = guard.as_mut().map(|g| &mut g.inner);
    let out = contained::events(inner, bytes, start, max_record_bytes, &mut clock, stop_at_state);
    let counts = out
        .counts
        .into_iter()
        .map(|(name, n)| (String::from_utf8_lossy(&name).into_owned(), n))
        .collect();
    let states = out.states.into_iter().map(|s| (s.time, s.new, s.old, s.trigger)).collect();
    Ok((
        out.next,
        out.events,
        out.lines,
        out.stop == contained::Stop::Again,
        clock.previous,
        clock.first_time,
        clock.last_time,
        clock.latest,
        clock.last_derive_time,
        counts,
        states,
    ))
}

/// `(rs, re)` of each record between the separators at `buf[a]` and `buf[b]` that holds one
/// of `needles`, in file order and each once, as native-endian int64 pairs (bytes).
#[pyfunction]
fn packet_candidates(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    a: usize,
    b: usize,
    sep: u8,
    needles: Vec<Vec<u8>>,
) -> PyResult<Py<PyBytes>> {
    let view = PyBuffer::<u8>::get(buf)?;
    let bytes = separated(&view, a, b, sep)?;
    let pairs: Vec<[u64; 2]> = packets::records_with_any(bytes, a, b, sep, &needles)
        .into_iter()
        .map(|(rs, re)| [rs as u64, re as u64])
        .collect();
    Ok(bytes_of(py, &pairs))
}

/// What `packet_records` returns: `(stop, first_scid, bytes, columns, losses, clock)`.
type PacketsOut = (usize, Option<String>, [i64; 4], Vec<Py<PyBytes>>, LossesOut, ClockOut);
/// The losses read: times (float64), numbers (int64), trigger codes (uint16) and the triggers.
type LossesOut = (Py<PyBytes>, Py<PyBytes>, Py<PyBytes>, Vec<String>);
/// The clock after them: `(bound, latest, last_derive, moved)` (`packets::Clock`).
type ClockOut = (Option<f64>, Option<f64>, Option<f64>, bool);

/// The packet events among `records` (from `packet_candidates`), from the `start`-th on, read
/// into columns until one is the Python reader's (`native/src/packets.rs`). `first_scid`: the
/// trace's first source connection ID so far; `row_base`: its packet rows so far. Returns
/// where it stopped (the number of records: at the end), the first source connection ID, the
/// ack-eliciting bytes of the rows read (by sent, from the first sender) and the columns as
/// bytes: times (float64), numbers (int64), flags (uint8), ACK rows, lowest, highest (int64),
/// stream times (float64), sent, stream, offset, length, number (int64), limit times
/// (float64), sent, stream, maximum (int64), blocked times (float64), sent, stream, limit
/// (int64). With `losses`, the `packet_lost` events of the 1-RTT space are read too (their
/// times checked against `clock`: `(bound, latest, last_derive)`, `packets::Clock`), returned
/// as times, numbers, trigger codes (0: none, else 1 + the index in the triggers returned) and
/// the clock after them; without it they are the Python reader's, as before.
#[pyfunction]
#[pyo3(signature = (buf, records, start, scale, first_scid, row_base, losses=false, clock=(None, None, None)))]
#[allow(clippy::too_many_arguments)]
fn packet_records(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    records: &[u8],
    start: usize,
    scale: f64,
    first_scid: Option<String>,
    row_base: i64,
    losses: bool,
    clock: (Option<f64>, Option<f64>, Option<f64>),
) -> PyResult<PacketsOut> {
    let view = PyBuffer::<u8>::get(buf)?;
    if !view.is_c_contiguous() {
        return Err(PyValueError::new_err("buf must be contiguous"));
    }
    // SAFETY: as in `separated`: the buffer stays exported and the GIL held while it is read
    let bytes =
        unsafe { std::slice::from_raw_parts(view.buf_ptr() as *const u8, view.len_bytes()) };
    let mut rows = packets::PacketRows::default();
    let mut scid = first_scid.map(String::into_bytes);
    let mut lost = packets::Losses::default();
    let mut clock =
        packets::Clock { bound: clock.0, latest: clock.1, last_derive: clock.2, moved: false };
    let stop = packets::packet_records(
        bytes,
        records,
        start,
        scale,
        &mut rows,
        row_base,
        &mut scid,
        if losses { Some(&mut lost) } else { None },
        &mut clock,
    )
    .map_err(|_| PyValueError::new_err("records are not (rs, re) pairs of buf"))?;
    let (scid, columns) = packet_columns(py, rows, scid)?;
    let triggers = lost
        .triggers
        .into_iter()
        .map(|t| String::from_utf8(t).map_err(|_| PyValueError::new_err("trigger")))
        .collect::<PyResult<Vec<String>>>()?;
    let lost_out = (
        bytes_of(py, &lost.times),
        bytes_of(py, &lost.numbers),
        bytes_of(py, &lost.codes),
        triggers,
    );
    let clock_out = (clock.bound, clock.latest, clock.last_derive, clock.moved);
    Ok((stop, scid, columns.0, columns.1, lost_out, clock_out))
}

/// The rows read and the first source connection ID, as `packet_records` returns them.
#[allow(clippy::type_complexity)]
fn packet_columns(
    py: Python<'_>,
    rows: packets::PacketRows,
    scid: Option<Vec<u8>>,
) -> PyResult<(Option<String>, ([i64; 4], Vec<Py<PyBytes>>))> {
    let scid = match scid {
        Some(s) => Some(String::from_utf8(s).map_err(|_| PyValueError::new_err("scid"))?),
        None => None,
    };
    let mut columns = vec![
        bytes_of(py, &rows.times),
        bytes_of(py, &rows.numbers),
        bytes_of(py, &rows.flags),
        bytes_of(py, &rows.ack_of),
        bytes_of(py, &rows.ack_lo),
        bytes_of(py, &rows.ack_hi),
        bytes_of(py, &rows.stream_times),
    ];
    columns.extend(rows.stream.iter().map(|c| bytes_of(py, c)));
    columns.push(bytes_of(py, &rows.limit_times));
    columns.extend(rows.limits.iter().map(|c| bytes_of(py, c)));
    columns.push(bytes_of(py, &rows.blocked_times));
    columns.extend(rows.blocked.iter().map(|c| bytes_of(py, c)));
    Ok((scid, (rows.bytes, columns)))
}

/// What `packet_event` returns: `(name, time, first_scid, bytes, columns)`.
type PacketOut = (String, f64, Option<String>, [i64; 4], Vec<Py<PyBytes>>);

/// One event (a contained-JSON element: `record` its bytes) read as `packet_records` reads a
/// record: `(name, time, first_scid, bytes, columns)`, or None when it is the Python reader's.
#[pyfunction]
#[pyo3(signature = (record, scale, first_scid, row_base))]
fn packet_event(
    py: Python<'_>,
    record: &[u8],
    scale: f64,
    first_scid: Option<String>,
    row_base: i64,
) -> PyResult<Option<PacketOut>> {
    let mut rows = packets::PacketRows::default();
    let mut scid = first_scid.map(String::into_bytes);
    if crate::scan::may_be_over_budget(record) {
        return Ok(None);
    }
    let name = match packets::packet_record(
        record,
        scale,
        &mut rows,
        row_base,
        &mut scid,
        &mut Vec::new(),
    ) {
        Ok(name) => String::from_utf8_lossy(name).into_owned(), // ASCII (`event_kind`)
        Err(_) => return Ok(None),
    };
    let time = rows.times[0];
    let (scid, columns) = packet_columns(py, rows, scid)?;
    Ok(Some((name, time, scid, columns.0, columns.1)))
}

/// The tables this build was generated with (`quicsm/core/tables.json` through `build.rs`), as
/// Python objects: tests compare them with the Python modules' own.
#[pyfunction]
#[pyo3(name = "tables")]
fn shared_tables(py: Python<'_>) -> PyResult<Py<PyDict>> {
    let d = PyDict::new(py);
    d.set_item("states", tables::STATE_NAMES.to_vec())?;
    d.set_item("event_classes", tables::EVENT_CLASS_NAMES.to_vec())?;
    d.set_item("feed_kinds", tables::FEED_KIND_NAMES.to_vec())?;
    d.set_item("metric_keys", tables::METRIC_KEYS.to_vec())?;
    d.set_item("time_metrics", tables::TIME_METRICS.to_vec())?;
    let names: Vec<(String, usize)> = tables::METRIC_NAMES
        .iter()
        .map(|(n, i)| (String::from_utf8_lossy(n).into_owned(), *i))
        .collect();
    d.set_item("metric_names", names)?;
    let app: Vec<String> =
        tables::APP_LIMITED_NAMES.iter().map(|n| String::from_utf8_lossy(n).into_owned()).collect();
    d.set_item("app_limited_fields", app)?;
    let kinds: Vec<(String, &str)> = tables::EVENT_KIND_NAMES
        .iter()
        .map(|(n, _, k)| (String::from_utf8_lossy(n).into_owned(), *k))
        .collect();
    d.set_item("event_kinds", kinds)?;
    let needles: Vec<String> =
        tables::DERIVE_NEEDLES.iter().map(|n| String::from_utf8_lossy(n).into_owned()).collect();
    d.set_item("derive_needles", needles)?;
    d.set_item(
        "timer_needle",
        String::from_utf8_lossy(tables::DERIVE_NEEDLES[tables::TIMER_NEEDLE_AT]),
    )?;
    d.set_item("state_needle", String::from_utf8_lossy(tables::STATE_NEEDLE))?;
    d.set_item("timer_required", String::from_utf8_lossy(tables::TIMER_REQUIRED))?;
    d.set_item("max_record_values", tables::MAX_RECORD_VALUES)?;
    let indices = PyDict::new(py);
    for (name, value) in [
        ("INIT", tables::INIT as usize),
        ("SLOW_START", tables::SLOW_START as usize),
        ("CONGESTION_AVOIDANCE", tables::CONGESTION_AVOIDANCE as usize),
        ("CONGESTION_AVOIDANCE_MAXED", tables::CONGESTION_AVOIDANCE_MAXED as usize),
        ("RECOVERY", tables::RECOVERY as usize),
        ("ACK", tables::ACK as usize),
        ("SEND", tables::SEND as usize),
        ("CUTBACK", tables::CUTBACK as usize),
        ("COLLAPSE", tables::COLLAPSE as usize),
        ("LOSS", tables::LOSS as usize),
        ("PTO", tables::PTO as usize),
        ("UNDO", tables::UNDO as usize),
        ("FLAG", tables::FLAG as usize),
        ("CWND_BYTES", tables::CWND_BYTES),
        ("BYTES_IN_FLIGHT", tables::BYTES_IN_FLIGHT),
        ("SSTHRESH_BYTES", tables::SSTHRESH_BYTES),
        ("SMOOTHED_RTT_MS", tables::SMOOTHED_RTT_MS),
        ("LATEST_RTT_MS", tables::LATEST_RTT_MS),
        ("RTT_VARIANCE_MS", tables::RTT_VARIANCE_MS),
        ("PTO_COUNT", tables::PTO_COUNT),
    ] {
        indices.set_item(name, value)?;
    }
    d.set_item("indices", indices)?;
    d.set_item("conditions", deriver::Cond::NAMES.to_vec())?;
    Ok(d.unbind())
}

#[pymodule]
#[pyo3(name = "_native")]
fn native_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDeriver>()?;
    m.add_class::<crate::arrow::bindings::ArrowBlock>()?;
    m.add_class::<crate::arrow::bindings::ArrowColumn>()?;
    m.add_function(wrap_pyfunction!(crate::arrow::bindings::concat_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(header_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(records_with, m)?)?;
    m.add_function(wrap_pyfunction!(count_records, m)?)?;
    m.add_function(wrap_pyfunction!(contained_events, m)?)?;
    m.add_function(wrap_pyfunction!(crate::census::bindings::census_records, m)?)?;
    m.add_function(wrap_pyfunction!(packet_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(packet_records, m)?)?;
    m.add_function(wrap_pyfunction!(packet_event, m)?)?;
    m.add_function(wrap_pyfunction!(shared_tables, m)?)?;
    m.add_function(wrap_pyfunction!(crate::sendable::bindings::sendable_timeline, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
