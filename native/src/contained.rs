//! The events of a contained-JSON trace (`traces[i].events`), split and decoded natively.
//!
//! `quicsm.qlog.contained.ContainedParser` keeps the document's structure (the file, `traces`
//! and trace objects, their members, truncation) and hands this module the bytes of an
//! `events` array from just after its `[` or after one of its commas. [`events`] reads one
//! element after another, each an event object followed by a comma, exactly as the Python
//! parser's `_element` would (`orjson.loads`, `object_event`, `TraceBuilder.event_time`,
//! `observe` and `add`), and stops at the first element it cannot read so: one that is not an
//! object it decodes completely (an array event, a string time, an escaped name, ...), an
//! element over the record limits, a time going backwards (an error, or a repair for the
//! producers known to log such times), an element not followed by a comma (the last one, or
//! one the buffer does not hold whole yet). The Python parser reads that element itself,
//! reports its problem if it has one, and calls again after it: both readers give the same
//! traces, problems and errors, and every byte is parsed by this module at most once.
//!
//! What is kept is bounded by one element: the event names seen since the call began (with
//! their counts) and the explicit states (`congestion_state_updated`) decoded, handed to the
//! Python side at the end of each call.

use crate::deriver::Deriver;
use crate::record::{event_kind, parts, Data, Fallback, Parser};
use crate::tables::{EventKind, MAX_RECORD_VALUES};

/// A trace's clock (`TraceBuilder`'s time state), carried in and out of each call.
#[derive(Clone, Copy, Debug, Default)]
pub struct Clock {
    /// 1 or 0.001 (`time_units: us`)
    pub scale: f64,
    /// times are deltas from the previous event (summed as read)
    pub delta: bool,
    /// the sum so far of delta times
    pub previous: f64,
    pub first_time: Option<f64>,
    pub last_time: Option<f64>,
    /// the latest time read (times may not go backwards)
    pub latest: Option<f64>,
    /// the time of the latest metric, loss or timer event
    pub last_derive_time: Option<f64>,
    /// the producer is known to log earlier times on later events (they are repaired, by the
    /// Python reader)
    pub repairs_backward: bool,
}

/// An explicit state event (`StateEvent`): time, new, old, trigger.
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    pub time: f64,
    pub new: String,
    pub old: Option<String>,
    pub trigger: Option<String>,
}

/// Why a call stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// at an element the Python parser must read (or the end of what the buffer holds)
    Element,
    /// after an explicit state, when the caller asked to see each one (its sink may stop
    /// wanting metrics once a state is logged), or at the [`MAX_NAMES`]-th distinct event
    /// name: call again from `next`
    Again,
}

/// The most distinct event names one call counts (a call stops before another)
pub const MAX_NAMES: usize = 64;

/// The event names of one call: each with its kind and count, the last one found first.
#[derive(Default)]
struct Names {
    seen: Vec<(Vec<u8>, Option<EventKind>, u64)>,
    last: usize,
    /// events read, and those of a kind whose `data` the deriver reads
    events: u64,
    relevant: u64,
}

impl Names {
    /// Whether to read `data`'s members the deriver reads while parsing the event (else it is
    /// only checked, and read again for the events that need it): chosen by how many of the
    /// events so far needed it (aioquic writes `data` before `name`). Either way gives the
    /// same reading; this is only the cheaper one.
    fn eager(&self) -> bool {
        self.relevant * 4 > self.events
    }

    fn read(&mut self, kind: Option<EventKind>) {
        self.events += 1;
        if kind.is_some_and(|k| k != EventKind::State) {
            self.relevant += 1;
        }
    }

    /// The index of `name` (added if new), `Ok(None)` when the table is full, `Fallback` for
    /// a name whose kind is Python's to tell.
    fn find(&mut self, name: &[u8]) -> Result<Option<usize>, Fallback> {
        if let Some((n, _, _)) = self.seen.get(self.last) {
            if n.as_slice() == name {
                return Ok(Some(self.last));
            }
        }
        if let Some(i) = self.seen.iter().position(|(n, _, _)| n.as_slice() == name) {
            self.last = i;
            return Ok(Some(i));
        }
        if self.seen.len() >= MAX_NAMES {
            return Ok(None);
        }
        let kind = event_kind(name)?;
        self.seen.push((name.to_vec(), kind, 0));
        self.last = self.seen.len() - 1;
        Ok(Some(self.last))
    }
}

