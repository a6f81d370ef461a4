//! A trace's `packet_sent` / `packet_received` events as columns: what
//! `quicsm.extract.packets.PacketColumns` (and its `StreamColumns`) keep of each, read by the
//! native decoder instead of an object per event in Python.
//!
//! The contract is [`crate::record`]'s: a record this module accepts is one `orjson.loads`
//! accepts and that `quicsm.extract.wire.packet_of` and `PacketColumns.packet` turn into the
//! same rows without a problem. Anything else (escaped keys or strings among those read,
//! duplicate keys among them, a number that is not a plain non-negative integer of at most 18
//! digits where one is read, a value of another type, a frame that is not an object, Wireshark
//! field names, `PACKET_TX`/`PACKET_RX`, `packet_lost`, `parameters_set`, ...) is handed back:
//! the Python reader decodes that record itself, reports its problem if it has one, and feeds
//! the same columns, in file order. Being stricter than the Python reader is therefore safe;
//! being more lenient never is.

use crate::record::{event_kind, parts, Data, Fallback, Parser};
use crate::tables::EventKind;

type R<T> = Result<T, Fallback>;

/// flag bits of a packet row (`quicsm.extract.packets`)
pub const SENT: u8 = 1;
pub const ELICITING: u8 = 2;
pub const APPLICATION: u8 = 4;
pub const FROM_FIRST: u8 = 8;
pub const NUMBERED: u8 = 16;

/// the largest packet number (RFC 9000 section 12.3)
const MAX_PACKET_NUMBER: i64 = (1 << 62) - 1;
/// datagram size assumed when a packet's size is not logged (`wire.DEFAULT_DATAGRAM`)
const DEFAULT_DATAGRAM: i64 = 1200;
/// frame types that do not elicit an ACK (`wire._NOT_ELICITING`)
const NOT_ELICITING: [&[u8]; 5] =
    [b"ack", b"ack_ecn", b"padding", b"connection_close", b"ack_frequency_ack"];

/// The rows of some packet events, in file order (the columns `PacketColumns` and
/// `StreamColumns` keep).
#[derive(Default, Debug)]
pub struct PacketRows {
    pub times: Vec<f64>,
    pub numbers: Vec<i64>,
    pub flags: Vec<u8>,
    /// ACK ranges of application-space packets: the packet row (counted from the caller's
    /// `row_base`), lowest, highest
    pub ack_of: Vec<i64>,
    pub ack_lo: Vec<i64>,
    pub ack_hi: Vec<i64>,
    /// STREAM frames of numbered application-space packets: time, sent, stream, offset,
    /// length, packet number
    pub stream: [Vec<i64>; 5],
    pub stream_times: Vec<f64>,
    /// MAX_DATA (stream -1) and MAX_STREAM_DATA frames: time, sent, stream, maximum
    pub limit_times: Vec<f64>,
    pub limits: [Vec<i64>; 3],
    /// DATA_BLOCKED (stream -1) and STREAM_DATA_BLOCKED frames: time, sent, stream, limit
    pub blocked_times: Vec<f64>,
    pub blocked: [Vec<i64>; 3],
    /// ack-eliciting bytes by (logged as sent, sent by the capture's first sender)
    pub bytes: [i64; 4],
}

/// A member read at most once (a second one is a duplicate key: handed back).
#[derive(Clone, Copy, Default)]
enum Once<T> {
    #[default]
    Absent,
    Is(T),
}

impl<T: Copy> Once<T> {
    fn set(&mut self, v: T) -> R<()> {
        if let Once::Is(_) = self {
            return Err(Fallback);
        }
        *self = Once::Is(v);
        Ok(())
    }
    fn get(self) -> Option<T> {
        match self {
            Once::Absent => None,
            Once::Is(v) => Some(v),
        }
    }
    fn present(&self) -> bool {
        matches!(self, Once::Is(_))
    }
}

/// A plain non-negative JSON integer of at most 18 digits (no sign, fraction or exponent).
fn uint(p: &mut Parser) -> R<i64> {
    let b = p.b;
    let start = p.i;
    let mut i = start;
    let mut v: i64 = 0;
    while let Some(&c) = b.get(i) {
        if !c.is_ascii_digit() {
            break;
        }
        if i - start == 18 {
            return Err(Fallback);
        }
        v = v * 10 + (c - b'0') as i64;
        i += 1;
    }
    let n = i - start;
    if n == 0 || (n > 1 && b[start] == b'0') || matches!(b.get(i), Some(b'.' | b'e' | b'E')) {
        return Err(Fallback);
    }
    p.i = i;
    Ok(v)
}

