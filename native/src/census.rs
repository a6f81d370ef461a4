//! Every record of a region read in full and counted: what `quicsm inspect` reports of a
//! JSON-SEQ/NDJSON trace, read natively (`SeqScanner._full_region` in `quicsm/qlog/seq.py`).
//!
//! [`records`] reads the records between two separators one after another, each exactly as the
//! Python full read would (`orjson.loads`, `object_event`, `TraceBuilder.event_time`,
//! `observe` and `add`): it counts the events and their names, keeps the trace's clock and the
//! explicit states, and sees what each event shows of the trace's capabilities
//! (`quicsm.extract.capabilities.from_events`, and the packet events and ACK frames its packet
//! hook counts). It stops at the first record it cannot read so (a header, a problem, anything
//! it does not mirror exactly: see [`crate::record`]) and returns where that record begins; the
//! Python reader reads it and calls again after it. Both give the same traces, counts, problems
//! and capabilities, and every record is parsed here at most once.

use crate::contained::{may_be_over_budget, state_fields, text, Clock, State};
use crate::deriver::{Event, Kind};
use crate::record::{blank_event, event_kind, parts, Data, Fallback, Parser};
use crate::tables::{
    EventKind, BYTES_IN_FLIGHT, CWND_BYTES, LATEST_RTT_MS, PTO_COUNT, SSTHRESH_BYTES,
};

/// The capabilities an event shows, as bits in the order of
/// `quicsm.extract.capabilities.CAPABILITIES` (packets and ACK frames are counted instead).
pub const METRICS: u32 = 1;
pub const CWND: u32 = 1 << 1;
pub const SSTHRESH: u32 = 1 << 2;
pub const IN_FLIGHT: u32 = 1 << 3;
pub const RTT: u32 = 1 << 4;
pub const PTO: u32 = 1 << 5;
pub const LOSSES: u32 = 1 << 6;
pub const APP_FLAG: u32 = 1 << 7;

/// The most distinct event names one call counts (a call stops before another)
pub const MAX_NAMES: usize = 64;

/// What the trace's readers want besides the counts.
#[derive(Clone, Copy, Debug)]
pub struct Wants {
    /// see capabilities (else metric, loss and timer events are only checked)
    pub capabilities: bool,
    /// a slow-start threshold at or above this is "unset" (the producer's profile)
    pub ssthresh_unset_from: f64,
    /// an ACK frame was seen already (packet events are not looked into for one)
    pub ack_seen: bool,
}

/// The event names of one call: each with its kind, whether it is a packet event, its count.
#[derive(Default)]
struct Names {
    seen: Vec<(Vec<u8>, Option<EventKind>, bool, u64)>,
    last: usize,
    /// events read, and those of a kind whose `data` the deriver reads
    events: u64,
    relevant: u64,
}

/// `packet_sent`, `packet_received` and qlog 0.1's `PACKET_TX`/`PACKET_RX`: the part of an
/// ASCII name after its last ':', in any case (`quicsm.qlog.trace.PACKET_EVENTS`).
fn is_packet_event(name: &[u8]) -> bool {
    let tail = match memchr::memrchr(b':', name) {
        Some(i) => &name[i + 1..],
        None => name,
    };
    [&b"packet_sent"[..], b"packet_received", b"packet_tx", b"packet_rx"]
        .iter()
        .any(|n| tail.eq_ignore_ascii_case(n))
}

impl Names {
    /// Whether to read `data`'s members the deriver reads while parsing the event (else it is
    /// only checked, and read again for the events that need it): chosen by how many of the
    /// events so far needed it. Either way gives the same reading; this is only the cheaper
    /// one.
    fn eager(&self) -> bool {
        self.relevant * 4 > self.events
    }

