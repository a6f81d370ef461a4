//! The native core's reading contract, checked on any bytes: the fuzz target
//! (`native/fuzz/fuzz_targets/records.rs`) runs it on every input the fuzzer makes, and
//! `tests/fuzz_regressions.rs` on every input a campaign found, once fixed
//! (`native/fuzz/regressions/`).
//!
//! The input is one region of records, as `quicsm.qlog.seq` hands it to the scan: the bytes
//! between two separators (RS when the input holds one, else a line feed). For each of the two
//! time scales (1 and 0.001):
//!
//! - no panic, no integer overflow (the fuzz build keeps overflow checks and debug assertions);
//! - the decoder accepts only what a JSON parser accepts: an object with a numeric `time` and a
//!   string `name`, at a finite time (what it cannot mirror exactly it hands back);
//! - bounded work: each call of the scan either finishes the region or hands back one record
//!   after the point it started from, so a region of n records takes at most n + 1 calls, and
//!   no record is visited twice;
//! - the same rows however the region is read: resuming from the scan's cursor after each
//!   hand-back or searching again from the record after it, in one region or split into two at
//!   any separator (the reader's blocks), with a fresh deriver each time (a re-read), and, when
//!   no record holds the explicit-state needle, told so (`scan_region`'s `no_states`);
//! - the deriver's rows in time order, no state repeated, every trigger named.
//!
//! The same bytes are also read as the inside of a contained-JSON `events` array
//! (`quicsm_native::contained::events`, [`check_contained`]): every element it reads is one a
//! JSON parser reads as an object with a numeric `time` and a string `name`, the elements it
//! read are exactly the commas it passed, times never go backwards, and the same elements,
//! counts, states, clock and rows come out however the bytes arrive (cut at any point, as
//! the reader's blocks cut them) and whatever `stop_at_state` asks.

#![allow(dead_code)]

use quicsm_native::contained::{self, Clock, Stop};
use quicsm_native::deriver::{Cond, Deriver, Profile, Rule, Thresholds};
use quicsm_native::packets;
use quicsm_native::record::decode;
use quicsm_native::scan::{scan_region, Order};
use quicsm_native::tables;

/// The rule table of the derived-state path in the shape Python hands over (first match wins),
/// with a rule limited to some states, so that masks are exercised too.
fn deriver() -> Deriver {
    let state =
        |name: &str| tables::STATE_NAMES.iter().position(|s| *s == name).expect("a state") as u8;
    let class = |name: &str| {
        tables::EVENT_CLASS_NAMES.iter().position(|s| *s == name).expect("an event class") as u8
    };
    let rules = [
        (Some(&["Recovery"][..]), "ack", "always", "CongestionAvoidance"),
        (None, "pto", "first_pto", "TailLossProbe"),
        (None, "pto", "always", "RetransmissionTimeout"),
        (None, "cutback", "always", "Recovery"),
        (None, "loss", "always", "Recovery"),
        (None, "ack", "in_recovery_period", "Recovery"),
        (None, "ack", "slow_start", "SlowStart"),
        (None, "ack", "always", "CongestionAvoidance"),
    ];
    let table = rules
        .iter()
        .map(|&(current, event, cond, to)| Rule {
            current: current.map(|states| states.iter().fold(0u16, |m, s| m | 1 << state(s))),
            event: class(event),
            cond: Cond::named(cond).expect("a native condition"),
            to: state(to),
            trigger: format!("{event}:{cond}"),
        })
        .collect();
    let profile = Profile {
        datagram_bytes: 1200.0,
        burst_datagrams: 3.0,
        slow_start_half_window: false,
        max_cwnd_datagrams: Some(1000.0),
        min_cwnd_datagrams: 2.0,
        logs_ssthresh: false,
        ssthresh_unset_from: f64::INFINITY,
        logs_pto: true,
        persistent_congestion: true,
        max_ack_delay_ms: 25.0,
    };
    let thresholds = Thresholds {
        pto_gap_fraction: 0.9,
        granularity_ms: 1.0,
        slow_start_stall_datagrams: 64.0,
        plateau_windows: 4.0,
        datagram_step_min_bytes: 1000.0,
        datagram_step_max_bytes: 1500.0,
    };
    Deriver::new(profile, thresholds, table)
}

