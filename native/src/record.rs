//! One qlog event record, decoded as far as the deriver needs it.
//!
//! The contract with the Python reader: a record this module accepts ([`decode`] returns
//! `Ok`) is one that `orjson.loads` accepts and that `quicsm.qlog.trace.TraceBuilder.add`
//! turns into the same event without a problem. Anything else, including valid JSON this
//! module does not care to mirror exactly (escaped keys, duplicate keys among the fields read,
//! two names of one metric, non-ASCII event names, integers beyond 64 bits, deep nesting), is
//! `Err(Fallback)`: the Python reader decodes that record itself, reports its problem if it has
//! one, and feeds the event to the same deriver. Being stricter than orjson is therefore safe;
//! being more lenient never is.

use crate::deriver::{Event, Kind, N_METRICS, PTO_COUNT};
use crate::tables::{EventKind, APP_LIMITED_NAMES, EVENT_KIND_NAMES, METRIC_NAMES, TIME_METRICS};

#[derive(Debug)]
pub struct Fallback;

type R<T> = Result<T, Fallback>;

/// The lower-cased part of an ASCII name after its last ':', looked up in the event-name table
/// (`EVENT_KIND_NAMES`, generated from quicsm/core/tables.json).
pub(crate) fn event_kind(name: &[u8]) -> R<Option<EventKind>> {
    if !name.is_ascii() {
        return Err(Fallback); // Unicode lower-casing is Python's to do
    }
    let tail = match memchr::memrchr(b':', name) {
        Some(i) => &name[i + 1..],
        None => name,
    };
    // the names as producers write them (lower case) by whole words first; any other case
    // after
    if let Some(&(_, kind, _)) = EVENT_KIND_NAMES.iter().find(|(n, _, _)| same(n, tail)) {
        return Ok(Some(kind));
    }
    Ok(EVENT_KIND_NAMES
        .iter()
        .find(|(n, _, _)| tail.eq_ignore_ascii_case(n))
        .map(|&(_, kind, _)| kind))
}

/// A JSON number as the float Python makes of it: an integer within [-2**63, 2**64) (orjson's
/// int) converted as `float(int)` does (round-half-even; `-0` is `0.0`), or a finite float.
type Num = f64;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flag {
    Absent,
    /// present, neither a bool nor a number
    Other,
    Value(bool),
}

/// The members of ``data`` the deriver reads.
pub(crate) struct Data<'a> {
    /// per metric: how many of its names are present, and the value (None: JSON null)
    names: [u8; N_METRICS],
    values: [Option<Num>; N_METRICS],
    flags: [Flag; APP_LIMITED_NAMES.len()],
    timer_type: Option<&'a [u8]>,
    event_type: Option<&'a [u8]>,
    /// `trigger` when it is a string (`quicsm.qlog.events.metric_event` keeps it only then)
    trigger: Option<&'a [u8]>,
    seen_timer_type: bool,
    seen_event_type: bool,
    seen_trigger: bool,
}

impl Data<'_> {
    pub(crate) fn new() -> Self {
        Data {
            names: [0; N_METRICS],
            values: [None; N_METRICS],
            flags: [Flag::Absent; APP_LIMITED_NAMES.len()],
            timer_type: None,
            event_type: None,
            trigger: None,
            seen_timer_type: false,
            seen_event_type: false,
            seen_trigger: false,
        }
    }
}

/// What a member of `data` is to the decoder.
#[derive(Clone, Copy)]
enum Key {
    /// a name of a metric: (its bit among the names read, the metric)
    Metric(usize, usize),
    /// an application-limited flag (its position in `APP_LIMITED_NAMES`)
    Flag(usize),
    TimerType,
    EventType,
    Trigger,
    Other,
}

/// The names of each length and what they are.
type KeyTable = Vec<Vec<(&'static [u8], Key)>>;

/// The names the decoder reads in `data`, by length (a key is compared only with the names of
/// its own length: a few at most, where comparing it with every name cost a third of a
/// metrics record's decoding).
fn keys_by_length() -> &'static [Vec<(&'static [u8], Key)>] {
    static KEYS: std::sync::OnceLock<KeyTable> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        let mut named: Vec<(&'static [u8], Key)> = Vec::new();
        for (bit, &(name, metric)) in METRIC_NAMES.iter().enumerate() {
            named.push((name, Key::Metric(bit, metric)));
        }
        for (k, &name) in APP_LIMITED_NAMES.iter().enumerate() {
            named.push((name, Key::Flag(k)));
        }
        named.push((b"timer_type", Key::TimerType));
        named.push((b"event_type", Key::EventType));
        named.push((b"trigger", Key::Trigger));
        let longest = named.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        let mut table = vec![Vec::new(); longest + 1];
        for (name, key) in named {
            // the first of equal names wins, as the comparisons in this order did
            if !table[name.len()].iter().any(|(n, _)| *n == name) {
                table[name.len()].push((name, key));
            }
        }
        table
    })
}