    /// The index of `name` (added if new), `Ok(None)` when the table is full, `Fallback` for
    /// a name whose kind is Python's to tell (not ASCII).
    fn find(&mut self, name: &[u8]) -> Result<Option<usize>, Fallback> {
        if let Some((n, ..)) = self.seen.get(self.last) {
            if n.as_slice() == name {
                return Ok(Some(self.last));
            }
        }
        if let Some(i) = self.seen.iter().position(|(n, ..)| n.as_slice() == name) {
            self.last = i;
            return Ok(Some(i));
        }
        if self.seen.len() >= MAX_NAMES {
            return Ok(None);
        }
        let kind = event_kind(name)?; // not ASCII: Fallback
        self.seen.push((name.to_vec(), kind, is_packet_event(name), 0));
        self.last = self.seen.len() - 1;
        Ok(Some(self.last))
    }
}

pub struct Outcome {
    /// the separator opening the record the Python reader must read (`end` when every record
    /// up to `end` was read, or when `again`)
    pub stop: usize,
    /// the names table is full: call again from `stop`
    pub again: bool,
    /// the events read (`TraceBuilder.n_events`)
    pub events: u64,
    /// each event name read, with its count (`TraceBuilder.counts`)
    pub counts: Vec<(Vec<u8>, u64)>,
    pub states: Vec<State>,
    /// capability bits seen ([`METRICS`] ...)
    pub capabilities: u32,
    /// packet events read, and whether one of them held an ACK frame (looked for until one
    /// does)
    pub packets: u64,
    pub ack_frames: bool,
}

/// Whether a frame object (at `{`) is an ACK frame: its `frame_type` (or, without one, its
/// `type`) is a string that lower-cases to `ack` or `ack_ecn` (what the capability reader's
/// packet hook looks for: `str(value).lower()`, which only a string can make so).
fn ack_frame(p: &mut Parser) -> Result<bool, Fallback> {
    // per key: None absent; Some(None) present, not a string; Some(Some(s)) a string
    let mut frame_type: Option<Option<&[u8]>> = None;
    let mut other: Option<Option<&[u8]>> = None;
    p.object(|p, key, escaped| {
        if escaped {
            return Err(Fallback); // an escaped key may name either: Python's
        }
        let slot = match key {
            b"frame_type" => &mut frame_type,
            b"type" => &mut other,
            _ => return p.skip(4),
        };
        if slot.is_some() {
            return Err(Fallback); // a duplicate key: the last wins in Python, not mirrored
        }
        *slot = Some(if p.peek()? == b'"' {
            let (s, escaped) = p.string()?;
            if escaped || !s.is_ascii() {
                return Err(Fallback); // Unicode lower-casing is Python's
            }
            Some(s)
        } else {
            p.skip(4)?;
            None
        });
        Ok(())
    })?;
    let value = match frame_type {
        Some(v) => v,
        None => other.flatten(),
    };
    Ok(value.is_some_and(|v| v.eq_ignore_ascii_case(b"ack") || v.eq_ignore_ascii_case(b"ack_ecn")))
}

/// Whether a packet event's `data` object holds an ACK frame in its `frames` array.
fn has_ack_frame(data: &[u8]) -> Result<bool, Fallback> {
    let mut p = Parser { b: data, i: 0, lines: 0 };
    let mut found = false;
    let mut seen = false;
    p.object(|p, key, escaped| {
        if escaped {
            return Err(Fallback);
        }
        if key != b"frames" {
            return p.skip(2);
        }
        if seen {
            return Err(Fallback);
        }
        seen = true;
        if p.peek()? != b'[' {
            return p.skip(2); // not a list: no frames
        }
        p.i += 1;
        p.ws();
        if p.peek()? == b']' {
            p.i += 1;
            return Ok(());
        }
        loop {
            p.ws();
            if p.peek()? == b'{' {
                if ack_frame(p)? {
                    found = true;
                }
            } else {
                p.skip(3)?; // not an object: not a frame
            }
            p.ws();
            match p.peek()? {
                b',' => p.i += 1,
                b']' => {
                    p.i += 1;
                    return Ok(());
                }
                _ => return Err(Fallback),
            }
        }
    })?;
    Ok(found)
}

