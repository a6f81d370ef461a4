//! The streaming state deriver, step for step the one of `quicsm/extract/deriver.py`.
//!
//! The Python deriver is the reference: this one exists for speed and must give the same rows
//! for the same events (tests/test_native.py compares both on every committed trace and on
//! generated event sequences). The rule table itself is not copied here: `quicsm.extract.native`
//! hands over `quicsm.extract.rules.RULES` (state sets, event class, condition name, next state,
//! trigger) when a deriver is made, so the order and targets of the rules have one source. What
//! lives here is what the Python module implements in code: event classification, the context
//! updates and the conditions (by name).
//!
//! Python semantics kept on purpose: `max(a, b)` returns `a` unless `b > a` ([`pymax`]), the
//! probe-timeout backoff is `2 ** n` as an exact power of two (infinite from 2**1024 on, as the
//! Python deriver's guard makes it), and the probe counter is an unbounded integer (i128 here).

use crate::columns::Columns;

// states, event classes and metrics: generated from quicsm/core/tables.json (src/tables.rs)
pub use crate::tables::{
    ACK, COLLAPSE, CONGESTION_AVOIDANCE, CUTBACK, FLAG, INIT, LOSS, N_EVENTS, N_METRICS, N_STATES,
    PTO, PTO_COUNT, RECOVERY, SEND, SLOW_START, UNDO,
};
use crate::tables::{
    BYTES_IN_FLIGHT, CONGESTION_AVOIDANCE_MAXED, CWND_BYTES, LATEST_RTT_MS, RTT_VARIANCE_MS,
    SMOOTHED_RTT_MS, SSTHRESH_BYTES,
};
// the short names this module uses
pub const MAXED: u8 = CONGESTION_AVOIDANCE_MAXED;
pub const CWND: usize = CWND_BYTES;
pub const IN_FLIGHT: usize = BYTES_IN_FLIGHT;
pub const SSTHRESH: usize = SSTHRESH_BYTES;
pub const SRTT: usize = SMOOTHED_RTT_MS;
pub const LATEST_RTT: usize = LATEST_RTT_MS;
pub const RTTVAR: usize = RTT_VARIANCE_MS;

/// what an event is (generated from the feed kinds of quicsm/core/tables.json)
pub use crate::tables::FeedKind as Kind;

#[derive(Clone, Debug)]
pub struct Event {
    pub time: f64,
    pub kind: Kind,
    pub values: [Option<f64>; N_METRICS],
    pub app_limited: Option<bool>,
    /// a metrics or loss event's `trigger` (what `read_metrics` keeps; the rules do not read it)
    pub trigger: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    Always,
    FirstPto,
    InRecoveryPeriod,
    SlowStart,
    AppLimitedFlag,
    NotCwndLimited,
    AtWindowCap,
    WindowPlateau,
    UndoBackInRecovery,
}

impl Cond {
    /// The conditions implemented here, by the names of the Python functions they port
    /// (`quicsm.extract.rules`); a rule naming another is refused when a deriver is made.
    pub const NAMES: [&'static str; 9] = [
        "always",
        "first_pto",
        "in_recovery_period",
        "slow_start",
        "app_limited_flag",
        "not_cwnd_limited",
        "at_window_cap",
        "window_plateau",
        "undo_back_in_recovery",
    ];