/// A string without escapes.
fn plain<'a>(p: &mut Parser<'a>) -> R<&'a [u8]> {
    let (s, escaped) = p.string()?;
    if escaped {
        return Err(Fallback);
    }
    Ok(s)
}

/// The elements of the array at `[`, each read by `element`.
fn array<'a, F>(p: &mut Parser<'a>, mut element: F) -> R<usize>
where
    F: FnMut(&mut Parser<'a>) -> R<()>,
{
    p.expect(b'[')?;
    p.ws();
    if p.peek()? == b']' {
        p.i += 1;
        return Ok(0);
    }
    let mut n = 0;
    loop {
        p.ws();
        element(p)?;
        n += 1;
        p.ws();
        match p.peek()? {
            b',' => p.i += 1,
            b']' => {
                p.i += 1;
                return Ok(n);
            }
            _ => return Err(Fallback),
        }
    }
}

/// A packet number (`wire._number`): within 0..2^62-1, else handed back (Python reports it).
fn packet_number(p: &mut Parser) -> R<i64> {
    let v = uint(p)?;
    if v > MAX_PACKET_NUMBER {
        return Err(Fallback);
    }
    Ok(v)
}

/// ACK ranges as logged: `[[lo, hi], [n], m, ...]` (`wire._ranges`): (min, max) of each.
fn ranges(p: &mut Parser, out: &mut Vec<(i64, i64)>) -> R<()> {
    array(p, |p| {
        if p.peek()? == b'[' {
            let (mut first, mut last) = (None, None);
            array(p, |p| {
                let n = packet_number(p)?;
                first.get_or_insert(n);
                last = Some(n);
                Ok(())
            })?;
            match (first, last) {
                (Some(a), Some(b)) => out.push((a.min(b), a.max(b))),
                _ => return Err(Fallback), // an empty range: Python's to skip
            }
        } else {
            let n = packet_number(p)?;
            out.push((n, n));
        }
        Ok(())
    })?;
    Ok(())
}

/// What a frame is to the columns.
#[derive(Default)]
struct Frame<'a> {
    frame_type: Once<&'a [u8]>,
    type_: Once<&'a [u8]>,
    /// acked_ranges, ack_ranges, ranges: (present, where their ranges start in `ranges`)
    ranges: [Once<(usize, usize)>; 3],
    stream_id: Once<i64>,
    offset: Once<i64>,
    length: Once<i64>,
    maximum: Once<i64>,
    limit: Once<i64>,
    payload_length: Once<Option<i64>>,
}

impl<'a> Frame<'a> {
    /// The frame's kind: `frame_type`, else `type`, else "" (ASCII; compared lower-cased).
    fn kind(&self) -> &'a [u8] {
        self.frame_type.get().or(self.type_.get()).unwrap_or(b"")
    }
}

fn is(kind: &[u8], name: &[u8]) -> bool {
    kind.eq_ignore_ascii_case(name)
}

/// A `raw` object's one length member `name` (a frame's `payload_length`, a packet's
/// `length`), if it has one; anything but an object, or the member twice, is handed back.
fn raw_length(p: &mut Parser, name: &[u8]) -> R<Option<i64>> {
    if p.peek()? != b'{' {
        return Err(Fallback);
    }
    let mut length = Once::Absent;
    p.object(|p, key, escaped| {
        if escaped {
            return Err(Fallback);
        }
        if key == name {
            length.set(uint(p)?)
        } else {
            p.skip(3)
        }
    })?;
    Ok(length.get())
}