/// `a == b` for the short names of a record, by whole words (a call of memcmp per key cost
/// more than the comparison).
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    #[inline]
    fn word(s: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(s[at..at + 8].try_into().unwrap())
    }
    #[inline]
    fn half(s: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(s[at..at + 4].try_into().unwrap())
    }
    match n {
        0..=3 => a == b,
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        17..=24 => {
            word(a, 0) == word(b, 0) && word(a, 8) == word(b, 8) && word(a, n - 8) == word(b, n - 8)
        }
        _ => a == b,
    }
}

#[inline]
fn data_key(key: &[u8]) -> Key {
    match keys_by_length().get(key.len()) {
        Some(names) => names.iter().find(|(n, _)| same(n, key)).map_or(Key::Other, |&(_, k)| k),
        None => Key::Other,
    }
}

/// The ASCII digits of `b` from `start`: where they end, and `acc` with each digit appended
/// (wrapping: only used when few). In locals and by value, so the loop keeps its position and
/// sum in registers (through references it stored both back to memory per digit).
#[inline(always)]
fn digits_at(b: &[u8], start: usize, acc: u64) -> (usize, u64) {
    let (mut i, mut sum) = (start, acc);
    while let Some(&c) = b.get(i) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        sum = sum.wrapping_mul(10).wrapping_add(d as u64);
        i += 1;
    }
    (i, sum)
}

/// 10**k, exact as floats for k <= 22
const POW10: [f64; 16] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];

/// From `i`, the first position of a 16-byte block of `b` holding a quote, a backslash, a
/// control character or (with `high`) a byte above 0x7f, or the start of the last partial
/// block: the string loop's wide step.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn special_at_16(b: &[u8], mut i: usize, high: bool) -> usize {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // SAFETY: SSE2 is part of the x86-64 baseline; each unaligned load reads b[i..i + 16],
    // within b
    unsafe {
        let quote = _mm_set1_epi8(b'"' as i8);
        let backslash = _mm_set1_epi8(b'\\' as i8);
        let below_space = _mm_set1_epi8(0x1f);
        while i + 16 <= b.len() {
            let v = _mm_loadu_si128(b.as_ptr().add(i) as *const __m128i);
            // a control character is a byte whose unsigned minimum with 0x1f is itself
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, below_space), v);
            let special = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                control,
            );
            let mut mask = _mm_movemask_epi8(special) as u32;
            if high {
                mask |= _mm_movemask_epi8(v) as u32; // the high bit of each byte
            }
            if mask != 0 {
                return i + mask.trailing_zeros() as usize;
            }
            i += 16;
        }
    }
    i
}

pub(crate) struct Parser<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) i: usize,
    /// the line feeds passed over (they are white space: a string holds none)
    pub(crate) lines: u64,
}

const MAX_DEPTH: u32 = 256;

impl<'a> Parser<'a> {
    #[inline(always)]
    pub(crate) fn ws(&mut self) {
        // the common case first, in one comparison: no white space at all (every byte above
        // the space is not white space; the end of the bytes is not either)
        match self.b.get(self.i) {
            Some(&c) if c > b' ' => return,
            Some(b' ' | b'\t' | b'\r' | b'\n') => {}
            _ => return,
        }
        self.ws_run();
    }

    /// The white space at `self.i` onwards (at least one byte of it), line feeds counted.
    #[inline(never)]
    fn ws_run(&mut self) {
        let b = self.b;
        let mut i = self.i;
        while let Some(&c) = b.get(i) {
            match c {
                b' ' | b'\t' | b'\r' => {}
                b'\n' => self.lines += 1,
                _ => break,
            }
            i += 1;
        }
        self.i = i;
    }

    #[inline]
    pub(crate) fn peek(&self) -> R<u8> {
        self.b.get(self.i).copied().ok_or(Fallback)
    }

    #[inline]
    pub(crate) fn expect(&mut self, c: u8) -> R<()> {
        if self.peek()? != c {
            return Err(Fallback);
        }
        self.i += 1;
        Ok(())
    }