/// What reading a region gave: the records handed back, how many were visited, the final
/// time order, and the deriver's rows and status (floats as bits, to compare exactly).
#[derive(Debug, PartialEq, Eq)]
struct Reading {
    handed_back: Vec<(usize, usize)>,
    visited: u64,
    order: (Option<u64>, Option<u64>),
    times: Vec<u64>,
    states: Vec<u8>,
    triggers: Vec<u16>,
    trigger_names: Vec<String>,
    status: (i64, bool, bool, bool, bool, Option<bool>, u8),
}

fn start() -> Order {
    Order { latest: None, latest_other: None, checked: false }
}

/// The scan over the records between the separators at `buf[pos]` and `buf[end]`, called
/// again after every hand-back as the Python reader does (here the handed-back record is only
/// skipped); `resume`: whether each call continues from the previous call's cursor.
#[allow(clippy::too_many_arguments)]
fn pass(
    d: &mut Deriver,
    buf: &[u8],
    mut pos: usize,
    end: usize,
    sep: u8,
    scale: f64,
    mut order: Order,
    resume: bool,
    no_states: bool,
    handed_back: &mut Vec<(usize, usize)>,
) -> (Order, u64) {
    let records = buf[pos..end].iter().filter(|&&b| b == sep).count() as u64; // separators after pos
    let mut visited = 0;
    let mut cursor = None;
    for _call in 0..=records + 1 {
        let from = if resume { cursor } else { None };
        let out = scan_region(d, buf, pos, end, sep, scale, order, true, from, no_states);
        visited += out.visited;
        order = Order { checked: false, ..out.order };
        match out.fallback {
            None => {
                assert!(out.cursor.is_none(), "a finished pass carries no cursor");
                assert!(visited <= records, "{visited} visits of {records} records");
                return (order, visited);
            }
            Some((rs, re)) => {
                assert!(
                    pos <= rs && rs < re && re <= end,
                    "hand-back {rs}..{re} outside {pos}..{end}"
                );
                assert!(buf[rs] == sep && buf[re] == sep, "a hand-back is bounded by separators");
                assert!(!buf[rs + 1..re].contains(&sep), "a hand-back is one record");
                handed_back.push((rs, re));
                cursor = out.cursor;
                assert!(cursor.is_some(), "a hand-back carries its cursor");
                pos = re;
            }
        }
    }
    panic!("the scan did not finish a region of {records} records in {} calls", records + 1);
}

fn read(buf: &[u8], cuts: &[usize], sep: u8, scale: f64, resume: bool) -> Reading {
    read_told(buf, cuts, sep, scale, resume, false)
}

/// [`read`], `no_states` passed to every call of the scan.
fn read_told(
    buf: &[u8],
    cuts: &[usize],
    sep: u8,
    scale: f64,
    resume: bool,
    no_states: bool,
) -> Reading {
    let mut d = deriver();
    let mut order = start();
    let mut handed_back = Vec::new();
    let mut visited = 0;
    for w in cuts.windows(2) {
        let (o, v) =
            pass(&mut d, buf, w[0], w[1], sep, scale, order, resume, no_states, &mut handed_back);
        order = o;
        visited += v;
    }
    let r = &d.rows;
    Reading {
        handed_back,
        visited,
        order: (order.latest.map(f64::to_bits), order.latest_other.map(f64::to_bits)),
        times: r.times.iter().map(|t| t.to_bits()).collect(),
        states: r.states.clone(),
        triggers: r.triggers.clone(),
        trigger_names: r.trigger_names.clone(),
        status: (
            d.events,
            d.seen_cwnd,
            d.seen_in_flight,
            d.seen_rtt,
            d.seen_pto,
            d.app_limited_flag,
            d.state,
        ),
    }
}

/// The decoder accepts only what a JSON parser accepts, as an object with a numeric time and a
/// string name, and gives a finite time.
fn check_record(record: &[u8], scale: f64) {
    let Ok(decoded) = decode(record, scale) else { return };
    let mut de = serde_json::Deserializer::from_slice(record);
    de.disable_recursion_limit(); // the decoder's own limit (256 levels) holds the depth
    let value: serde_json::Value = serde::Deserialize::deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .unwrap_or_else(|e| {
            panic!("decoded a record that is not JSON ({e}): {:?}", String::from_utf8_lossy(record))
        });
    let show = || String::from_utf8_lossy(record).into_owned();
    assert!(value.get("time").is_some_and(|t| t.is_number()), "no numeric time: {:?}", show());
    assert!(value.get("name").is_some_and(|n| n.is_string()), "no string name: {:?}", show());
    assert!(decoded.time.is_finite(), "time {} from {:?}", decoded.time, show());
}