fn frame<'a>(p: &mut Parser<'a>, f: &mut Frame<'a>, acks: &mut Vec<(i64, i64)>) -> R<()> {
    if p.peek()? != b'{' {
        return Err(Fallback); // not an object: Python's to skip
    }
    p.object(|p, key, escaped| {
        if escaped || key.starts_with(b"frame_type.") {
            return Err(Fallback); // Wireshark's field names: Python's
        }
        match key {
            b"frame_type" | b"type" => {
                let s = plain(p)?;
                if !s.is_ascii() {
                    return Err(Fallback);
                }
                if key == b"type" {
                    f.type_.set(s)
                } else {
                    f.frame_type.set(s)
                }
            }
            b"acked_ranges" | b"ack_ranges" | b"ranges" => {
                let at = match key {
                    b"acked_ranges" => 0,
                    b"ack_ranges" => 1,
                    _ => 2,
                };
                let from = acks.len();
                ranges(p, acks)?;
                f.ranges[at].set((from, acks.len()))
            }
            b"stream_id" => f.stream_id.set(uint(p)?),
            b"offset" => f.offset.set(uint(p)?),
            b"length" => f.length.set(uint(p)?),
            b"maximum" => f.maximum.set(uint(p)?),
            b"limit" => f.limit.set(uint(p)?),
            b"raw" => f.payload_length.set(raw_length(p, b"payload_length")?),
            _ => p.skip(2),
        }
    })?;
    Ok(())
}

/// The members of a packet event's `data` (and its `header` and `raw`) that are read.
#[derive(Default)]
struct Packet<'a> {
    hdr_number: Once<i64>,
    number: Once<i64>,
    dcid: Once<&'a [u8]>,
    scid: Once<&'a [u8]>,
    hdr_type: Once<&'a [u8]>,
    hdr_packet_type: Once<&'a [u8]>,
    type_: Once<&'a [u8]>,
    packet_type: Once<&'a [u8]>,
    hdr_packet_size: Once<i64>,
    hdr_length: Once<i64>,
    hdr_payload_length: Once<i64>,
    packet_size: Once<i64>,
    length: Once<i64>,
    /// `raw` was an object: its `length`, if any
    raw_length: Once<Option<i64>>,
    header: Once<()>,
    frames: Once<()>,
}

fn ascii<'a>(p: &mut Parser<'a>) -> R<&'a [u8]> {
    let s = plain(p)?;
    if !s.is_ascii() {
        return Err(Fallback);
    }
    Ok(s)
}

fn header<'a>(p: &mut Parser<'a>, d: &mut Packet<'a>) -> R<()> {
    if p.peek()? != b'{' {
        return Err(Fallback);
    }
    p.object(|p, key, escaped| {
        if escaped {
            return Err(Fallback);
        }
        match key {
            b"packet_number" => d.hdr_number.set(packet_number(p)?),
            b"dcid" => d.dcid.set(plain(p)?),
            b"scid" => d.scid.set(plain(p)?),
            b"packet_type" => d.hdr_packet_type.set(ascii(p)?),
            b"type" => d.hdr_type.set(ascii(p)?),
            b"packet_size" => d.hdr_packet_size.set(uint(p)?),
            b"length" => d.hdr_length.set(uint(p)?),
            b"payload_length" => d.hdr_payload_length.set(uint(p)?),
            _ => p.skip(3),
        }
    })?;
    Ok(())
}

/// The space of a packet type (`wire._space`).
fn application(kind: Option<&[u8]>) -> bool {
    let starts = |k: &[u8], w: &[u8]| k.len() >= w.len() && k[..w.len()].eq_ignore_ascii_case(w);
    match kind {
        Some(k) => !(starts(k, b"initial") || starts(k, b"handshake")),
        None => true,
    }
}

/// Whether the record's name is a packet event read here: `(sent)`; `None`: another event.
fn packet_event(name: &[u8]) -> R<Option<bool>> {
    if event_kind(name)?.is_some() {
        return Ok(None);
    }
    let tail = match memchr::memrchr(b':', name) {
        Some(i) => &name[i + 1..],
        None => name,
    };
    Ok(if is(tail, b"packet_sent") {
        Some(true)
    } else if is(tail, b"packet_received") {
        Some(false)
    } else {
        None
    })
}

