//! Why a sender had nothing to send, over time: the native form of
//! `quicsm.extract.sendable.sendable_timeline`, which stays the reference.
//!
//! It takes one trace's frames as columns (the STREAM frames, the MAX_DATA / MAX_STREAM_DATA
//! frames and the DATA_BLOCKED / STREAM_DATA_BLOCKED frames, each with its time and whether the
//! log owner sent it) and the peer's initial limits (RFC 9000 section 18.2), and gives the cause
//! of being short of data at every moment as piecewise-constant segments, exactly as the Python
//! function does: the same events in the same order (its tuples sorted, a stable sort), the
//! same arithmetic (offsets summed in 128 bits, so no sum of 64-bit values can overflow where
//! Python's integers would not) and the same segments. The Python wrapper hands a trace to the
//! Python function instead when a value does not fit these columns (an integer beyond 64 bits,
//! a time that is not a number).

use std::cmp::Ordering;
use std::collections::HashMap;

/// The causes, coded as their place in `quicsm.extract.sendable.CAUSES`.
pub const APPLICATION: u8 = 0;
pub const FLOW_CONTROL_CONNECTION: u8 = 1;
pub const FLOW_CONTROL_STREAM: u8 = 2;
pub const UNKNOWN: u8 = 4;

/// One kind of frame as columns: times (ms), whether the log owner sent it, the stream (-1:
/// the connection) and a value (a STREAM frame's end, offset + length; a limit).
pub struct Frames<'a> {
    pub times: &'a [f64],
    pub sent: &'a [bool],
    pub streams: &'a [i64],
    pub values: &'a [i128],
}

/// The peer's initial limits (its transport parameters), each None when not logged.
#[derive(Default, Clone, Copy)]
pub struct Initial {
    pub max_data: Option<i64>,
    pub stream_data_bidi_local: Option<i64>,
    pub stream_data_bidi_remote: Option<i64>,
    pub stream_data_uni: Option<i64>,
}

/// The segments: `times[i]` starts segment `i`, `causes[i]` is its cause, `logged[i]` whether
/// a *_BLOCKED frame the owner sent says so; and the bytes the owner sent (highest offsets
/// summed over streams) and the *_BLOCKED frames it sent.
#[derive(Debug, Default, PartialEq)]
pub struct Timeline {
    pub times: Vec<f64>,
    pub causes: Vec<u8>,
    pub logged: Vec<bool>,
    pub bytes_sent: i128,
    pub blocked_frames: u64,
}

/// The peer's initial limit on the owner's sending on `stream` (bidi_local applies to streams
/// the peer opened, bidi_remote to streams the owner opened, section 18.2).
fn stream_limit(stream: i64, owner_opened: bool, peer: &Initial) -> Option<i64> {
    if stream & 2 != 0 {
        peer.stream_data_uni
    } else if owner_opened {
        peer.stream_data_bidi_remote
    } else {
        peer.stream_data_bidi_local
    }
}

/// An event: (time, order at equal times = kind, stream, value), compared as Python compares
/// the tuples (no time is NaN: the caller sees to it).
type Event = (f64, u8, i64, i128);

fn compare(a: &Event, b: &Event) -> Ordering {
    a.0.partial_cmp(&b.0)
        .unwrap_or(Ordering::Equal)
        .then(a.1.cmp(&b.1))
        .then(a.2.cmp(&b.2))
        .then(a.3.cmp(&b.3))
}