    pub fn named(name: &str) -> Option<Cond> {
        Some(match name {
            "always" => Cond::Always,
            "first_pto" => Cond::FirstPto,
            "in_recovery_period" => Cond::InRecoveryPeriod,
            "slow_start" => Cond::SlowStart,
            "app_limited_flag" => Cond::AppLimitedFlag,
            "not_cwnd_limited" => Cond::NotCwndLimited,
            "at_window_cap" => Cond::AtWindowCap,
            "window_plateau" => Cond::WindowPlateau,
            "undo_back_in_recovery" => Cond::UndoBackInRecovery,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug)]
pub struct Rule {
    /// bit i set: applies in state i; `None`: in any state
    pub current: Option<u16>,
    pub event: u8,
    pub cond: Cond,
    pub to: u8,
    pub trigger: String,
}

#[derive(Clone, Debug)]
pub struct Profile {
    pub datagram_bytes: f64,
    pub burst_datagrams: f64,
    pub slow_start_half_window: bool,
    pub max_cwnd_datagrams: Option<f64>,
    pub min_cwnd_datagrams: f64,
    pub logs_ssthresh: bool,
    pub ssthresh_unset_from: f64,
    pub logs_pto: bool,
    pub persistent_congestion: bool,
    pub max_ack_delay_ms: f64,
}

#[derive(Clone, Debug)]
pub struct Thresholds {
    pub pto_gap_fraction: f64,
    pub granularity_ms: f64,
    pub slow_start_stall_datagrams: f64,
    pub plateau_windows: f64,
    pub datagram_step_min_bytes: f64,
    pub datagram_step_max_bytes: f64,
}

/// Python's `max(a, b)`: `a` unless `b > a`.
#[inline]
pub fn pymax(a: f64, b: f64) -> f64 {
    if b > a {
        b
    } else {
        a
    }
}

/// `2 ** n` as a float; infinite from 2**1024 on.
#[inline]
fn pow2(n: i128) -> f64 {
    if (0..1024).contains(&n) {
        f64::from_bits(((n + 1023) as u64) << 52) // exponent field n + 1023: exactly 2**n
    } else if n >= 1024 {
        f64::INFINITY
    } else {
        (2.0f64).powi(n as i32) // never: the counter only counts up or resets to 0
    }
}

/// The derived rows: three arrays, as `CompactRows` in Python.
#[derive(Default, Debug)]
pub struct Rows {
    pub times: Vec<f64>,
    pub states: Vec<u8>,
    pub triggers: Vec<u16>,
    pub trigger_names: Vec<String>,
}

impl Rows {
    fn trigger_code(&mut self, trigger: &str) -> u16 {
        if let Some(i) = self.trigger_names.iter().position(|t| t == trigger) {
            return i as u16;
        }
        self.trigger_names.push(trigger.to_string());
        (self.trigger_names.len() - 1) as u16
    }

    fn append(&mut self, time: f64, state: u8, code: u16) {
        self.times.push(time);
        self.states.push(state);
        self.triggers.push(code);
    }

    /// From `since` on, every stretch in one of `olds` becomes `new` (and the state in effect
    /// at `since`: a row is inserted there); repeats are merged.
    fn relabel_since(&mut self, since: f64, olds: &[u8], new: u8, tcode: u16) {
        let mut i = self.times.len();
        while i > 0 && self.times[i - 1] >= since {
            i -= 1;
        }
        for j in i..self.times.len() {
            if olds.contains(&self.states[j]) {
                self.states[j] = new;
                self.triggers[j] = tcode;
            }
        }
        if i > 0 && olds.contains(&self.states[i - 1]) {
            self.times.insert(i, since);
            self.states.insert(i, new);
            self.triggers.insert(i, tcode);
        }
        // merge repeats from max(i, 1) on (in place, as the Python loop of deletions does)
        let start = i.max(1);
        if start >= self.times.len() {
            return;
        }
        let mut w = start;
        for r in start..self.times.len() {
            if self.states[r] == self.states[w - 1] {
                continue;
            }
            self.times[w] = self.times[r];
            self.states[w] = self.states[r];
            self.triggers[w] = self.triggers[r];
            w += 1;
        }
        self.times.truncate(w);
        self.states.truncate(w);
        self.triggers.truncate(w);
    }
}

#[derive(Clone, Copy, Debug)]
struct Undo {
    cwnd: f64,
    inferred_ssthresh: f64,
    recovery_start: Option<f64>,
}

/// A short list of event classes (at most five per event).
#[derive(Default)]
struct Classes {
    items: [u8; 8],
    len: usize,
}

impl Classes {
    fn push(&mut self, c: u8) {
        self.items[self.len] = c;
        self.len += 1;
    }
    fn as_slice(&self) -> &[u8] {
        &self.items[..self.len]
    }
}

pub struct Deriver {
    /// a recorder's columns ([`Deriver::recorder`]): every event fed is kept, none derived
    pub columns: Option<Columns>,
    p: Profile,
    th: Thresholds,
    rules: Vec<Rule>,
    /// per rule, its trigger's code in `rows` once used (`u16::MAX` before)
    rule_codes: Vec<u16>,
    by_event: [Vec<usize>; N_EVENTS],
    // --- the context (quicsm.extract.rules.Context)
    pub state: u8,
    time: f64,
    cwnd: Option<f64>,
    prior_cwnd: Option<f64>,
    logged_ssthresh: Option<f64>,
    inferred_ssthresh: f64,
    bytes_in_flight: Option<f64>,
    prior_in_flight: Option<f64>,
    smoothed_rtt: Option<f64>,
    rtt_variance: Option<f64>,
    rtt_sample: Option<f64>,
    datagram: f64,
    consecutive_ptos: i128,
    recovery_start: Option<f64>,
    last_send: Option<f64>,
    acked_since_change: f64,
    pub app_limited_flag: Option<bool>,
    stall_is_cap: bool,
    cap_datagrams: Option<f64>,
    pub seen_cwnd: bool,
    pub seen_in_flight: bool,
    pub seen_rtt: bool,
    pub seen_pto: bool,
    // --- the deriver's own
    undo: Option<Undo>,
    spurious_pending: bool,
    loss_since_metrics: bool,
    loss_time: f64,
    losses: i64,
    pub events: i64,
    last_rtt: Option<f64>,
    stalled_from: Option<f64>,
    event_time: Option<f64>,
    last_row: f64,
    window_changed_at: Option<f64>,
    pub rows: Rows,
}

impl Deriver {
    /// A deriver that derives nothing and keeps every event it is fed as columns (the reader
    /// of metrics feeds it as the derived path feeds a deriver).
    pub fn recorder() -> Deriver {
        let p = Profile {
            datagram_bytes: 1200.0,
            burst_datagrams: 0.0,
            slow_start_half_window: false,
            max_cwnd_datagrams: None,
            min_cwnd_datagrams: 0.0,
            logs_ssthresh: false,
            ssthresh_unset_from: f64::INFINITY,
            logs_pto: false,
            persistent_congestion: false,
            max_ack_delay_ms: 0.0,
        };
        let th = Thresholds {
            pto_gap_fraction: 0.0,
            granularity_ms: 0.0,
            slow_start_stall_datagrams: 0.0,
            plateau_windows: 0.0,
            datagram_step_min_bytes: 0.0,
            datagram_step_max_bytes: 0.0,
        };
        let mut d = Deriver::new(p, th, Vec::new());
        d.columns = Some(Columns::new());
        d
    }

    pub fn new(p: Profile, th: Thresholds, rules: Vec<Rule>) -> Deriver {
        let mut by_event: [Vec<usize>; N_EVENTS] = Default::default();
        for (i, r) in rules.iter().enumerate() {
            by_event[r.event as usize].push(i);
        }
        let datagram = p.datagram_bytes;
        Deriver {
            columns: None,
            p,
            th,
            rule_codes: vec![u16::MAX; rules.len()],
            rules,
            by_event,
            state: INIT,
            time: 0.0,
            cwnd: None,
            prior_cwnd: None,
            logged_ssthresh: None,
            inferred_ssthresh: f64::INFINITY,
            bytes_in_flight: None,
            prior_in_flight: None,
            smoothed_rtt: None,
            rtt_variance: None,
            rtt_sample: None,
            datagram,
            consecutive_ptos: 0,
            recovery_start: None,
            last_send: None,
            acked_since_change: 0.0,
            app_limited_flag: None,
            stall_is_cap: false,
            cap_datagrams: None,
            seen_cwnd: false,
            seen_in_flight: false,
            seen_rtt: false,
            seen_pto: false,
            undo: None,
            spurious_pending: false,
            loss_since_metrics: false,
            loss_time: 0.0,
            losses: 0,
            events: 0,
            last_rtt: None,
            stalled_from: None,
            event_time: None,
            last_row: f64::NEG_INFINITY,
            window_changed_at: None,
            rows: Rows::default(),
        }
    }

    // -- conditions ------------------------------------------------------------------------

    fn ssthresh(&self) -> f64 {
        self.logged_ssthresh.unwrap_or(self.inferred_ssthresh)
    }

    fn window_before(&self) -> Option<f64> {
        self.prior_cwnd.or(self.cwnd)
    }

    fn slow_start(&self) -> bool {
        match self.window_before() {
            None => true,
            Some(w) => w < self.ssthresh(),
        }
    }

    fn not_cwnd_limited(&self) -> bool {
        let (window, in_flight) = match (self.window_before(), self.prior_in_flight) {
            (Some(w), Some(f)) => (w, f),
            _ => return false,
        };
        if in_flight >= window {
            return false;
        }
        if self.p.slow_start_half_window && self.slow_start() && in_flight > window / 2.0 {
            return false;
        }
        window - in_flight > self.p.burst_datagrams * self.datagram
    }

    fn at_window_cap(&self) -> bool {
        let window = match self.window_before() {
            None => return false,
            Some(w) => w,
        };
        for cap in [self.p.max_cwnd_datagrams, self.cap_datagrams].into_iter().flatten() {
            if window >= (cap - 0.5) * self.datagram {
                return true;
            }
        }
        false
    }

    fn window_plateau(&self) -> bool {
        let window = match self.cwnd {
            None => return false,
            Some(w) => w,
        };
        if self.slow_start() {
            return (self.logged_ssthresh.is_some() || self.p.logs_ssthresh || self.stall_is_cap)
                && self.acked_since_change >= self.th.slow_start_stall_datagrams * self.datagram;
        }
        self.acked_since_change >= self.th.plateau_windows * window
    }

    fn holds(&self, cond: Cond) -> bool {
        match cond {
            Cond::Always => true,
            Cond::FirstPto => self.consecutive_ptos <= 1,
            Cond::InRecoveryPeriod | Cond::UndoBackInRecovery => self.recovery_start.is_some(),
            Cond::SlowStart => self.slow_start(),
            Cond::AppLimitedFlag => self.app_limited_flag == Some(true),
            Cond::NotCwndLimited => self.not_cwnd_limited(),
            Cond::AtWindowCap => self.at_window_cap(),
            Cond::WindowPlateau => self.window_plateau(),
        }
    }

    fn next_state(&self, event: u8) -> Option<usize> {
        for &i in &self.by_event[event as usize] {
            let r = &self.rules[i];
            let in_state = match r.current {
                None => true,
                Some(mask) => mask & (1 << self.state) != 0,
            };
            if in_state && self.holds(r.cond) {
                return Some(i);
            }
        }
        None
    }

    // -- feeding ---------------------------------------------------------------------------

    pub fn feed(&mut self, event: &Event) {
        if let Some(columns) = self.columns.as_mut() {
            columns.push(event);
            return; // a recorder derives nothing
        }
        self.events += 1;
        let time = event.time;
        self.time = if self.events > 1 { pymax(time, self.time) } else { time };
        let mut classes = Classes::default();
        match event.kind {
            Kind::Metrics => self.metrics(event, &mut classes),
            Kind::PacketLost => {
                self.losses += 1;
                if !self.loss_since_metrics {
                    self.loss_time = self.time;
                }
                self.loss_since_metrics = true;
                if !self.seen_cwnd {
                    classes.push(LOSS);
                    self.recovery_start = Some(self.time);
                }
            }
            Kind::Pto => {
                self.seen_pto = true;
                if self.bytes_in_flight.is_none_or(|f| f > 0.0) {
                    self.consecutive_ptos += 1;
                    classes.push(PTO);
                }
            }
            Kind::SpuriousLoss => self.spurious_pending = true,
        }
        self.apply(classes.as_slice());
    }

    fn apply(&mut self, classes: &[u8]) {
        let before = self.state;
        let mut time = self.event_time.take().unwrap_or(self.time);
        let mut fired: Option<usize> = None;
        for &event in classes {
            if event == ACK {
                self.on_ack();
            }
            if let Some(i) = self.next_state(event) {
                self.state = self.rules[i].to;
                fired = Some(i);
            }
        }
        if let Some(i) = fired {
            if self.state != before {
                time = pymax(time, self.last_row);
                self.last_row = time;
                let rule = &self.rules[i];
                let plateau = rule.event == ACK && rule.cond == Cond::WindowPlateau;
                // the rule's trigger code, found among the rows' names once per rule (a state
                // change costs no string comparison or copy)
                let mut code = self.rule_codes[i];
                if code == u16::MAX {
                    code = self.rows.trigger_code(&rule.trigger);
                    self.rule_codes[i] = code;
                }
                self.rows.append(time, self.state, code);
                if plateau {
                    if let Some(since) = self.window_changed_at {
                        self.rows.relabel_since(
                            since,
                            &[SLOW_START, CONGESTION_AVOIDANCE],
                            MAXED,
                            code,
                        );
                    }
                }
            }
        }
    }

    fn metrics(&mut self, event: &Event, classes: &mut Classes) {
        let values = &event.values;
        self.prior_cwnd = self.cwnd;
        self.prior_in_flight = self.bytes_in_flight;
        self.rtt_sample = None;
        let loss_before = self.loss_since_metrics;
        self.loss_since_metrics = false;

        if let Some(v) = values[SRTT] {
            self.smoothed_rtt = Some(v);
        }
        if let Some(v) = values[RTTVAR] {
            self.rtt_variance = Some(v);
        }
        let mut sample = values[LATEST_RTT];
        if let Some(s) = sample {
            if s <= 0.0 || self.last_rtt == Some(s) {
                sample = None;
            } else {
                self.last_rtt = Some(s);
            }
        }
        if let Some(s) = sample {
            self.rtt_sample = Some(s);
            self.seen_rtt = true;
        }
        if let Some(ss) = values[SSTHRESH] {
            self.logged_ssthresh = if ss < self.p.ssthresh_unset_from { Some(ss) } else { None };
        }
        if let Some(pc) = values[PTO_COUNT] {
            self.seen_pto = true;
            let count = pc as i128; // a non-negative integer below 2**63 (checked when read)
            if count > self.consecutive_ptos && self.bytes_in_flight.is_none_or(|f| f > 0.0) {
                self.consecutive_ptos = count;
                classes.push(PTO);
            } else if count == 0 {
                self.consecutive_ptos = 0;
            }
        }

        let mut acked = false;
        if let Some(in_flight) = values[IN_FLIGHT] {
            self.seen_in_flight = true;
            let prior = self.prior_in_flight;
            self.bytes_in_flight = Some(in_flight);
            if sample.is_some() || (prior.is_some_and(|p| in_flight < p) && !loss_before) {
                acked = true;
            } else if let Some(p) = prior.filter(|&p| in_flight > p) {
                if self.probe_after_silence(p) {
                    self.consecutive_ptos += 1;
                    classes.push(PTO);
                }
                self.last_send = Some(self.time);
                classes.push(SEND);
            }
        } else if sample.is_some() {
            acked = true;
        }

        let mut window_classes = Classes::default();
        if let Some(window) = values[CWND] {
            let prior_window = self.cwnd;
            self.cwnd = Some(window);
            self.seen_cwnd = true;
            match prior_window {
                None => {
                    if !self.seen_in_flight {
                        acked = true;
                    }
                }
                Some(pw) if window < pw => {
                    self.window_changed_at = Some(self.time);
                    self.acked_since_change = 0.0;
                    self.stall_is_cap = false;
                    self.stalled_from = None;
                    self.undo = Some(Undo {
                        cwnd: pw,
                        inferred_ssthresh: self.inferred_ssthresh,
                        recovery_start: self.recovery_start,
                    });
                    self.inferred_ssthresh = window;
                    if self.p.persistent_congestion
                        && window <= self.p.min_cwnd_datagrams * self.datagram
                        && (loss_before || self.losses != 0)
                        && self.state == RECOVERY
                    {
                        window_classes.push(COLLAPSE);
                    } else {
                        window_classes.push(CUTBACK);
                    }
                    let start =
                        if loss_before { pymax(self.loss_time, self.last_row) } else { self.time };
                    self.recovery_start = Some(start);
                    self.event_time = Some(start);
                }
                Some(pw) if window > pw => {
                    self.window_changed_at = Some(self.time);
                    self.acked_since_change = 0.0;
                    self.stall_is_cap = false;
                    self.stalled_from = None;
                    let step = window - pw;
                    if !self.p.logs_ssthresh {
                        for count in [1.0f64, 2.0] {
                            let size = step / count;
                            if self.th.datagram_step_min_bytes <= size
                                && size <= self.th.datagram_step_max_bytes
                            {
                                self.datagram = size;
                                break;
                            }
                        }
                    }
                    if self.spurious_pending {
                        if let Some(undo) = self.undo {
                            if window >= undo.cwnd {
                                self.inferred_ssthresh = undo.inferred_ssthresh;
                                self.recovery_start = undo.recovery_start;
                                self.undo = None;
                                self.spurious_pending = false;
                                window_classes.push(UNDO);
                            }
                        }
                    }
                }
                Some(_) => {
                    if !self.seen_in_flight {
                        acked = true;
                    }
                }
            }
        }
        if acked {
            classes.push(ACK);
        }
        for &c in window_classes.as_slice() {
            classes.push(c);
        }
        if let Some(flag) = event.app_limited {
            if Some(flag) != self.app_limited_flag {
                self.app_limited_flag = Some(flag);
                classes.push(FLAG);
            }
        }
    }

    fn probe_after_silence(&self, prior_in_flight: f64) -> bool {
        if self.p.logs_pto || self.seen_pto {
            return false;
        }
        let (last_send, srtt) = match (self.last_send, self.smoothed_rtt) {
            (Some(l), Some(s)) => (l, s),
            _ => return false,
        };
        if prior_in_flight <= 0.0 {
            return false;
        }
        let rttvar = self.rtt_variance.unwrap_or(srtt / 2.0);
        let period = (srtt + pymax(4.0 * rttvar, self.th.granularity_ms) + self.p.max_ack_delay_ms)
            * pow2(self.consecutive_ptos);
        self.time - last_send >= self.th.pto_gap_fraction * period
    }

    fn on_ack(&mut self) {
        self.consecutive_ptos = 0;
        if let (Some(start), Some(sample)) = (self.recovery_start, self.rtt_sample) {
            if self.time - sample > start {
                self.recovery_start = None;
            }
        }
        if self.recovery_start.is_some() {
            return;
        }
        let (prior, in_flight, cwnd) = match (self.prior_in_flight, self.bytes_in_flight, self.cwnd)
        {
            (Some(p), Some(f), Some(c)) => (p, f, c),
            _ => return,
        };
        if self.prior_cwnd != Some(cwnd) || self.not_cwnd_limited() {
            return;
        }
        self.acked_since_change += pymax(0.0, prior - in_flight);
        if self.logged_ssthresh.is_some() || self.p.logs_ssthresh {
            return;
        }
        if self.slow_start() && !self.stall_is_cap {
            if self.acked_since_change >= self.th.slow_start_stall_datagrams * self.datagram {
                self.stalled_from = Some(self.inferred_ssthresh);
                self.inferred_ssthresh = cwnd;
            }
        } else if let Some(from) = self.stalled_from {
            if self.acked_since_change >= self.th.plateau_windows * cwnd {
                self.inferred_ssthresh = from;
                self.stall_is_cap = true;
                self.cap_datagrams = Some(cwnd / self.datagram);
                self.stalled_from = None;
            }
        }
    }
}