    /// A string at `"`: its raw content and whether it holds an escape. The content is
    /// checked to be UTF-8 (the bytes outside strings that the parser accepts are ASCII).
    #[inline(always)]
    pub(crate) fn string(&mut self) -> R<(&'a [u8], bool)> {
        self.expect(b'"')?;
        let b = self.b;
        let start = self.i;
        let mut i = self.i;
        let mut escaped = false;
        let mut ascii = true;
        let mut high: u64 = 0x8080_8080_8080_8080; // non-ASCII stops the word loop until seen
        loop {
            // sixteen bytes at a time (SSE2, in every x86-64) while none is a quote, a
            // backslash, a control character or (until one was seen) non-ASCII
            #[cfg(target_arch = "x86_64")]
            let found = {
                i = special_at_16(b, i, high != 0);
                i + 16 <= b.len() // the byte at i is the one flagged: no word loop
            };
            #[cfg(not(target_arch = "x86_64"))]
            let found = false;
            // else eight bytes at a time, as above (the lowest flagged byte of each test is
            // exact)
            while let Some(word) = b.get(i..i + 8).filter(|_| !found) {
                let w = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
                const ONES: u64 = 0x0101_0101_0101_0101;
                const HIGH: u64 = 0x8080_8080_8080_8080;
                let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
                let special = zero(w ^ (ONES * b'"' as u64))
                    | zero(w ^ (ONES * b'\\' as u64))
                    | (w.wrapping_sub(ONES * 0x20) & !w & HIGH)
                    | (w & high);
                if special != 0 {
                    i += (special.trailing_zeros() / 8) as usize;
                    break;
                }
                i += 8;
            }
            let c = *b.get(i).ok_or(Fallback)?;
            match c {
                b'"' => {
                    let s = &b[start..i];
                    if !ascii && std::str::from_utf8(s).is_err() {
                        return Err(Fallback);
                    }
                    self.i = i + 1;
                    return Ok((s, escaped));
                }
                b'\\' => {
                    escaped = true;
                    i += 1;
                    match *b.get(i).ok_or(Fallback)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 1,
                        b'u' => {
                            let hex = b.get(i + 1..i + 5).ok_or(Fallback)?;
                            let mut v: u32 = 0;
                            for &h in hex {
                                v = v * 16 + (h as char).to_digit(16).ok_or(Fallback)?;
                            }
                            if (0xD800..=0xDFFF).contains(&v) {
                                return Err(Fallback); // surrogates: orjson's rules, not ours
                            }
                            i += 5;
                        }
                        _ => return Err(Fallback),
                    }
                }
                0..=0x1f => return Err(Fallback),
                0x80.. => {
                    ascii = false;
                    high = 0;
                    i += 1;
                }
                _ => i += 1,
            }
        }
    }

    /// A number; `value`: its value is needed (else it is only checked to be one orjson reads).
    #[inline]
    fn number(&mut self, value: bool) -> R<Num> {
        // an integer is converted to a float here, as Python's float(int) would: exactly below
        // 2**53, else rounded half to even (as i128 as f64); -0 is the integer 0. The position
        // is a local until the number ends (kept in a register, not stored per byte).
        let b = self.b;
        let start = self.i;
        let mut i = start;
        let negative = *b.get(i).ok_or(Fallback)? == b'-';
        if negative {
            i += 1;
        }
        let mut mantissa: u64 = 0;
        let mut n_digits = match *b.get(i).ok_or(Fallback)? {
            b'0' => {
                i += 1;
                1
            }
            b'1'..=b'9' => {
                let (j, m) = digits_at(b, i, 0);
                let n = j - i;
                (i, mantissa) = (j, m);
                n
            }
            _ => return Err(Fallback),
        };
        let mut integer = true;
        let mut exponent = false;
        let mut n_fraction = 0;
        if b.get(i) == Some(&b'.') {
            i += 1;
            integer = false;
            let (j, m) = digits_at(b, i, mantissa);
            n_fraction = j - i;
            (i, mantissa) = (j, m);
            if n_fraction == 0 {
                return Err(Fallback);
            }
            n_digits += n_fraction;
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            i += 1;
            integer = false;
            exponent = true;
            if matches!(b.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let (j, _) = digits_at(b, i, 0);
            if j == i {
                return Err(Fallback);
            }
            i = j;
        }
        self.i = i;
        if n_digits <= 15 && !exponent {
            // exact: the mantissa and the power of ten are floats exactly, and one division
            // rounds correctly (Clinger's fast path), as a full parse would
            if integer {
                let v = mantissa as f64; // exact: at most 15 digits
                return Ok(if negative && mantissa != 0 { -v } else { v });
            }
            let v = mantissa as f64 / POW10[n_fraction];
            return Ok(if negative { -v } else { v });
        }
        let text = &self.b[start..self.i];
        // SAFETY: the bytes are ASCII digits, signs, '.', 'e'
        let text = unsafe { std::str::from_utf8_unchecked(text) };
        if integer {
            if text.len() <= 20 {
                let v: i128 = text.parse().map_err(|_| Fallback)?;
                if (-(1i128 << 63)..(1i128 << 64)).contains(&v) {
                    return Ok(v as f64);
                }
            }
            // orjson reads other integers as floats; their values are Python's to convert
            if value {
                return Err(Fallback);
            }
            let f: f64 = text.parse().map_err(|_| Fallback)?;
            return if f.is_finite() { Ok(f) } else { Err(Fallback) };
        }
        if value || exponent || text.len() > 300 {
            let f: f64 = text.parse().map_err(|_| Fallback)?;
            if !f.is_finite() {
                return Err(Fallback); // orjson: "number is infinity"
            }
            return Ok(f);
        }
        Ok(0.0) // a plain decimal of at most 300 characters: finite, value unused
    }

    /// The members of the object at `{`, its closing brace included: each member's key (raw,
    /// and whether it holds an escape) goes to `member`, which reads the value; returns how many
    /// members there were. The one member loop of every object read (`skip`, `data`, [`parts`],
    /// and the state fields of `crate::contained`).
    #[inline(always)]
    pub(crate) fn object<F>(&mut self, mut member: F) -> R<usize>
    where
        F: FnMut(&mut Self, &'a [u8], bool) -> R<()>,
    {
        self.expect(b'{')?;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Ok(0);
        }
        let mut n = 0;
        loop {
            self.ws();
            let (key, escaped) = self.string()?;
            self.ws();
            self.expect(b':')?;
            self.ws();
            member(self, key, escaped)?;
            n += 1;
            self.ws();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Ok(n);
                }
                _ => return Err(Fallback),
            }
        }
    }

    /// Checks and skips any value; `depth` is its nesting (a value nested deeper than
    /// `MAX_DEPTH` is handed back). One loop over the value's tokens with a stack of the open
    /// containers (a bit each: object or array), not a call per nested value: it accepts what
    /// the recursive reading of the grammar accepted (`skip_recursive`, kept in the tests as
    /// the reference).
    pub(crate) fn skip(&mut self, depth: u32) -> R<()> {
        // the containers open, innermost last: bit set = object
        let mut objects = [0u64; (MAX_DEPTH as usize + 2).div_ceil(64)];
        let mut open: usize = 0;
        'value: loop {
            if depth + open as u32 > MAX_DEPTH {
                return Err(Fallback);
            }
            match self.peek()? {
                b'"' => {
                    self.string()?;
                }
                b'{' => {
                    self.i += 1;
                    self.ws();
                    if self.peek()? == b'}' {
                        self.i += 1;
                    } else {
                        objects[open / 64] |= 1 << (open % 64);
                        open += 1;
                        self.member_key()?;
                        continue 'value;
                    }
                }
                b'[' => {
                    self.i += 1;
                    self.ws();
                    if self.peek()? == b']' {
                        self.i += 1;
                    } else {
                        objects[open / 64] &= !(1 << (open % 64));
                        open += 1;
                        self.ws();
                        continue 'value;
                    }
                }
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                _ => self.skip_number()?,
            }
            // after a value: the containers it ends
            loop {
                if open == 0 {
                    return Ok(());
                }
                let object = objects[(open - 1) / 64] & (1 << ((open - 1) % 64)) != 0;
                self.ws();
                match self.peek()? {
                    b',' => {
                        self.i += 1;
                        if object {
                            self.ws();
                            self.member_key()?;
                        } else {
                            self.ws();
                        }
                        continue 'value;
                    }
                    b'}' if object => {
                        self.i += 1;
                        open -= 1;
                    }
                    b']' if !object => {
                        self.i += 1;
                        open -= 1;
                    }
                    _ => return Err(Fallback),
                }
            }
        }
    }

    /// A member's key and its colon, the white space around them: the parser at its value.
    #[inline(always)]
    fn member_key(&mut self) -> R<()> {
        self.ws();
        self.string()?;
        self.ws();
        self.expect(b':')?;
        self.ws();
        Ok(())
    }

    /// Checks and skips a number whose value is not needed: what [`Parser::number`] with
    /// `value` false accepts, without computing a value. A plain number of at most 18
    /// characters (no exponent) is checked here by its grammar alone (every such number is
    /// one orjson reads: an integer within 64 bits, or a finite decimal); any other is left to
    /// `number`, read again from its start.
    #[inline]
    fn skip_number(&mut self) -> R<()> {
        let b = self.b;
        let start = self.i;
        let mut i = start;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                i += 1;
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
            }
            _ => return Err(Fallback),
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            let from = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == from {
                return Err(Fallback);
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) || i - start > 18 {
            self.number(false)?; // exponents and long numbers: their value decides
            return Ok(());
        }
        self.i = i;
        Ok(())
    }

    pub(crate) fn literal(&mut self, word: &[u8]) -> R<()> {
        if self.b.get(self.i..self.i + word.len()) != Some(word) {
            return Err(Fallback);
        }
        self.i += word.len();
        Ok(())
    }

    /// A value that must be a number or null (a metric).
    fn metric(&mut self) -> R<Option<Num>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Ok(None);
        }
        match self.peek()? {
            b'-' | b'0'..=b'9' => Ok(Some(self.number(true)?)),
            _ => Err(Fallback), // strings, bools: Python's conversions and messages
        }
    }

    fn flag(&mut self) -> R<Flag> {
        Ok(match self.peek()? {
            b't' => {
                self.literal(b"true")?;
                Flag::Value(true)
            }
            b'f' => {
                self.literal(b"false")?;
                Flag::Value(false)
            }
            b'-' | b'0'..=b'9' => {
                let n = self.number(true)?;
                Flag::Value(n != 0.0)
            }
            _ => {
                self.skip(1)?;
                Flag::Other
            }
        })
    }

    /// A string value to compare (`None`: not a string).
    fn text(&mut self) -> R<Option<&'a [u8]>> {
        if self.peek()? == b'"' {
            let (s, escaped) = self.string()?;
            if escaped {
                return Err(Fallback);
            }
            return Ok(Some(s));
        }
        self.skip(1)?;
        Ok(None)
    }

    /// The members of `data` the deriver reads, into `d` (fresh: [`Data::new`]).
    fn data(&mut self, d: &mut Data<'a>) -> R<()> {
        let mut seen_names: u32 = 0; // bit per metric name / flag name read (duplicates)
        self.object(|p, key, escaped| {
            if escaped {
                return Err(Fallback);
            }
            match data_key(key) {
                Key::Metric(bit, metric) => {
                    if seen_names & (1 << bit) != 0 {
                        return Err(Fallback);
                    }
                    seen_names |= 1 << bit;
                    d.names[metric] += 1;
                    d.values[metric] = p.metric()?;
                }
                Key::Flag(k) => {
                    let bit = METRIC_NAMES.len() + k;
                    if seen_names & (1 << bit) != 0 {
                        return Err(Fallback);
                    }
                    seen_names |= 1 << bit;
                    d.flags[k] = p.flag()?;
                }
                Key::TimerType => {
                    if d.seen_timer_type {
                        return Err(Fallback);
                    }
                    d.seen_timer_type = true;
                    d.timer_type = p.text()?;
                }
                Key::EventType => {
                    if d.seen_event_type {
                        return Err(Fallback);
                    }
                    d.seen_event_type = true;
                    d.event_type = p.text()?;
                }
                Key::Trigger => {
                    if d.seen_trigger {
                        return Err(Fallback); // Python keeps the last: not mirrored
                    }
                    d.seen_trigger = true;
                    d.trigger = p.text()?;
                }
                Key::Other => p.skip(1)?,
            }
            Ok(())
        })?;
        Ok(())
    }
}