/// The timeline of one trace (`streams`: its STREAM frames, `limits`: its MAX_* frames,
/// `blocked`: its *_BLOCKED frames, in the order they were read; times from `start`), or None
/// when it holds no STREAM frame either way.
pub fn sendable_timeline(
    streams: &Frames<'_>,
    limits: &Frames<'_>,
    blocked: &Frames<'_>,
    peer: &Initial,
    start: f64,
) -> Option<Timeline> {
    if streams.times.is_empty() {
        return None;
    }
    // each stream's final end (sent frames only), and who sent its first frame (either way)
    let mut last: HashMap<i64, i128> = HashMap::new();
    let mut owner_opened: HashMap<i64, bool> = HashMap::new();
    for i in 0..streams.times.len() {
        let s = streams.streams[i];
        owner_opened.entry(s).or_insert(streams.sent[i]);
        if streams.sent[i] {
            let end = last.entry(s).or_insert(0);
            *end = (*end).max(streams.values[i]);
        }
    }
    let mut events: Vec<Event> = Vec::new();
    for i in 0..limits.times.len() {
        if !limits.sent[i] {
            events.push((limits.times[i], 0, limits.streams[i], limits.values[i]));
        }
    }
    for i in 0..streams.times.len() {
        if streams.sent[i] {
            events.push((streams.times[i], 1, streams.streams[i], streams.values[i]));
        }
    }
    let mut blocked_frames = 0u64;
    for i in 0..blocked.times.len() {
        if blocked.sent[i] {
            blocked_frames += 1;
            events.push((blocked.times[i], 2, blocked.streams[i], blocked.values[i]));
        }
    }
    events.sort_by(compare); // stable, as Python's sort
    let mut connection_limit: Option<i128> = peer.max_data.map(i128::from);
    let mut stream_limits: HashMap<i64, Option<i128>> = last
        .keys()
        .map(|&s| (s, stream_limit(s, owner_opened[&s], peer).map(i128::from)))
        .collect();
    let final_total: i128 = last.values().sum();
    let mut sent_end: HashMap<i64, i128> = HashMap::new();
    let mut total: i128 = 0;
    let mut said_connection: Option<i128> = None;
    let mut said_stream: HashMap<i64, i128> = HashMap::new();
    let mut out = Timeline { blocked_frames, ..Timeline::default() };

    let cause = |total: i128,
                 said_connection: Option<i128>,
                 connection_limit: Option<i128>,
                 sent_end: &HashMap<i64, i128>,
                 said_stream: &HashMap<i64, i128>,
                 stream_limits: &HashMap<i64, Option<i128>>|
     -> (u8, bool) {
        if total == 0 || total >= final_total {
            return (APPLICATION, false);
        }
        if said_connection.is_some() {
            return (FLOW_CONTROL_CONNECTION, true);
        }
        if matches!(connection_limit, Some(limit) if total >= limit) {
            return (FLOW_CONTROL_CONNECTION, false);
        }
        let mut arithmetic = false;
        for (s, &end) in sent_end {
            if end >= last[s] {
                continue;
            }
            if said_stream.contains_key(s) {
                return (FLOW_CONTROL_STREAM, true);
            }
            let bound = stream_limits.get(s).copied().flatten();
            arithmetic = arithmetic || matches!(bound, Some(b) if end >= b);
        }
        if arithmetic {
            (FLOW_CONTROL_STREAM, false)
        } else {
            (UNKNOWN, false)
        }
    };
    let mark = |out: &mut Timeline, t: f64, (c, by_frame): (u8, bool)| {
        if out.causes.last() == Some(&c) && out.logged.last() == Some(&by_frame) {
            return;
        }
        if out.times.last() == Some(&t) {
            out.times.pop();
            out.causes.pop();
            out.logged.pop();
            if out.causes.last() == Some(&c) && out.logged.last() == Some(&by_frame) {
                return;
            }
        }
        out.times.push(t);
        out.causes.push(c);
        out.logged.push(by_frame);
    };

    let now =
        cause(total, said_connection, connection_limit, &sent_end, &said_stream, &stream_limits);
    mark(&mut out, 0.0, now);
    let mut i = 0;
    while i < events.len() {
        let t = events[i].0;
        while i < events.len() && events[i].0 == t {
            let (_, kind, stream, value) = events[i];
            i += 1;
            match kind {
                0 => {
                    // MAX_DATA (stream -1) or MAX_STREAM_DATA received
                    if stream == -1 {
                        connection_limit = Some(connection_limit.unwrap_or(0).max(value));
                        if matches!(said_connection, Some(said) if value > said) {
                            said_connection = None;
                        }
                    } else {
                        let before = stream_limits.get(&stream).copied().flatten().unwrap_or(0);
                        stream_limits.insert(stream, Some(before.max(value)));
                        if matches!(said_stream.get(&stream), Some(&said) if value > said) {
                            said_stream.remove(&stream);
                        }
                    }
                }
                1 => {
                    // a STREAM frame sent: its end raises the highest offset
                    let before = sent_end.get(&stream).copied().unwrap_or(0);
                    if value > before {
                        sent_end.insert(stream, value);
                        total += value - before;
                    }
                    if matches!(said_stream.get(&stream), Some(&said) if value > said) {
                        said_stream.remove(&stream); // sent past the limit: credit came unseen
                    }
                    if matches!(said_connection, Some(said) if total > said) {
                        said_connection = None;
                    }
                }
                _ => {
                    if stream == -1 {
                        said_connection = Some(value); // DATA_BLOCKED sent
                    } else {
                        said_stream.insert(stream, value); // STREAM_DATA_BLOCKED sent
                    }
                }
            }
        }
        let now = cause(
            total,
            said_connection,
            connection_limit,
            &sent_end,
            &said_stream,
            &stream_limits,
        );
        mark(&mut out, t - start, now);
    }
    out.bytes_sent = total;
    Some(out)
}