/// Reads one record into `rows` (`row_base`: the packet rows held before this call's),
/// updating `first_scid`; returns the event's name. `Err(Fallback)`: the record is the Python
/// reader's (nothing of it was added), a record that is not a packet event read here included.
pub fn packet_record<'a>(
    record: &'a [u8],
    scale: f64,
    rows: &mut PacketRows,
    row_base: i64,
    first_scid: &mut Option<Vec<u8>>,
    acks: &mut Vec<(i64, i64)>,
) -> R<&'a [u8]> {
    let mut unread = Data::new();
    let (parts, end) = parts(record, false, &mut unread)?;
    let mut p = Parser { b: record, i: end, lines: 0 };
    p.ws();
    if p.i != record.len() {
        return Err(Fallback);
    }
    let sent = packet_event(parts.name)?.ok_or(Fallback)?;
    let (a, _) = parts.data_span.ok_or(Fallback)?;
    let time = parts.time * scale;
    let mut d = Packet::default();
    let mut frames: Vec<Frame> = Vec::new();
    acks.clear();
    let mut p = Parser { b: record, i: a, lines: 0 };
    p.object(|p, key, escaped| {
        if escaped {
            return Err(Fallback);
        }
        match key {
            b"header" => {
                d.header.set(())?;
                header(p, &mut d)
            }
            b"packet_number" => d.number.set(packet_number(p)?),
            b"packet_type" => d.packet_type.set(ascii(p)?),
            b"type" => d.type_.set(ascii(p)?),
            b"packet_size" => d.packet_size.set(uint(p)?),
            b"length" => d.length.set(uint(p)?),
            b"raw" => d.raw_length.set(raw_length(p, b"length")?),
            b"frames" => {
                d.frames.set(())?;
                if p.peek()? != b'[' {
                    return Err(Fallback);
                }
                array(p, |p| {
                    let mut f = Frame::default();
                    frame(p, &mut f, acks)?;
                    frames.push(f);
                    Ok(())
                })?;
                Ok(())
            }
            _ => p.skip(2),
        }
    })?;
    // the same choices as `wire.packet_of`, in its order
    let number = d.hdr_number.get().or(d.number.get());
    let kind =
        d.hdr_packet_type.get().or(d.packet_type.get()).or(d.hdr_type.get()).or(d.type_.get());
    let app = application(kind);
    let mut size = d.raw_length.get().flatten();
    if size.is_none() {
        size = if d.hdr_packet_size.present() {
            d.hdr_packet_size.get()
        } else if d.hdr_length.present() {
            d.hdr_length.get()
        } else if d.packet_size.present() {
            d.packet_size.get()
        } else if d.length.present() {
            d.length.get()
        } else {
            d.hdr_payload_length.get()
        };
    }
    let size = match size {
        Some(s) if s > 0 => s,
        _ => DEFAULT_DATAGRAM,
    };
    let eliciting =
        frames.is_empty() || frames.iter().any(|f| !NOT_ELICITING.iter().any(|n| is(f.kind(), n)));
    let dcid = d.dcid.get().filter(|s| !s.is_empty());
    let scid = d.scid.get().filter(|s| !s.is_empty());
    // PacketColumns.packet
    if first_scid.is_none() {
        if let Some(s) = scid {
            *first_scid = Some(s.to_vec());
        }
    }
    let from_first = match first_scid {
        Some(f) => dcid != Some(f.as_slice()),
        None => false,
    };
    let flags = if sent { SENT } else { 0 }
        | if eliciting { ELICITING } else { 0 }
        | if app { APPLICATION } else { 0 }
        | if from_first { FROM_FIRST } else { 0 }
        | if number.is_some() { NUMBERED } else { 0 };
    if eliciting {
        rows.bytes[2 * sent as usize + from_first as usize] += size;
    }
    let row = row_base + rows.times.len() as i64;
    rows.times.push(time);
    rows.numbers.push(number.unwrap_or(-1));
    rows.flags.push(flags);
    if !app {
        return Ok(parts.name);
    }
    let sent_i = sent as i64;
    for f in &frames {
        let kind = f.kind();
        if is(kind, b"ack") || is(kind, b"ack_ecn") {
            if let Some((from, to)) = f.ranges.iter().find_map(|r| r.get()) {
                for &(lo, hi) in &acks[from..to] {
                    rows.ack_of.push(row);
                    rows.ack_lo.push(lo);
                    rows.ack_hi.push(hi);
                }
            }
        }
        // StreamColumns.add
        if is(kind, b"stream") {
            let number = match number {
                Some(n) => n,
                None => continue,
            };
            let offset = f.offset.get().unwrap_or(0);
            let length = match f.length {
                Once::Is(l) => Some(l),
                Once::Absent => f.payload_length.get().flatten(),
            };
            if let (Some(stream), Some(length)) = (f.stream_id.get(), length) {
                if length != 0 {
                    rows.stream_times.push(time);
                    for (column, v) in
                        rows.stream.iter_mut().zip([sent_i, stream, offset, length, number])
                    {
                        column.push(v);
                    }
                }
            }
        } else if is(kind, b"max_data") {
            if let Some(m) = f.maximum.get() {
                push3(&mut rows.limit_times, &mut rows.limits, time, [sent_i, -1, m]);
            }
        } else if is(kind, b"max_stream_data") {
            if let (Some(s), Some(m)) = (f.stream_id.get(), f.maximum.get()) {
                push3(&mut rows.limit_times, &mut rows.limits, time, [sent_i, s, m]);
            }
        } else if is(kind, b"data_blocked") {
            if let Some(l) = f.limit.get() {
                push3(&mut rows.blocked_times, &mut rows.blocked, time, [sent_i, -1, l]);
            }
        } else if is(kind, b"stream_data_blocked") {
            if let (Some(s), Some(l)) = (f.stream_id.get(), f.limit.get()) {
                push3(&mut rows.blocked_times, &mut rows.blocked, time, [sent_i, s, l]);
            }
        }
    }
    Ok(parts.name)
}