/// A decoded record: its kind, its time (before scaling) and the event it carries.
pub struct Decoded {
    pub kind: Option<EventKind>,
    pub time: f64,
    pub event: Option<Event>,
}

/// 2**63, exactly: a PTO count at or above it is not an int64
const TWO_63: f64 = (1u64 << 63) as f64;

/// The largest magnitude accepted for a time (`quicsm.qlog.events.MAX_MAGNITUDE`).
const MAX_MAGNITUDE: f64 = 1e18;

/// Decodes one record (the bytes between two separators). `scale` is the trace's time scale
/// (1 or 0.001), applied to the time and to the RTT metrics.
pub fn decode(record: &[u8], scale: f64) -> R<Decoded> {
    let mut event = blank_event();
    let (kind, time, has_event) = decode_into(record, scale, &mut event)?;
    Ok(Decoded { kind, time, event: has_event.then_some(event) })
}

/// An event to decode into ([`decode_into`] sets every field of it).
pub fn blank_event() -> Event {
    Event {
        time: 0.0,
        kind: Kind::Metrics,
        values: [None; N_METRICS],
        app_limited: None,
        trigger: None,
    }
}

/// [`decode`], the event written into `out` (the scan reuses one: no copy of an event per
/// record): `(kind, time, whether the record carries an event)`; `out` holds the event only
/// when it does.
pub fn decode_into(
    record: &[u8],
    scale: f64,
    out: &mut Event,
) -> R<(Option<EventKind>, f64, bool)> {
    // no check of the whole record's UTF-8 first: strings are checked as they are read, and
    // anything else the parser accepts is ASCII
    let mut data = Data::new(); // filled in place (no copy of it per record)
    let (parts, end) = parts(record, true, &mut data)?;
    let mut p = Parser { b: record, i: end, lines: 0 };
    p.ws();
    if p.i != record.len() {
        return Err(Fallback);
    }
    let time = parts.time * scale;
    let kind = event_kind(parts.name)?;
    let has_event = match kind {
        None => false,
        Some(EventKind::State | EventKind::MvfstMetric) => return Err(Fallback),
        Some(k) => event_into(k, time, parts.data_span.is_some().then_some(&data), scale, out)?,
    };
    Ok((kind, time, has_event))
}

