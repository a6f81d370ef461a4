//! The native core tested directly, without Python: the record decoder, the deriver and the
//! scan. (The Python test suite checks, beside these, that every committed trace and many
//! generated and mutated ones give the same rows natively and in Python.)

use quicsm_native::deriver::{Cond, Deriver, Event, Kind, Profile, Rule, Thresholds, N_METRICS};
use quicsm_native::record::decode;
use quicsm_native::scan::{scan, Order};
use quicsm_native::tables::{self, EventKind};

fn state(name: &str) -> u8 {
    tables::STATE_NAMES.iter().position(|s| *s == name).expect("a state") as u8
}

fn class(name: &str) -> u8 {
    tables::EVENT_CLASS_NAMES.iter().position(|s| *s == name).expect("an event class") as u8
}

/// A rule table in the shape Python hands over (any state; first match wins).
fn table(rules: &[(&str, &str, &str)]) -> Vec<Rule> {
    rules
        .iter()
        .map(|&(event, cond, to)| Rule {
            current: None,
            event: class(event),
            cond: Cond::named(cond).expect("a native condition"),
            to: state(to),
            trigger: if cond == "always" { event.to_string() } else { format!("{event}:{cond}") },
        })
        .collect()
}

fn profile() -> Profile {
    Profile {
        datagram_bytes: 1200.0,
        burst_datagrams: 3.0,
        slow_start_half_window: false,
        max_cwnd_datagrams: None,
        min_cwnd_datagrams: 2.0,
        logs_ssthresh: false,
        ssthresh_unset_from: f64::INFINITY,
        logs_pto: true,
        persistent_congestion: true,
        max_ack_delay_ms: 25.0,
    }
}

fn thresholds() -> Thresholds {
    Thresholds {
        pto_gap_fraction: 0.9,
        granularity_ms: 1.0,
        slow_start_stall_datagrams: 64.0,
        plateau_windows: 4.0,
        datagram_step_min_bytes: 1000.0,
        datagram_step_max_bytes: 1500.0,
    }
}

fn deriver() -> Deriver {
    Deriver::new(
        profile(),
        thresholds(),
        table(&[
            ("pto", "first_pto", "TailLossProbe"),
            ("pto", "always", "RetransmissionTimeout"),
            ("cutback", "always", "Recovery"),
            ("loss", "always", "Recovery"),
            ("ack", "in_recovery_period", "Recovery"),
            ("ack", "slow_start", "SlowStart"),
            ("ack", "always", "CongestionAvoidance"),
        ]),
    )
}

fn metrics(time: f64, cwnd: f64, in_flight: f64, rtt: Option<f64>) -> Event {
    let mut values = [None; N_METRICS];
    values[tables::CWND_BYTES] = Some(cwnd);
    values[tables::BYTES_IN_FLIGHT] = Some(in_flight);
    values[tables::LATEST_RTT_MS] = rtt;
    values[tables::SMOOTHED_RTT_MS] = rtt;
    Event { time, kind: Kind::Metrics, values, app_limited: None, trigger: None }
}

fn lost(time: f64) -> Event {
    Event {
        time,
        kind: Kind::PacketLost,
        values: [None; N_METRICS],
        app_limited: None,
        trigger: None,
    }
}

fn states_of(d: &Deriver) -> Vec<&'static str> {
    d.rows.states.iter().map(|&s| tables::STATE_NAMES[s as usize]).collect()
}

#[test]
fn decodes_a_metrics_record_with_the_time_scale_on_rtts_only() {
    let rec = br#"{"time": 1500, "name": "recovery:metrics_updated", "data": {"congestion_window": 14520, "bytes_in_flight": 1200, "smoothed_rtt": 30000, "pacing_rate": 8000000}}"#;
    let d = decode(rec, 0.001).expect("decodable");
    assert_eq!(d.kind, Some(EventKind::Metrics));
    assert_eq!(d.time, 1.5); // the time is scaled too
    let e = d.event.expect("an event");
    assert_eq!(e.kind, Kind::Metrics);
    assert_eq!(e.values[tables::CWND_BYTES], Some(14520.0));
    assert_eq!(e.values[tables::BYTES_IN_FLIGHT], Some(1200.0));
    assert_eq!(e.values[tables::SMOOTHED_RTT_MS], Some(30.0)); // microseconds -> ms
    assert_eq!(e.values[tables::PACING_RATE_BPS], Some(8_000_000.0)); // not a time
}