fn push3(times: &mut Vec<f64>, columns: &mut [Vec<i64>; 3], time: f64, values: [i64; 3]) {
    times.push(time);
    for (c, v) in columns.iter_mut().zip(values) {
        c.push(v);
    }
}

/// The `packet_lost` events of the 1-RTT space read natively (`PacketColumns.loss`): time,
/// packet number and trigger (0: none, else 1 + its index in `triggers`, in the order first
/// seen).
#[derive(Default, Debug)]
pub struct Losses {
    pub times: Vec<f64>,
    pub numbers: Vec<i64>,
    pub codes: Vec<u16>,
    pub triggers: Vec<Vec<u8>>,
}

/// What `TraceBuilder.add` checks and keeps of a loss event's time: the time it may not be
/// earlier than (`_latest_of[False]`, else the trace's first time), the latest time of the
/// trace and the latest time of an event states are derived from; `moved`: a loss was read.
#[derive(Default, Debug, Clone, Copy)]
pub struct Clock {
    pub bound: Option<f64>,
    pub latest: Option<f64>,
    pub last_derive: Option<f64>,
    pub moved: bool,
}

/// One `packet_lost` record into `losses`, its time checked and kept as `TraceBuilder.add`
/// does (`_check_order`, then `last_derive_time`) and its data read as
/// `metric_event` and `wire.lost_packet_of` read it; `Err(Fallback)`: the Python reader's
/// (nothing of it was kept), a time earlier than the clock allows included (Python reports it).
pub fn loss_record(record: &[u8], scale: f64, losses: &mut Losses, clock: &mut Clock) -> R<()> {
    let mut unread = Data::new();
    let (parts, end) = parts(record, false, &mut unread)?;
    let mut p = Parser { b: record, i: end, lines: 0 };
    p.ws();
    if p.i != record.len() || event_kind(parts.name)? != Some(EventKind::PacketLost) {
        return Err(Fallback);
    }
    let (a, _) = parts.data_span.ok_or(Fallback)?;
    let time = parts.time * scale;
    let (mut hdr_type, mut hdr_number) = (Once::Absent, Once::Absent);
    let (mut packet_type, mut type_, mut space) = (Once::Absent, Once::Absent, Once::Absent);
    let (mut number, mut trigger, mut header) = (Once::Absent, Once::Absent, Once::Absent);
    let mut p = Parser { b: record, i: a, lines: 0 };
    p.object(|p, key, escaped| {
        if escaped {
            return Err(Fallback);
        }
        match key {
            b"header" => {
                header.set(())?;
                if p.peek()? != b'{' {
                    return Err(Fallback); // not an object: Python's
                }
                p.object(|p, key, escaped| {
                    if escaped {
                        return Err(Fallback);
                    }
                    match key {
                        b"packet_type" => hdr_type.set(ascii(p)?),
                        b"packet_number" => hdr_number.set(packet_number(p)?),
                        _ => p.skip(3),
                    }
                })?;
                Ok(())
            }
            b"packet_type" => packet_type.set(ascii(p)?),
            b"type" => type_.set(ascii(p)?),
            b"packet_number_space" => space.set(ascii(p)?),
            b"packet_number" => number.set(packet_number(p)?),
            b"trigger" => {
                let t = plain(p)?;
                std::str::from_utf8(t).map_err(|_| Fallback)?;
                trigger.set(t)
            }
            _ => p.skip(2),
        }
    })?;
    // TraceBuilder._check_order: a loss may not come before the last one (or the first event)
    if clock.bound.is_some_and(|bound| time < bound) {
        return Err(Fallback);
    }
    // wire.lost_packet_of, in its order of choices; PacketColumns.loss keeps the 1-RTT ones
    let kind = hdr_type.get().or(packet_type.get()).or(type_.get()).or(space.get());
    let number = hdr_number.get().or(number.get());
    let row = match (application(kind), number) {
        (true, Some(n)) => {
            let known = trigger.get().map(|t| losses.triggers.iter().position(|k| k == t));
            let code = match known {
                None => 0,
                Some(Some(i)) => i + 1,
                Some(None) => losses.triggers.len() + 1,
            };
            Some((n, u16::try_from(code).map_err(|_| Fallback)?))
        }
        _ => None,
    };
    // nothing is kept before here: a record handed back left everything as it was
    clock.bound = Some(time);
    if clock.latest.is_none_or(|l| time > l) {
        clock.latest = Some(time);
    }
    if clock.last_derive.is_none_or(|l| time > l) {
        clock.last_derive = Some(time);
    }
    clock.moved = true;
    if let Some((n, code)) = row {
        if code as usize > losses.triggers.len() {
            losses.triggers.push(trigger.get().unwrap_or_default().to_vec());
        }
        losses.times.push(time);
        losses.numbers.push(n);
        losses.codes.push(code);
    }
    Ok(())
}