pub struct Outcome {
    /// where the next element begins (just after the last comma read; `start` if none was)
    pub next: usize,
    /// the elements read (each an event: `TraceBuilder.n_events`)
    pub events: u64,
    /// the line feeds in them (the Python parser counts lines for its errors)
    pub lines: u64,
    pub stop: Stop,
    /// each event name read, with its count (`TraceBuilder.counts`)
    pub counts: Vec<(Vec<u8>, u64)>,
    pub states: Vec<State>,
}

/// Whether `element` may hold more values than the budget allows (the cheap bound of
/// `quicsm.qlog.budget`): such an element is the Python reader's to count and report.
pub(crate) fn may_be_over_budget(element: &[u8]) -> bool {
    element.len() > MAX_RECORD_VALUES
        && memchr::memchr3_iter(b'{', b'[', b',', element).count() > MAX_RECORD_VALUES
}

/// A string value without escapes (what `state_event` reads as it is), or `Fallback`.
fn plain_string<'a>(p: &mut Parser<'a>) -> Result<&'a [u8], Fallback> {
    if p.peek()? != b'"' {
        return Err(Fallback); // a number (str(int) in Python), a bool, ...: Python's
    }
    let (s, escaped) = p.string()?;
    if escaped {
        return Err(Fallback);
    }
    Ok(s)
}

/// `new`, `old` and `trigger` of a state event.
pub(crate) type StateFields<'a> = (&'a [u8], Option<&'a [u8]>, Option<&'a [u8]>);

/// `new`, `old` and `trigger` of a `congestion_state_updated` data object (`state_event`),
/// or `Fallback` for anything but plain strings (and null for the optional two).
pub(crate) fn state_fields(data: &[u8]) -> Result<StateFields<'_>, Fallback> {
    let mut p = Parser { b: data, i: 0, lines: 0 };
    let (mut new, mut old, mut trigger) = (None, None, None);
    let (mut seen_old, mut seen_trigger) = (false, false);
    // no member, so no "new": Python's error (as is a missing "new" below)
    p.object(|p, key, escaped| {
        if escaped {
            return Err(Fallback);
        }
        match key {
            b"new" => {
                if new.is_some() {
                    return Err(Fallback);
                }
                new = Some(plain_string(p)?);
            }
            b"old" | b"trigger" => {
                let seen = if key == b"old" { &mut seen_old } else { &mut seen_trigger };
                if *seen {
                    return Err(Fallback);
                }
                *seen = true;
                let value = if p.peek()? == b'n' {
                    p.literal(b"null")?;
                    None
                } else {
                    Some(plain_string(p)?)
                };
                if key == b"old" {
                    old = value;
                } else {
                    trigger = value;
                }
            }
            _ => p.skip(1)?,
        }
        Ok(())
    })?;
    Ok((new.ok_or(Fallback)?, old, trigger))
}

pub(crate) fn text(bytes: &[u8]) -> String {
    // the element was checked to be UTF-8
    String::from_utf8_lossy(bytes).into_owned()
}

/// What one element gave, before it is committed to the trace.
#[derive(Default)]
struct Read {
    time: f64,
    previous: f64,
    kind: Option<EventKind>,
    state: Option<State>,
    event: Option<crate::deriver::Event>,
    /// the line feeds in the element
    lines: u64,
}