/// What [`parts`] reads of one event object (its `data`, when read, is in the caller's
/// [`Data`]).
pub(crate) struct Parts<'a> {
    pub(crate) name: &'a [u8],
    /// the time before scaling, within [`MAX_MAGNITUDE`]
    pub(crate) time: f64,
    /// the members of `data` the deriver reads were read (into the `Data` given to [`parts`])
    data_read: bool,
    /// where the `data` object lies in the bytes parsed (`[start, end)`)
    pub(crate) data_span: Option<(usize, usize)>,
    /// the line feeds in the white space read
    pub(crate) lines: u64,
}

impl<'a> Parts<'a> {
    /// The event of a kind the deriver reads, at `time` (already scaled and, for delta
    /// times, summed); `None` for a timer that is not an expired PTO. `record` and `data`:
    /// the bytes and the `Data` given to [`parts`] (`data` is read now if it was only
    /// checked then).
    pub(crate) fn event(
        &self,
        record: &'a [u8],
        data: &Data<'a>,
        kind: EventKind,
        time: f64,
        scale: f64,
    ) -> R<Option<Event>> {
        let mut out = blank_event();
        let has_event = self.event_in(record, data, kind, time, scale, &mut out)?;
        Ok(has_event.then_some(out))
    }

    /// [`Parts::event`] written into `out` (a caller reading many records reuses one: no copy
    /// of an event per record); whether there is one (`out` holds it only then).
    pub(crate) fn event_in(
        &self,
        record: &'a [u8],
        data: &Data<'a>,
        kind: EventKind,
        time: f64,
        scale: f64,
        out: &mut Event,
    ) -> R<bool> {
        match self.data_span {
            Some((a, _)) if !self.data_read => {
                let mut read = Data::new();
                Parser { b: record, i: a, lines: 0 }.data(&mut read)?;
                event_into(kind, time, Some(&read), scale, out)
            }
            span => event_into(kind, time, span.is_some().then_some(data), scale, out),
        }
    }
}