#[cfg(feature = "python")]
pub(crate) mod bindings {
    use pyo3::exceptions::PyValueError;
    use pyo3::prelude::*;
    use pyo3::pybacked::PyBackedBytes;
    use pyo3::types::PyBytes;

    use super::{sendable_timeline as timeline, Frames, Initial};

    /// One kind of frame's columns, owned: times, sent, streams, values.
    type Columns = (Vec<f64>, Vec<bool>, Vec<i64>, Vec<i128>);

    /// What `sendable_timeline` returns: None (no STREAM frame), or `(times as float64 bytes,
    /// causes as uint8 bytes, logged as uint8 bytes, bytes_sent, blocked_frames)`.
    type SendableOut = Option<(Py<PyBytes>, Py<PyBytes>, Py<PyBytes>, i128, u64)>;

    fn floats(raw: &[u8]) -> PyResult<Vec<f64>> {
        if !raw.len().is_multiple_of(8) {
            return Err(PyValueError::new_err("a float64 column's length is not a multiple of 8"));
        }
        Ok(raw.chunks_exact(8).map(|b| f64::from_ne_bytes(b.try_into().unwrap())).collect())
    }

    fn ints(raw: &[u8]) -> PyResult<Vec<i64>> {
        if !raw.len().is_multiple_of(8) {
            return Err(PyValueError::new_err("an int64 column's length is not a multiple of 8"));
        }
        Ok(raw.chunks_exact(8).map(|b| i64::from_ne_bytes(b.try_into().unwrap())).collect())
    }

    /// Columns `(times float64, sent int64, stream int64, value int64[, value2 int64])` as
    /// frames; with `value2` each value is the sum of the two (a STREAM frame's offset +
    /// length), in 128 bits.
    fn frames(columns: &[PyBackedBytes], summed: bool) -> PyResult<Columns> {
        let want = if summed { 5 } else { 4 };
        if columns.len() != want {
            return Err(PyValueError::new_err(format!("expected {want} columns")));
        }
        let times = floats(&columns[0])?;
        let sent: Vec<bool> = ints(&columns[1])?.into_iter().map(|v| v != 0).collect();
        let streams = ints(&columns[2])?;
        let mut values: Vec<i128> = ints(&columns[3])?.into_iter().map(i128::from).collect();
        if summed {
            for (v, w) in values.iter_mut().zip(ints(&columns[4])?) {
                *v += i128::from(w);
            }
        }
        let n = times.len();
        if sent.len() != n || streams.len() != n || values.len() != n {
            return Err(PyValueError::new_err("columns of different lengths"));
        }
        if times.iter().any(|t| t.is_nan()) {
            return Err(PyValueError::new_err("a time is not a number"));
        }
        Ok((times, sent, streams, values))
    }