/// Reads the event element that begins at `rest[0]` (white space first, then an object, white
/// space and a comma) against the clock, without changing it: what it gives, its name and
/// the index of its comma; `Fallback` when the Python reader must read it.
fn read_event(
    rest: &[u8],
    clock: &Clock,
    max_record_bytes: usize,
    names: &mut Names,
) -> Result<(Read, Option<usize>, usize), Fallback> {
    let mut data = Data::new();
    let (parts, end) = parts(rest, names.eager(), &mut data)?;
    let mut p = Parser { b: rest, i: end, lines: parts.lines };
    p.ws();
    if p.peek()? != b',' {
        return Err(Fallback); // the last element (before ']'), garbage, or the buffer's end
    }
    let comma = p.i;
    let lines = p.lines;
    let element = &rest[..comma];
    // (UTF-8: the parser checked every string; it accepts only ASCII outside them)
    if element.len() > max_record_bytes || may_be_over_budget(element) {
        return Err(Fallback);
    }
    let name = match names.find(parts.name)? {
        Some(i) => i,
        None => return Ok((Read::default(), None, comma)), // the table is full
    };
    let kind = names.seen[name].1;
    // TraceBuilder.event_time, then repair and observe
    let mut time = parts.time * clock.scale;
    let mut previous = clock.previous;
    if clock.delta {
        time += previous;
        previous = time;
    }
    if let Some(latest) = clock.latest {
        if time < latest {
            return Err(Fallback); // repaired (a known producer) or reported: Python's
        }
    }
    let (mut state, mut event) = (None, None);
    match kind {
        None => {}
        Some(EventKind::State) => {
            let (a, b) = parts.data_span.ok_or(Fallback)?; // no data: Python's error
            let (new, old, trigger) = state_fields(&element[a..b])?;
            state = Some(State {
                time,
                new: text(new),
                old: old.map(text),
                trigger: trigger.map(text),
            });
        }
        Some(EventKind::MvfstMetric) => return Err(Fallback),
        Some(k) => event = parts.event(rest, &data, k, time, clock.scale)?,
    }
    Ok((Read { time, previous, kind, state, event, lines }, Some(name), comma))
}

/// Reads the events of an `events` array from `buf[start]` (just after its `[` or a comma)
/// while each is an event object this module reads exactly as the Python parser would,
/// followed by a comma; see the module. `max_record_bytes`: the longest element (white space
/// included, as the Python parser measures it). `deriver`: fed each metric, loss and PTO
/// event (`None`: they are checked, not fed). `stop_at_state`: return after each explicit
/// state.
pub fn events(
    mut deriver: Option<&mut Deriver>,
    buf: &[u8],
    start: usize,
    max_record_bytes: usize,
    clock: &mut Clock,
    stop_at_state: bool,
) -> Outcome {
    let mut out = Outcome {
        next: start,
        events: 0,
        lines: 0,
        stop: Stop::Element,
        counts: Vec::new(),
        states: Vec::new(),
    };
    let mut names = Names::default();
    let mut pos = start;
    while pos < buf.len() {
        let (read, name, comma) = match read_event(&buf[pos..], clock, max_record_bytes, &mut names)
        {
            Ok((read, Some(name), comma)) => (read, name, pos + comma),
            Ok((_, None, _)) => {
                out.stop = Stop::Again;
                break;
            }
            Err(Fallback) => break,
        };
        // committed: TraceBuilder.observe, n_events, add
        let t = read.time;
        clock.previous = read.previous;
        if clock.first_time.is_none() {
            clock.first_time = Some(t);
        }
        clock.last_time = Some(t);
        if clock.latest.is_none_or(|l| t > l) {
            clock.latest = Some(t);
        }
        out.events += 1;
        out.lines += read.lines;
        names.seen[name].2 += 1;
        names.read(read.kind);
        pos = comma + 1;
        out.next = pos;
        if let Some(kind) = read.kind {
            if kind != EventKind::State && clock.last_derive_time.is_none_or(|l| t > l) {
                clock.last_derive_time = Some(t);
            }
        }
        if let (Some(event), Some(d)) = (&read.event, deriver.as_deref_mut()) {
            d.feed(event);
        }
        if let Some(state) = read.state {
            out.states.push(state);
            if stop_at_state {
                out.stop = Stop::Again;
                break;
            }
        }
    }
    out.counts = names.seen.into_iter().filter(|s| s.2 > 0).map(|(n, _, c)| (n, c)).collect();
    out
}