/// The packet reader (`native/src/packets.rs`) accepts only what a JSON parser accepts, as an
/// object with a numeric time, a packet event's string name and a `data` object, and reads one
/// packet row of it: a number in 0..2^62-1 (or -1: none), ACK ranges and STREAM frames inside
/// that range, non-empty STREAM frames.
fn check_packet_record(record: &[u8], scale: f64) {
    let mut rows = packets::PacketRows::default();
    let mut scid = None;
    if packets::packet_record(record, scale, &mut rows, 7, &mut scid, &mut Vec::new()).is_err() {
        assert!(rows.times.is_empty(), "rows left by a record handed back");
        return;
    }
    let show = || String::from_utf8_lossy(record).into_owned();
    let mut de = serde_json::Deserializer::from_slice(record);
    de.disable_recursion_limit();
    let value: serde_json::Value = serde::Deserialize::deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .unwrap_or_else(|e| panic!("read a packet record that is not JSON ({e}): {:?}", show()));
    assert!(value.get("time").is_some_and(|t| t.is_number()), "no numeric time: {:?}", show());
    let name = value.get("name").and_then(|n| n.as_str()).unwrap_or_default().to_lowercase();
    assert!(
        name.ends_with("packet_sent") || name.ends_with("packet_received"),
        "not a packet event: {:?}",
        show()
    );
    assert!(value.get("data").is_some_and(|d| d.is_object()), "no data object: {:?}", show());
    assert_eq!(rows.times.len(), 1, "one packet row: {:?}", show());
    assert!(rows.times[0].is_finite());
    let max = (1i64 << 62) - 1;
    assert!(rows.numbers[0] == -1 || (0..=max).contains(&rows.numbers[0]), "{:?}", show());
    assert!(rows.ack_of.iter().all(|&r| r == 7), "ACK rows of another packet: {:?}", show());
    for (lo, hi) in rows.ack_lo.iter().zip(&rows.ack_hi) {
        assert!(0 <= *lo && lo <= hi && *hi <= max, "ACK range {lo}..{hi}: {:?}", show());
    }
    assert!(rows.stream[3].iter().all(|&l| l > 0), "an empty STREAM frame kept: {:?}", show());
    assert!(rows.bytes.iter().all(|&b| b >= 0), "{:?}", show());
}

/// The loss reader (`packets::loss_record`) accepts only what a JSON parser accepts, as an
/// object with a numeric time, a `packet_lost` name and a `data` object; a record it hands
/// back leaves the losses and the clock as they were; one it reads moves the clock to its time
/// (never back) and keeps at most one loss, numbered in 0..2^62-1, its trigger named.
fn check_loss_record(record: &[u8], scale: f64) {
    let mut losses = packets::Losses::default();
    let before = packets::Clock { bound: Some(5.0), latest: Some(9.0), ..Default::default() };
    let mut clock = before;
    if packets::loss_record(record, scale, &mut losses, &mut clock).is_err() {
        assert!(losses.times.is_empty() && losses.triggers.is_empty(), "losses left");
        assert!(!clock.moved && clock.bound == before.bound && clock.latest == before.latest);
        return;
    }
    let show = || String::from_utf8_lossy(record).into_owned();
    let mut de = serde_json::Deserializer::from_slice(record);
    de.disable_recursion_limit();
    let value: serde_json::Value = serde::Deserialize::deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .unwrap_or_else(|e| panic!("read a loss record that is not JSON ({e}): {:?}", show()));
    let time = value.get("time").and_then(|t| t.as_f64());
    assert!(time.is_some(), "no numeric time: {:?}", show());
    let name = value.get("name").and_then(|n| n.as_str()).unwrap_or_default().to_lowercase();
    assert!(name.ends_with("packet_lost"), "not a loss event: {:?}", show());
    assert!(value.get("data").is_some_and(|d| d.is_object()), "no data object: {:?}", show());
    let t = clock.bound.unwrap_or(f64::NAN);
    assert!(clock.moved && t >= 5.0 && t.is_finite(), "clock {clock:?}: {:?}", show());
    assert!(clock.latest == Some(t.max(9.0)) && clock.last_derive == Some(t), "{clock:?}");
    assert!(losses.times.len() <= 1 && losses.times.iter().all(|&x| x == t), "{:?}", show());
    let max = (1i64 << 62) - 1;
    assert!(losses.numbers.iter().all(|n| (0..=max).contains(n)), "{:?}", show());
    assert!(losses.codes.iter().all(|&c| c as usize <= losses.triggers.len()), "{:?}", show());
}