/// The event object that starts `record` (after any white space): its parts and the index
/// just after its closing brace. What follows it is not looked at. Every string read is
/// checked to be UTF-8 (the parser accepts only ASCII outside strings).
/// `eager`: the members of `data` the deriver reads are read at once into `data` (fresh:
/// [`Data::new`]; else `data` is only checked, and read by [`Parts::event`] for the events
/// that need it).
#[inline]
pub(crate) fn parts<'a>(
    record: &'a [u8],
    eager: bool,
    data: &mut Data<'a>,
) -> R<(Parts<'a>, usize)> {
    let mut p = Parser { b: record, i: 0, lines: 0 };
    p.ws();
    let mut name: Option<&[u8]> = None;
    let mut time: Option<Num> = None;
    let mut data_span = None;
    let (mut seen_name, mut seen_time, mut seen_data) = (false, false, false);
    let members = p.object(|p, key, escaped| {
        if escaped {
            return Err(Fallback);
        }
        match key {
            k if same(k, b"name") => {
                if seen_name {
                    return Err(Fallback);
                }
                seen_name = true;
                let (s, escaped) = p.string()?; // a name that is not a string: Python's
                if escaped {
                    return Err(Fallback);
                }
                name = Some(s);
            }
            k if same(k, b"time") => {
                if seen_time {
                    return Err(Fallback);
                }
                seen_time = true;
                match p.peek()? {
                    b'-' | b'0'..=b'9' => time = Some(p.number(true)?),
                    _ => return Err(Fallback),
                }
            }
            k if same(k, b"data") => {
                if seen_data {
                    return Err(Fallback);
                }
                seen_data = true;
                if p.peek()? != b'{' {
                    return Err(Fallback);
                }
                let from = p.i;
                if eager {
                    p.data(data)?;
                } else {
                    p.skip(1)?;
                }
                data_span = Some((from, p.i));
            }
            _ => p.skip(1)?,
        }
        Ok(())
    })?;
    if members == 0 {
        return Err(Fallback);
    }
    let (name, time) = match (name, time) {
        (Some(n), Some(t)) => (n, t),
        _ => return Err(Fallback),
    };
    let raw = time;
    if !(-MAX_MAGNITUDE..=MAX_MAGNITUDE).contains(&raw) {
        return Err(Fallback);
    }
    Ok((Parts { name, time: raw, data_read: eager, data_span, lines: p.lines }, p.i))
}