    fn view(f: &Columns) -> Frames<'_> {
        Frames { times: &f.0, sent: &f.1, streams: &f.2, values: &f.3 }
    }

    /// The sendable timeline of one trace (`native/src/sendable.rs`): `streams` the STREAM
    /// frames' columns (time, sent, stream, offset, length), `limits` the MAX_* frames' (time,
    /// sent, stream or -1, maximum), `blocked` the *_BLOCKED frames' (time, sent, stream or -1,
    /// limit); `initial` the peer's initial max_data, max_stream_data bidi_local, bidi_remote
    /// and uni; times from `start`.
    #[pyfunction]
    #[pyo3(signature = (streams, limits, blocked, initial, start))]
    pub(crate) fn sendable_timeline(
        py: Python<'_>,
        streams: Vec<PyBackedBytes>,
        limits: Vec<PyBackedBytes>,
        blocked: Vec<PyBackedBytes>,
        initial: (Option<i64>, Option<i64>, Option<i64>, Option<i64>),
        start: f64,
    ) -> PyResult<SendableOut> {
        let s = frames(&streams, true)?;
        let l = frames(&limits, false)?;
        let b = frames(&blocked, false)?;
        let peer = Initial {
            max_data: initial.0,
            stream_data_bidi_local: initial.1,
            stream_data_bidi_remote: initial.2,
            stream_data_uni: initial.3,
        };
        let made = py.allow_threads(|| timeline(&view(&s), &view(&l), &view(&b), &peer, start));
        Ok(made.map(|t| {
            let times: Vec<u8> = t.times.iter().flat_map(|v| v.to_ne_bytes()).collect();
            let logged: Vec<u8> = t.logged.iter().map(|&v| u8::from(v)).collect();
            (
                PyBytes::new(py, &times).unbind(),
                PyBytes::new(py, &t.causes).unbind(),
                PyBytes::new(py, &logged).unbind(),
                t.bytes_sent,
                t.blocked_frames,
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames<'a>(t: &'a [f64], sent: &'a [bool], s: &'a [i64], v: &'a [i128]) -> Frames<'a> {
        Frames { times: t, sent, streams: s, values: v }
    }

    #[test]
    fn no_stream_frame_gives_none() {
        let none = frames(&[], &[], &[], &[]);
        assert_eq!(sendable_timeline(&none, &none, &none, &Initial::default(), 0.0), None);
    }

    #[test]
    fn credit_arithmetic_and_a_blocked_frame() {
        // stream 0: 100 bytes to send, the connection limit 50 until MAX_DATA 200 at t=30
        let st = frames(&[10.0, 20.0, 40.0], &[true, true, true], &[0, 0, 0], &[25, 50, 100]);
        let li = frames(&[30.0], &[false], &[-1], &[200]);
        let bl = frames(&[25.0], &[true], &[-1], &[50]);
        let peer = Initial { max_data: Some(50), ..Initial::default() };
        let t = sendable_timeline(&st, &li, &bl, &peer, 0.0).unwrap();
        assert_eq!(t.times, vec![0.0, 10.0, 20.0, 25.0, 30.0, 40.0]);
        assert_eq!(
            t.causes,
            vec![
                APPLICATION,
                UNKNOWN,
                FLOW_CONTROL_CONNECTION,
                FLOW_CONTROL_CONNECTION,
                UNKNOWN,
                APPLICATION
            ]
        );
        assert_eq!(t.logged, vec![false, false, false, true, false, false]);
        assert_eq!(t.bytes_sent, 100);
        assert_eq!(t.blocked_frames, 1);
    }
}