/// The deriver's rows: in time order, no state repeated, known states, every trigger named.
pub fn assert_rows_invariants(times: &[f64], states: &[u8], triggers: &[u16], names: usize) {
    let show = || format!("times {times:?} states {states:?} triggers {triggers:?}");
    assert!(times.len() == states.len() && states.len() == triggers.len(), "{}", show());
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "rows out of time order: {}", show());
    assert!(states.windows(2).all(|w| w[0] != w[1]), "a state repeated: {}", show());
    assert!(states.iter().all(|&s| (s as usize) < tables::STATE_NAMES.len()), "{}", show());
    assert!(triggers.iter().all(|&t| (t as usize) < names), "an unnamed trigger: {}", show());
}

/// The contract on one input (see the module's documentation).
pub fn check(data: &[u8]) {
    let sep = if data.contains(&0x1e) { 0x1e } else { b'\n' };
    let mut buf = Vec::with_capacity(data.len() + 2);
    buf.push(sep);
    buf.extend_from_slice(data);
    buf.push(sep);
    let end = buf.len() - 1;
    let seps: Vec<usize> = (0..=end).filter(|&i| buf[i] == sep).collect();
    // a cut at a separator picked from the input itself (its length), so every split is reached
    let mid = seps[data.len() % seps.len()];
    for scale in [1.0, 0.001] {
        for w in seps.windows(2) {
            check_record(&buf[w[0] + 1..w[1]], scale);
            check_packet_record(&buf[w[0] + 1..w[1]], scale);
            check_loss_record(&buf[w[0] + 1..w[1]], scale);
        }
        let resumed = read(&buf, &[0, end], sep, scale, true);
        let searched = read(&buf, &[0, end], sep, scale, false);
        assert_eq!(resumed, searched, "resuming from the cursor differs from searching again");
        let split = read(&buf, &[0, mid, end], sep, scale, true);
        assert_eq!(resumed, split, "split at {mid}: the rows differ from one region's");
        let again = read(&buf, &[0, end], sep, scale, true);
        assert_eq!(resumed, again, "a re-read differs");
        if !buf.windows(tables::STATE_NEEDLE.len()).any(|w| w == tables::STATE_NEEDLE) {
            let told = read_told(&buf, &[0, end], sep, scale, true, true);
            assert_eq!(resumed, told, "told that no record holds a state: the rows differ");
        }
        let times: Vec<f64> = resumed.times.iter().map(|&t| f64::from_bits(t)).collect();
        let names = resumed.trigger_names.len();
        assert_rows_invariants(&times, &resumed.states, &resumed.triggers, names);
    }
    check_contained(data);
}

/// What reading an `events` array's bytes gave (floats as bits, to compare exactly).
#[derive(Debug, PartialEq, Eq)]
struct Events {
    next: usize,
    events: u64,
    lines: u64,
    counts: Vec<(Vec<u8>, u64)>,
    states: Vec<(u64, String, Option<String>, Option<String>)>,
    clock: [Option<u64>; 5],
    rows: (Vec<u64>, Vec<u8>, Vec<u16>),
}