/// The capability bits of a metric, loss or PTO event (`from_events`).
fn event_capabilities(event: &Event, ssthresh_unset_from: f64) -> u32 {
    let mut bits = METRICS;
    match event.kind {
        Kind::PacketLost => bits |= LOSSES,
        Kind::Pto => bits |= PTO,
        _ => {}
    }
    let v = &event.values;
    if v[CWND_BYTES].is_some() {
        bits |= CWND;
    }
    if v[SSTHRESH_BYTES].is_some_and(|s| s < ssthresh_unset_from) {
        bits |= SSTHRESH;
    }
    if v[BYTES_IN_FLIGHT].is_some() {
        bits |= IN_FLIGHT;
    }
    if v[LATEST_RTT_MS].is_some_and(|r| r > 0.0) {
        bits |= RTT;
    }
    if v[PTO_COUNT].is_some() {
        bits |= PTO;
    }
    if event.app_limited.is_some() {
        bits |= APP_FLAG;
    }
    bits
}

/// What one record gave, before it is committed to the trace.
struct Read {
    time: f64,
    previous: f64,
    name: usize,
    state: Option<State>,
    capabilities: u32,
    packet: bool,
    ack: bool,
}

/// Reads one record (the bytes between two separators, not blank) against the clock without
/// changing it; `Ok(None)`: the names table is full.
fn read_record(
    rest: &[u8],
    sep: u8,
    clock: &Clock,
    wants: Wants,
    names: &mut Names,
    ack_seen: &bool,
    event: &mut Event,
) -> Result<Option<(Read, usize)>, Fallback> {
    let mut data = Data::new();
    let (parts, end) = parts(rest, names.eager(), &mut data)?; // no name or time (a header): Python's
                                                               // the record ends at the separator after the object and white space (a separator cannot
                                                               // occur within the object: the parser takes no control character in a string or between
                                                               // tokens, and an NDJSON caller ends ``rest`` at the line's end)
    let mut i = end;
    while let Some(&c) = rest.get(i) {
        if c == sep || !matches!(c, b' ' | b'\t' | b'\r' | b'\n') {
            break;
        }
        i += 1;
    }
    if rest.get(i) != Some(&sep) {
        return Err(Fallback); // more after the object: not one JSON text
    }
    let record = &rest[..i];
    if may_be_over_budget(record) {
        return Err(Fallback); // the Python reader counts its values and reports it
    }
    let name = match names.find(parts.name)? {
        Some(i) => i,
        None => return Ok(None),
    };
    let (kind, packet) = (names.seen[name].1, names.seen[name].2);
    // TraceBuilder.event_time, then observe
    let mut time = parts.time * clock.scale;
    let mut previous = clock.previous;
    if clock.delta {
        time += previous;
        previous = time;
    }
    if clock.latest.is_some_and(|latest| time < latest) {
        return Err(Fallback); // times going backwards: the Python reader reports it
    }
    let mut read = Read { time, previous, name, state: None, capabilities: 0, packet, ack: false };
    match kind {
        None => {
            if packet && wants.capabilities && !*ack_seen {
                if let Some((a, b)) = parts.data_span {
                    read.ack = has_ack_frame(&record[a..b])?;
                }
            }
        }
        Some(EventKind::State) => {
            let (a, b) = parts.data_span.ok_or(Fallback)?; // no data: Python's error
            let (new, old, trigger) = state_fields(&record[a..b])?;
            read.state = Some(State {
                time,
                new: text(new),
                old: old.map(text),
                trigger: trigger.map(text),
            });
        }
        Some(EventKind::MvfstMetric) => return Err(Fallback),
        Some(k) => {
            // checked as metric_event checks it; what it shows is seen
            if parts.event_in(record, &data, k, time, clock.scale, event)? {
                read.capabilities = event_capabilities(event, wants.ssthresh_unset_from);
            }
        }
    }
    Ok(Some((read, i)))
}