/// Reads the records `records[from..]` (`(rs, re)`: the separators around each, in file
/// order, as native-endian 64-bit pairs) of `buf` until one is the Python reader's; returns its
/// position (the number of records: none). With `losses`, `packet_lost` records are read into
/// it too, their times checked against `clock` (`loss_record`).
#[allow(clippy::too_many_arguments)]
pub fn packet_records(
    buf: &[u8],
    records: &[u8],
    from: usize,
    scale: f64,
    rows: &mut PacketRows,
    row_base: i64,
    first_scid: &mut Option<Vec<u8>>,
    mut losses: Option<&mut Losses>,
    clock: &mut Clock,
) -> R<usize> {
    let n = records.len() / 16;
    let at = |k: usize, j: usize| {
        let o = 16 * k + 8 * j;
        u64::from_ne_bytes(records[o..o + 8].try_into().unwrap_or([0; 8])) as usize
    };
    let mut acks = Vec::new();
    for k in from..n {
        let (rs, re) = (at(k, 0), at(k, 1));
        if rs >= re || re > buf.len() {
            return Err(Fallback); // not records of this buffer: the caller's mistake
        }
        let record = &buf[rs + 1..re];
        if crate::scan::may_be_over_budget(record) {
            return Ok(k);
        }
        if packet_record(record, scale, rows, row_base, first_scid, &mut acks).is_err() {
            let read = match losses.as_deref_mut() {
                Some(l) => loss_record(record, scale, l, clock).is_ok(),
                None => false,
            };
            if !read {
                return Ok(k);
            }
        }
    }
    Ok(n)
}

/// `(rs, re)` of each record between the separators at `buf[a]` and `buf[b]` holding one of
/// `needles`, in file order, each once (`SeqScanner._decode_hits`).
pub fn records_with_any(
    buf: &[u8],
    a: usize,
    b: usize,
    sep: u8,
    needles: &[Vec<u8>],
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for needle in needles {
        let finder = memchr::memmem::Finder::new(needle);
        let mut from = a;
        while from < b {
            let hit = match finder.find(&buf[from..b]) {
                Some(i) => i + from,
                None => break,
            };
            let rs = memchr::memrchr(sep, &buf[a..hit]).map_or(a, |i| i + a);
            let re = memchr::memchr(sep, &buf[hit..=b]).map_or(b, |i| i + hit);
            out.push((rs, re));
            from = re;
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}