/// The events of `buf` from `start`, calling again while the reader asks to (as the Python
/// parser does), with the bytes held growing to `cuts` one after the other (each call sees
/// `buf[..cut]`, as the reader's blocks arrive).
fn read_events(buf: &[u8], cuts: &[usize], delta: bool, scale: f64, stop_at_state: bool) -> Events {
    let mut d = deriver();
    let mut clock = Clock { scale, delta, repairs_backward: delta, ..Clock::default() };
    let (mut next, mut events, mut lines) = (0, 0, 0);
    let mut counts: Vec<(Vec<u8>, u64)> = Vec::new();
    let mut states = Vec::new();
    for &cut in cuts {
        for _call in 0..=buf.len() + 1 {
            let before = next;
            let out = contained::events(
                Some(&mut d),
                &buf[..cut],
                next,
                1 << 26,
                &mut clock,
                stop_at_state,
            );
            assert!(
                out.next >= before && out.next <= cut,
                "next {} outside {before}..{cut}",
                out.next
            );
            let commas = buf[before..out.next].iter().filter(|&&c| c == b',').count() as u64;
            assert!(out.events <= commas, "{} events read past {commas} commas", out.events);
            assert_eq!(out.events == 0, out.next == before, "events read without moving on");
            let feeds = buf[before..out.next].iter().filter(|&&c| c == b'\n').count() as u64;
            assert_eq!(out.lines, feeds, "line feeds miscounted");
            if out.events > 0 {
                assert_eq!(buf[out.next - 1], b',', "an element ends at a comma");
                check_elements(&buf[before..out.next - 1], out.events);
            }
            next = out.next;
            events += out.events;
            lines += out.lines;
            for (name, n) in out.counts {
                match counts.iter_mut().find(|(k, _)| *k == name) {
                    Some((_, m)) => *m += n,
                    None => counts.push((name, n)),
                }
            }
            states.extend(
                out.states.into_iter().map(|s| (s.time.to_bits(), s.new, s.old, s.trigger)),
            );
            if out.stop != Stop::Again {
                break;
            }
            assert!(out.events > 0, "asked to call again without reading an event");
        }
    }
    counts.sort();
    let bits = |t: Option<f64>| t.map(f64::to_bits);
    let r = &d.rows;
    let times: Vec<f64> = r.times.clone();
    assert_rows_invariants(&times, &r.states, &r.triggers, r.trigger_names.len());
    Events {
        next,
        events,
        lines,
        counts,
        states,
        clock: [
            Some(clock.previous.to_bits()),
            bits(clock.first_time),
            bits(clock.last_time),
            bits(clock.latest),
            bits(clock.last_derive_time),
        ],
        rows: (r.times.iter().map(|t| t.to_bits()).collect(), r.states.clone(), r.triggers.clone()),
    }
}

/// `elements` (the bytes of `n` elements and the commas between them) are a JSON array's
/// inside whose every element is an object with a numeric time and a string name, at times
/// that never go backwards (the reader hands such an event back).
fn check_elements(elements: &[u8], n: u64) {
    let mut text = Vec::with_capacity(elements.len() + 2);
    text.push(b'[');
    text.extend_from_slice(elements);
    text.push(b']');
    let mut de = serde_json::Deserializer::from_slice(&text);
    de.disable_recursion_limit();
    let show = || String::from_utf8_lossy(elements).into_owned();
    let value: serde_json::Value = serde::Deserialize::deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .unwrap_or_else(|e| panic!("read elements that are not JSON ({e}): {:?}", show()));
    let items = value.as_array().expect("an array");
    assert_eq!(
        items.len() as u64,
        n,
        "{n} events read from {} elements: {:?}",
        items.len(),
        show()
    );
    for item in items {
        assert!(item.get("time").is_some_and(|t| t.is_number()), "no numeric time: {:?}", show());
        assert!(item.get("name").is_some_and(|t| t.is_string()), "no string name: {:?}", show());
    }
}

/// [`check_elements`], for the test that the contract fails when broken.
pub fn check_elements_for_test(elements: &[u8], n: u64) {
    check_elements(elements, n);
}

/// The contained-JSON contract on one input (see the module's documentation); returns how many
/// events were read.
pub fn check_contained(data: &[u8]) -> u64 {
    let end = data.len();
    let mid = data.len() / 2 + data.len() % 7;
    let mut read = 0;
    for (delta, scale) in [(false, 1.0), (true, 0.001)] {
        let whole = read_events(data, &[end], delta, scale, false);
        let stopping = read_events(data, &[end], delta, scale, true);
        assert_eq!(whole, stopping, "stopping after each state differs");
        let cut = read_events(data, &[mid.min(end), end], delta, scale, false);
        assert_eq!(whole, cut, "the bytes cut at {mid}: a different reading");
        if let (Some(first), Some(last)) = (whole.clock[1], whole.clock[2]) {
            assert!(f64::from_bits(first) <= f64::from_bits(last), "the clock goes backwards");
        }
        read = whole.events;
    }
    read
}