/// Whether a record holds only what `bytes.strip` removes (the Python reader skips it).
fn blank(record: &[u8]) -> bool {
    record.iter().all(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
}

/// Reads the records between the separators at `buf[pos]` and `buf[end]` of one trace, in
/// order, while each is one this module reads exactly as the Python full read would; see the
/// module. `clock` is the trace's, carried in and out.
pub fn records(
    buf: &[u8],
    mut pos: usize,
    end: usize,
    sep: u8,
    clock: &mut Clock,
    wants: Wants,
) -> Outcome {
    let mut out = Outcome {
        stop: end,
        again: false,
        events: 0,
        counts: Vec::new(),
        states: Vec::new(),
        capabilities: 0,
        packets: 0,
        ack_frames: false,
    };
    let mut names = Names::default();
    let mut ack_seen = wants.ack_seen;
    let mut event = blank_event(); // each metric event's, written in place
    while pos < end {
        // JSON-SEQ: the record's end is where its object ends (found by reading it); NDJSON:
        // the line's end, searched for first (white space between tokens may hold a line feed,
        // which ends an NDJSON record)
        let rest = if sep == b'\n' {
            let next = memchr::memchr(sep, &buf[pos + 1..=end]).map_or(end, |i| i + pos + 1);
            &buf[pos + 1..=next]
        } else {
            &buf[pos + 1..=end]
        };
        if rest[0] != b'{' {
            // empty or blank (skipped, as the Python reader skips it), or not an object
            let next = memchr::memchr(sep, rest).map_or(end, |i| i + pos + 1);
            if blank(&buf[pos + 1..next]) {
                pos = next;
                continue;
            }
        }
        let read = read_record(rest, sep, clock, wants, &mut names, &ack_seen, &mut event);
        let (read, next) = match read {
            Ok(Some((read, at))) => (read, pos + 1 + at),
            Ok(None) => {
                out.again = true;
                out.stop = pos;
                break;
            }
            Err(Fallback) => {
                out.stop = pos;
                break;
            }
        };
        // committed: n_events, observe, add
        let t = read.time;
        clock.previous = read.previous;
        if clock.first_time.is_none() {
            clock.first_time = Some(t);
        }
        clock.last_time = Some(t);
        if clock.latest.is_none_or(|l| t > l) {
            clock.latest = Some(t);
        }
        let kind = names.seen[read.name].1;
        if kind.is_some_and(|k| k != EventKind::State)
            && clock.last_derive_time.is_none_or(|l| t > l)
        {
            clock.last_derive_time = Some(t);
        }
        names.seen[read.name].3 += 1;
        names.events += 1;
        if kind.is_some_and(|k| k != EventKind::State) {
            names.relevant += 1;
        }
        out.events += 1;
        out.capabilities |= read.capabilities;
        if read.packet && kind.is_none() {
            out.packets += 1;
            if read.ack {
                out.ack_frames = true;
                ack_seen = true;
            }
        }
        if let Some(state) = read.state {
            out.states.push(state);
        }
        pos = next;
    }
    out.counts = names.seen.into_iter().filter(|s| s.3 > 0).map(|(n, _, _, c)| (n, c)).collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock() -> Clock {
        Clock { scale: 1.0, ..Default::default() }
    }

    const WANTS: Wants =
        Wants { capabilities: true, ssthresh_unset_from: f64::INFINITY, ack_seen: false };

    #[test]
    fn reads_events_and_stops_at_a_header() {
        let buf =
            b"\x1e{\"time\":1,\"name\":\"recovery:metrics_updated\",\"data\":{\"cwnd\":10}}\n\
            \x1e  \n\x1e{\"time\":2,\"name\":\"transport:packet_received\",\"data\":{\"frames\":\
            [{\"frame_type\":\"ACK\"}]}}\n\x1e{\"qlog_format\":\"JSON-SEQ\"}\n\x1e";
        let end = buf.len() - 1;
        let mut c = clock();
        let out = records(buf, 0, end, 0x1e, &mut c, WANTS);
        assert_eq!(out.events, 2);
        assert_eq!(out.capabilities, METRICS | CWND);
        assert_eq!((out.packets, out.ack_frames), (1, true));
        assert_eq!(&buf[out.stop + 1..out.stop + 3], b"{\"");
        assert!(!out.again);
        assert_eq!((c.first_time, c.last_time), (Some(1.0), Some(2.0)));
    }

    #[test]
    fn times_going_backwards_are_handed_back() {
        let buf = b"\x1e{\"time\":5,\"name\":\"a\"}\x1e{\"time\":4,\"name\":\"a\"}\x1e";
        let mut c = clock();
        let out = records(buf, 0, buf.len() - 1, 0x1e, &mut c, WANTS);
        assert_eq!(out.events, 1);
        assert_eq!(out.stop, buf.iter().skip(1).position(|&c| c == 0x1e).unwrap() + 1);
    }
}

/// The Python binding (`quicsm._native.census_records`), registered by `crate::python`.
#[cfg(feature = "python")]
pub(crate) mod bindings {
    use pyo3::buffer::PyBuffer;
    use pyo3::prelude::*;

    use super::{records, Clock, Wants};
    use crate::python::separated;

    /// What `census_records` returns: `(stop, again, events, (previous, first_time,
    /// last_time, latest, last_derive_time), counts, states, (capabilities, packets,
    /// ack_frames))`.
    type CensusOut = (
        usize,
        bool,
        u64,
        (f64, Option<f64>, Option<f64>, Option<f64>, Option<f64>),
        Vec<(String, u64)>,
        Vec<(f64, String, Option<String>, Option<String>)>,
        (u32, u64, bool),
    );

    /// The records of one trace between the separators at `buf[pos]` and `buf[end]`, each
    /// read in full (`native/src/census.rs`) until one the Python reader must read: returns
    /// the separator opening it (`end`: none), whether to call again from there at once (the
    /// call's table of names is full), how many events were read, the trace's clock after
    /// them, the event names with their counts, the explicit states, and (when
    /// `capabilities`) the capability bits seen, the packet events read and whether one held
    /// an ACK frame (looked for while `ack_seen` is false).
    #[allow(clippy::too_many_arguments)]
    #[pyfunction]
    #[pyo3(signature = (buf, pos, end, sep, scale, delta, previous, first_time, last_time,
        latest, last_derive_time, capabilities, ssthresh_unset_from, ack_seen))]
    pub(crate) fn census_records(
        buf: &Bound<'_, PyAny>,
        pos: usize,
        end: usize,
        sep: u8,
        scale: f64,
        delta: bool,
        previous: f64,
        first_time: Option<f64>,
        last_time: Option<f64>,
        latest: Option<f64>,
        last_derive_time: Option<f64>,
        capabilities: bool,
        ssthresh_unset_from: f64,
        ack_seen: bool,
    ) -> PyResult<CensusOut> {
        let view = PyBuffer::<u8>::get(buf)?;
        let bytes = separated(&view, pos, end, sep)?;
        let mut clock = Clock {
            scale,
            delta,
            previous,
            first_time,
            last_time,
            latest,
            last_derive_time,
            repairs_backward: false,
        };
        let wants = Wants { capabilities, ssthresh_unset_from, ack_seen };
        let out = records(bytes, pos, end, sep, &mut clock, wants);
        let counts = out
            .counts
            .into_iter()
            .map(|(name, n)| (String::from_utf8_lossy(&name).into_owned(), n))
            .collect();
        let states = out.states.into_iter().map(|s| (s.time, s.new, s.old, s.trigger)).collect();
        Ok((
            out.stop,
            out.again,
            out.events,
            (
                clock.previous,
                clock.first_time,
                clock.last_time,
                clock.latest,
                clock.last_derive_time,
            ),
            counts,
            states,
            (out.capabilities, out.packets, out.ack_frames),
        ))
    }
}