/// The event of a record of kind `kind`, into `out`; whether there is one.
fn event_into(
    kind: EventKind,
    time: f64,
    data: Option<&Data>,
    scale: f64,
    out: &mut Event,
) -> R<bool> {
    let mut blank = |kind| {
        out.time = time;
        out.kind = kind;
        out.values = [None; N_METRICS];
        out.app_limited = None;
        out.trigger = None;
    };
    // the trigger of a metrics or loss event, as `metric_event` keeps it (a string, else none)
    let trigger = match data.and_then(|d| d.trigger) {
        Some(t) => Some(std::str::from_utf8(t).map_err(|_| Fallback)?),
        None => None,
    };
    Ok(match kind {
        EventKind::PacketLost => {
            blank(Kind::PacketLost);
            out.trigger = trigger.map(str::to_owned);
            true
        }
        EventKind::SpuriousLoss => {
            blank(Kind::SpuriousLoss);
            true
        }
        EventKind::Timer => {
            let d = match data {
                Some(d) => d,
                None => return Ok(false),
            };
            if d.timer_type == Some(b"pto") && d.event_type == Some(b"expired") {
                blank(Kind::Pto);
                true
            } else {
                false
            }
        }
        EventKind::Metrics => {
            blank(Kind::Metrics);
            out.trigger = trigger.map(str::to_owned);
            let event = out;
            if let Some(d) = data {
                #[allow(clippy::needless_range_loop)] // m indexes four arrays
                for m in 0..N_METRICS {
                    if d.names[m] > 1 {
                        return Err(Fallback); // two names of one metric: Python's preference
                    }
                    let v = match d.values[m] {
                        None => continue,
                        Some(v) => v,
                    };
                    if m == PTO_COUNT && !((0.0..TWO_63).contains(&v) && v.fract() == 0.0) {
                        return Err(Fallback);
                    }
                    event.values[m] = Some(if TIME_METRICS[m] { v * scale } else { v });
                }
                for f in d.flags {
                    if let Flag::Value(v) = f {
                        event.app_limited = Some(v);
                        break;
                    }
                }
            }
            true
        }
        EventKind::State | EventKind::MvfstMetric => return Err(Fallback),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a full parse gives: the float nearest the decimal (Rust's `parse`, correctly
    /// rounded); integers as Python's float(int) of orjson's int64/uint64.
    fn reference(text: &str) -> Option<f64> {
        if !text.contains(['.', 'e', 'E']) {
            let v: i128 = text.parse().ok()?;
            return (-(1i128 << 63)..(1i128 << 64)).contains(&v).then_some(v as f64);
        }
        text.parse().ok()
    }

    fn read(text: &str) -> Option<f64> {
        let mut p = Parser { b: text.as_bytes(), i: 0, lines: 0 };
        let v = p.number(true).ok()?;
        assert_eq!(p.i, text.len(), "{text}");
        Some(v)
    }

    /// A fixed LCG (the tests' random bytes).
    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        *seed >> 33
    }

    /// The recursive reading of the grammar that `Parser::skip` replaced: its reference.
    fn skip_recursive(p: &mut Parser, depth: u32) -> R<()> {
        if depth > MAX_DEPTH {
            return Err(Fallback);
        }
        match p.peek()? {
            b'"' => {
                p.string()?;
            }
            b'{' => {
                p.object(|p, _, _| skip_recursive(p, depth + 1))?;
            }
            b'[' => {
                p.i += 1;
                p.ws();
                if p.peek()? == b']' {
                    p.i += 1;
                    return Ok(());
                }
                loop {
                    p.ws();
                    skip_recursive(p, depth + 1)?;
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
            }
            b't' => p.literal(b"true")?,
            b'f' => p.literal(b"false")?,
            b'n' => p.literal(b"null")?,
            _ => p.skip_number()?,
        }
        Ok(())
    }

    #[test]
    fn skipping_in_a_loop_is_skipping_by_recursion() {
        // token soups (valid JSON and near misses), and nesting around the depth limit: the
        // same outcome, the same end and the same line count
        let tokens: [&[u8]; 16] = [
            b"{",
            b"}",
            b"[",
            b"]",
            b",",
            b":",
            b"\"k\"",
            b"1",
            b"-2.5",
            b"true",
            b"null",
            b" ",
            b"\n",
            b"\"s\\\"\"",
            b"{\"a\":",
            b"[1,",
        ];
        let mut seed: u64 = 5;
        for n in 1..=14usize {
            for _ in 0..6000 {
                let mut text = Vec::new();
                for _ in 0..n {
                    text.extend_from_slice(tokens[lcg(&mut seed) as usize % tokens.len()]);
                }
                for depth in [0, MAX_DEPTH - 2, MAX_DEPTH] {
                    let mut a = Parser { b: &text, i: 0, lines: 0 };
                    let mut b = Parser { b: &text, i: 0, lines: 0 };
                    let (ra, rb) = (a.skip(depth).is_ok(), skip_recursive(&mut b, depth).is_ok());
                    assert_eq!(ra, rb, "{:?} at {depth}", String::from_utf8_lossy(&text));
                    if ra {
                        assert_eq!(
                            (a.i, a.lines),
                            (b.i, b.lines),
                            "{:?}",
                            String::from_utf8_lossy(&text)
                        );
                    }
                }
            }
        }
        for n in [250usize, 256, 257, 258, 300] {
            for inner in [&b"1"[..], b"[]", b"{}", b"{\"a\":[1]}"] {
                let mut text = b"[".repeat(n);
                text.extend_from_slice(inner);
                text.extend_from_slice(&b"]".repeat(n));
                let mut a = Parser { b: &text, i: 0, lines: 0 };
                let mut b = Parser { b: &text, i: 0, lines: 0 };
                assert_eq!(a.skip(0).is_ok(), skip_recursive(&mut b, 0).is_ok(), "{n}");
            }
        }
    }

    #[test]
    fn a_skipped_number_is_what_number_accepts() {
        // texts over the bytes of numbers and a few others: skip_number accepts exactly what
        // number(false) accepts, and ends where it ends
        let alphabet = b"0123456789-+.eE 0119x";
        let mut seed: u64 = 7;
        for n in 1..=26usize {
            for _ in 0..4000 {
                let text: Vec<u8> =
                    (0..n).map(|_| alphabet[lcg(&mut seed) as usize % alphabet.len()]).collect();
                let mut a = Parser { b: &text, i: 0, lines: 0 };
                let mut b = Parser { b: &text, i: 0, lines: 0 };
                let (ra, rb) = (a.skip_number().is_ok(), b.number(false).is_ok());
                assert_eq!(ra, rb, "{:?}", String::from_utf8_lossy(&text));
                if ra {
                    assert_eq!(a.i, b.i, "{:?}", String::from_utf8_lossy(&text));
                }
            }
        }
    }

    /// What `Parser::string` reads, byte by byte: the content up to the closing quote, whether
    /// it holds an escape, or None (an error).
    fn string_reference(b: &[u8]) -> Option<(usize, bool)> {
        if b.first() != Some(&b'"') {
            return None;
        }
        let mut i = 1;
        let mut escaped = false;
        loop {
            match *b.get(i)? {
                b'"' => {
                    std::str::from_utf8(&b[1..i]).ok()?;
                    return Some((i, escaped));
                }
                b'\\' => {
                    escaped = true;
                    match *b.get(i + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                        b'u' => {
                            let hex = std::str::from_utf8(b.get(i + 2..i + 6)?).ok()?;
                            let v = u32::from_str_radix(hex, 16).ok()?;
                            if hex.starts_with('+') || (0xD800..=0xDFFF).contains(&v) {
                                return None;
                            }
                            i += 6;
                        }
                        _ => return None,
                    }
                }
                0..=0x1f => return None,
                _ => i += 1,
            }
        }
    }

    #[test]
    fn strings_read_wide_as_byte_by_byte() {
        // strings of every length to 70 (across the 16- and 8-byte steps) over plain bytes,
        // quotes, escapes, control characters and UTF-8 (valid and not)
        let pieces: [&[u8]; 9] =
            [b"a", b"\"", b"\\n", b"\\u00e9", b"\x01", "é".as_bytes(), b"\xff", b"\\q", b"z"];
        let mut seed: u64 = 11;
        for n in 0..70usize {
            for _ in 0..400 {
                let mut text = vec![b'"'];
                while text.len() < n + 1 {
                    let weights = lcg(&mut seed) % 100;
                    let piece = if weights < 80 { b"x" } else { pieces[weights as usize % 9] };
                    text.extend_from_slice(piece);
                }
                text.push(b'"');
                text.extend_from_slice(b"  tail");
                let mut p = Parser { b: &text, i: 0, lines: 0 };
                let ours = p.string().ok().map(|(s, escaped)| (s.len() + 1, escaped));
                assert_eq!(ours, string_reference(&text), "{:?}", String::from_utf8_lossy(&text));
            }
        }
    }

    #[test]
    fn numbers_read_as_a_full_parse_reads_them() {
        // every digit count 1..=24 for integers, whole parts and fractions, both signs, the
        // edges (2**53, 2**63, 2**64, 10**19, 10**22, the 15 digits of the fast path) and a
        // fixed LCG's digits
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            seed >> 33
        };
        let mut texts: Vec<String> = vec![
            "9007199254740992".into(),
            "9007199254740993".into(),
            "9007199254740993.0".into(),
            "0.9007199254740993".into(),
            "900719925474099.3".into(),
            "9223372036854775808".into(),
            "-9223372036854775808".into(),
            "-9223372036854775809".into(),
            "18446744073709551615".into(),
            "18446744073709551616".into(),
            "9999999999999999999".into(),
            "-9999999999999999999".into(),
            "1795303070303.0933".into(),
            "1795303070303.097".into(),
            "5.261044999997466".into(),
            "0.0000000000000000000001".into(),
            "0.00000000000000000000012".into(),
            "-0".into(),
            "-0.0".into(),
            "0".into(),
        ];
        for digits in 1..=24usize {
            for _ in 0..300 {
                let s: String =
                    (0..digits).map(|_| char::from(b'0' + (next() % 10) as u8)).collect();
                let s = s.trim_start_matches('0');
                let s = if s.is_empty() { "0" } else { s };
                let cut = (next() as usize) % (s.len() + 1);
                let sign = if next() % 2 == 0 { "" } else { "-" };
                texts.push(format!("{sign}{s}"));
                if cut > 0 && cut < s.len() {
                    texts.push(format!("{sign}{}.{}", &s[..cut], &s[cut..]));
                }
                texts.push(format!("{sign}0.{s}"));
            }
        }
        for text in &texts {
            // an integer beyond int64/uint64 is handed back (None) when its value is needed,
            // as the reference has no value for it
            let (ours, full) = (read(text), reference(text));
            assert_eq!(ours.map(f64::to_bits), full.map(f64::to_bits), "{text}: {ours:?} {full:?}");
        }
    }
}