#[test]
fn classifies_event_names_across_qlog_generations() {
    for (name, kind) in [
        ("recovery:metrics_updated", EventKind::Metrics),
        ("quic:recovery_metrics_updated", EventKind::Metrics),
        ("RECOVERY:METRIC_UPDATE", EventKind::Metrics),
        ("recovery:packet_lost", EventKind::PacketLost),
        ("quic:spurious_loss", EventKind::SpuriousLoss),
    ] {
        let rec = format!(r#"{{"time": 1, "name": "{name}", "data": {{}}}}"#);
        assert_eq!(decode(rec.as_bytes(), 1.0).expect(name).kind, Some(kind), "{name}");
    }
    let other = decode(br#"{"time": 1, "name": "transport:packet_sent", "data": {}}"#, 1.0);
    assert_eq!(other.expect("decodable").kind, None);
}

#[test]
fn hands_back_what_it_does_not_mirror_exactly() {
    for rec in [
        // an escaped key
        &br#"{"time": 1, "name": "recovery:metrics_updated", "data": {"cwn\u0064": 1}}"#[..],
        // a duplicate key among the fields read
        br#"{"time": 1, "name": "recovery:metrics_updated", "data": {"cwnd": 1, "cwnd": 2}}"#,
        // two names of one metric
        br#"{"time": 1, "name": "recovery:metrics_updated", "data": {"cwnd": 1, "congestion_window": 2}}"#,
        // an integer beyond 64 bits
        br#"{"time": 1, "name": "recovery:metrics_updated", "data": {"cwnd": 36893488147419103232}}"#,
        // a non-ASCII event name
        "{\"time\": 1, \"name\": \"recovery:m\u{e9}trics_updated\", \"data\": {}}".as_bytes(),
        // not JSON
        br#"{"time": 1, "name": "recovery:metrics_updated", "data": {"cwnd": 1"#,
    ] {
        assert!(decode(rec, 1.0).is_err(), "{}", String::from_utf8_lossy(rec));
    }
}

#[test]
fn derives_slow_start_recovery_and_congestion_avoidance() {
    let mut d = deriver();
    let mut t = 0.0;
    let mut cwnd = 12_000.0;
    // slow start: every ACK grows the window by what it acknowledged
    for _ in 0..20 {
        t += 10.0;
        d.feed(&metrics(t, cwnd, cwnd, None)); // sent up to the window
        t += 10.0;
        cwnd += 1200.0;
        d.feed(&metrics(t, cwnd, cwnd - 1200.0, Some(20.0 + t / 1000.0))); // an ACK
    }
    // a loss: the window is cut (a congestion event)
    t += 1.0;
    d.feed(&lost(t));
    cwnd *= 0.5;
    d.feed(&metrics(t, cwnd, cwnd, None));
    // ACKs long after: growth by less than a datagram per ACK (congestion avoidance)
    for _ in 0..40 {
        t += 10.0;
        d.feed(&metrics(t, cwnd, cwnd, None));
        t += 30.0;
        cwnd += 100.0;
        d.feed(&metrics(t, cwnd, cwnd - 1200.0, Some(20.0 + t / 1000.0))); // a new RTT sample
    }
    let seen = states_of(&d);
    assert_eq!(seen.first(), Some(&"SlowStart")); // (Init is added when the trace ends)
    let ss = seen.iter().position(|s| *s == "SlowStart").expect("slow start");
    let rec = seen.iter().position(|s| *s == "Recovery").expect("recovery");
    let ca = seen
        .iter()
        .position(|s| *s == "CongestionAvoidance")
        .unwrap_or_else(|| panic!("CA in {seen:?}"));
    assert!(ss < rec && rec < ca, "{seen:?}");
    // rows are in time order and never repeat a state
    assert!(d.rows.times.windows(2).all(|w| w[0] <= w[1]));
    assert!(d.rows.states.windows(2).all(|w| w[0] != w[1]));
}

#[test]
fn a_probe_timeout_is_a_tail_loss_probe_then_a_retransmission_timeout() {
    let mut d = deriver();
    d.feed(&metrics(1.0, 12_000.0, 12_000.0, Some(20.0))); // a window in flight
    let pto = |time| Event {
        time,
        kind: Kind::Pto,
        values: [None; N_METRICS],
        app_limited: None,
        trigger: None,
    };
    let mut values = [None; N_METRICS];
    values[tables::PTO_COUNT] = Some(1.0);
    d.feed(&Event { time: 100.0, kind: Kind::Metrics, values, app_limited: None, trigger: None });
    values[tables::PTO_COUNT] = Some(2.0);
    d.feed(&Event { time: 300.0, kind: Kind::Metrics, values, app_limited: None, trigger: None });
    d.feed(&pto(700.0));
    let seen = states_of(&d);
    let tlp = seen
        .iter()
        .position(|s| *s == "TailLossProbe")
        .unwrap_or_else(|| panic!("TLP in {seen:?}"));
    let rto = seen.iter().position(|s| *s == "RetransmissionTimeout").expect("RTO");
    assert!(tlp < rto, "{seen:?}");
}

fn records(recs: &[&str]) -> Vec<u8> {
    let mut buf = vec![0x1e];
    for r in recs {
        buf.extend_from_slice(r.as_bytes());
        buf.push(b'\n');
        buf.push(0x1e);
    }
    buf
}

#[test]
fn the_scan_visits_derive_records_and_stops_at_one_to_hand_back() {
    let good = r#"{"time": 1, "name": "recovery:metrics_updated", "data": {"cwnd": 12000, "bytes_in_flight": 0}}"#;
    let other = r#"{"time": 2, "name": "transport:packet_sent", "data": {"length": 1200}}"#;
    let timer =
        r#"{"time": 3, "name": "recovery:loss_timer_updated", "data": {"event_type": "set"}}"#;
    let escaped = r#"{"time": 4, "name": "recovery:metrics_updated", "data": {"cwn\u0064": 1}}"#;
    let buf = records(&[good, other, timer, good, escaped, good]);
    let end = buf.len() - 1;
    let mut d = deriver();
    let order = Order { latest: None, latest_other: None, checked: false };
    let out = scan(&mut d, &buf, 0, end, 0x1e, 1.0, order, true, None);
    let (rs, re) = out.fallback.expect("the escaped record is handed back");
    assert_eq!(&buf[rs + 1..re - 1], escaped.as_bytes());
    assert_eq!(out.visited, 3, "two metrics records, then the escaped one (not the timer set)");
    // after it, the scan goes on to the end, from where it stopped (the cursor) or searching again
    let cursor = out.cursor.expect("a hand-back carries where to resume");
    let mut again = deriver();
    let resumed = scan(&mut d, &buf, re, end, 0x1e, 1.0, out.order, true, Some(cursor));
    let searched = scan(&mut again, &buf, re, end, 0x1e, 1.0, out.order, true, None);
    assert!(resumed.fallback.is_none() && searched.fallback.is_none());
    assert_eq!(resumed.visited, 1);
    assert_eq!(searched.visited, 1);
}

#[test]
fn every_python_condition_name_is_implemented() {
    for name in Cond::NAMES {
        assert!(Cond::named(name).is_some(), "{name}");
    }
    assert!(Cond::named("no_such_condition").is_none());
}

/// The packet reader (`packets.rs`): a quic-go and an aioquic packet read into one row each,
/// with their ACK ranges and frames; what it must leave to Python handed back.
#[test]
fn packet_events_are_read_into_rows_or_handed_back() {
    use quicsm_native::packets::{packet_record, PacketRows, ELICITING, NUMBERED, SENT};
    let mut rows = PacketRows::default();
    let mut scid = None;
    let mut acks = Vec::new();
    let sent = br#"{"time":2.5,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT","packet_number":7,"scid":"aa","dcid":"bb"},"raw":{"length":1252},"frames":[{"frame_type":"stream","stream_id":4,"offset":100,"length":1200},{"frame_type":"max_data","maximum":9000}]}}"#;
    let acked = br#"{"data":{"frames":[{"ack_delay":0.5,"acked_ranges":[[0,3],[5]],"frame_type":"ack"}],"header":{"packet_number":2,"packet_type":"1RTT","dcid":"aa"},"raw":{"length":40}},"name":"transport:packet_received","time":3}"#;
    assert!(packet_record(sent, 1.0, &mut rows, 10, &mut scid, &mut acks).is_ok());
    assert!(packet_record(acked, 0.001, &mut rows, 10, &mut scid, &mut acks).is_ok());
    assert_eq!(rows.times, vec![2.5, 0.003]);
    assert_eq!(rows.numbers, vec![7, 2]);
    assert_eq!(rows.flags[0] & (SENT | ELICITING | NUMBERED), SENT | ELICITING | NUMBERED);
    assert_eq!(rows.flags[1] & (SENT | ELICITING), 0);
    assert_eq!((&rows.ack_of, &rows.ack_lo), (&vec![11, 11], &vec![0, 5]));
    assert_eq!(rows.ack_hi, vec![3, 5]);
    assert_eq!(rows.stream.iter().map(|c| c[0]).collect::<Vec<_>>(), vec![1, 4, 100, 1200, 7]);
    assert_eq!(rows.limits.iter().map(|c| c[0]).collect::<Vec<_>>(), vec![1, -1, 9000]);
    assert_eq!(rows.bytes, [0, 0, 0, 1252]); // sent, addressed away from the first scid
    assert_eq!(scid.as_deref(), Some(&b"aa"[..]));
    for handed_back in [
        &br#"{"time":1,"name":"recovery:packet_lost","data":{"header":{"packet_number":1}}}"#[..],
        br#"{"time":1,"name":"transport:packet_sent","data":{"header":{"packet_number":-1}}}"#,
        br#"{"time":1,"name":"transport:packet_sent","data":{"header":{"packet_number":1.0}}}"#,
        br#"{"time":1,"name":"transport:packet_sent","data":{"header":{"packet_number":"1"}}}"#,
        br#"{"time":1,"name":"transport:packet_sent","data":{"header":{"dcid":"\u0061"}}}"#,
        br#"{"time":1,"name":"transport:packet_sent","data":{"frames":[5]}}"#,
        br#"{"time":1,"name":"transport:packet_sent","data":{"length":1,"length":2}}"#,
        br#"{"time":1,"name":"transport:packet_sent","data":{}"#,
        br#"{"time":1,"name":"transport:packet_sent"}"#,
    ] {
        let before = rows.times.len();
        assert!(packet_record(handed_back, 1.0, &mut rows, 0, &mut scid, &mut acks).is_err());
        assert_eq!(rows.times.len(), before);
    }
}

/// The loss reader (`packets::loss_record`): quic-go's and aioquic's `packet_lost` read into
/// one loss each (the 1-RTT ones), their times moving the clock; a loss before the clock's
/// bound, and what Python must decide, handed back with nothing kept.
#[test]
fn loss_events_are_read_or_handed_back() {
    use quicsm_native::packets::{loss_record, Clock, Losses};
    let mut losses = Losses::default();
    let mut clock = Clock { bound: Some(1.0), latest: Some(4.0), ..Clock::default() };
    let quic_go = br#"{"time":2.5,"name":"recovery:packet_lost","data":{"header":{"packet_type":"1RTT","packet_number":7},"trigger":"reordering_threshold"}}"#;
    let aioquic = br#"{"data":{"type":"1RTT","packet_number":9,"trigger":"time_threshold"},"name":"recovery:packet_lost","time":3}"#;
    let initial = br#"{"time":5,"name":"recovery:packet_lost","data":{"header":{"packet_type":"initial","packet_number":0}}}"#;
    assert!(loss_record(quic_go, 1.0, &mut losses, &mut clock).is_ok());
    assert!(loss_record(aioquic, 1.0, &mut losses, &mut clock).is_ok());
    assert!(loss_record(initial, 1.0, &mut losses, &mut clock).is_ok());
    assert_eq!((losses.times, losses.numbers), (vec![2.5, 3.0], vec![7, 9]));
    assert_eq!(losses.codes, vec![1, 2]);
    assert_eq!(losses.triggers, vec![b"reordering_threshold".to_vec(), b"time_threshold".to_vec()]);
    assert_eq!((clock.bound, clock.latest, clock.last_derive), (Some(5.0), Some(5.0), Some(5.0)));
    let mut losses = Losses::default();
    let before = clock;
    for handed_back in [
        &br#"{"time":4.5,"name":"recovery:packet_lost","data":{"header":{"packet_number":1}}}"#[..],
        br#"{"time":6,"name":"recovery:packet_lost","data":{"header":{"packet_number":-1}}}"#,
        br#"{"time":6,"name":"recovery:packet_lost","data":{"trigger":"a","trigger":"b"}}"#,
        br#"{"time":6,"name":"recovery:packet_lost","data":{"trigger":"\u0061"}}"#,
        br#"{"time":6,"name":"recovery:packet_lost","data":{"trigger":null}}"#,
        br#"{"time":6,"name":"recovery:packet_lost","data":{"header":"1RTT"}}"#,
        br#"{"time":6,"name":"recovery:packet_lost","data":[1]}"#,
        br#"{"time":6,"name":"transport:packet_sent","data":{"header":{"packet_number":1}}}"#,
    ] {
        assert!(loss_record(handed_back, 1.0, &mut losses, &mut clock).is_err());
        assert!(losses.times.is_empty() && losses.triggers.is_empty());
        assert_eq!((clock.bound, clock.latest), (before.bound, before.latest));
    }
}
