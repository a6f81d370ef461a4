//! A trace's metric, loss and PTO events as columns: what `quicsm.read_metrics` returns, read
//! by the native decoder instead of an object per event in Python.
//!
//! Filled by a recording [`crate::deriver::Deriver`] (`Deriver::recorder`), which the scan of
//! JSON-SEQ/NDJSON regions and the contained-JSON reader feed exactly the events, in the order,
//! that they feed a deriving one (records the native decoder hands back are decoded in Python
//! and fed the same way). The Python side takes the columns every block of events
//! (`quicsm.extract.native.NativeMetricColumns`), so they never hold more than a block.

use crate::arrow::{Column, Values};
use crate::deriver::{Event, N_METRICS};
use crate::tables::METRIC_KEYS;

#[derive(Default, Debug)]
pub struct Columns {
    /// the event's time on the trace clock (ms, scaled, delta times summed)
    pub times: Vec<f64>,
    /// the event's kind: its position in `FEED_KINDS`
    pub kinds: Vec<u8>,
    /// per normalised metric (`METRIC_KEYS` order), NaN where the event does not carry it (JSON
    /// has no NaN)
    pub values: Vec<Vec<f64>>,
    /// 0: no trigger; else 1 + the trigger's position in `trigger_names`
    pub triggers: Vec<u16>,
    /// every trigger seen in the trace, in order of first appearance (kept across takes)
    pub trigger_names: Vec<String>,
}

impl Columns {
    pub fn new() -> Columns {
        Columns { values: vec![Vec::new(); N_METRICS], ..Default::default() }
    }

    pub fn len(&self) -> usize {
        self.times.len()
    }

    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    pub fn push(&mut self, event: &Event) {
        self.times.push(event.time);
        self.kinds.push(event.kind as u8);
        for (column, value) in self.values.iter_mut().zip(event.values.iter()) {
            column.push(value.unwrap_or(f64::NAN));
        }
        let code = match &event.trigger {
            None => 0,
            Some(t) => match self.trigger_names.iter().position(|n| n == t) {
                Some(i) => i + 1,
                None => {
                    self.trigger_names.push(t.clone());
                    self.trigger_names.len()
                }
            },
        };
        // a trace with more than 65,534 distinct triggers shares the last code (never seen)
        self.triggers.push(code.min(u16::MAX as usize) as u16);
    }

    /// The events so far, as columns; this keeps none of them (the trigger names stay, so
    /// codes mean the same in every take).
    pub fn take(&mut self) -> Columns {
        let values = std::mem::replace(&mut self.values, vec![Vec::new(); N_METRICS]);
        Columns {
            times: std::mem::take(&mut self.times),
            kinds: std::mem::take(&mut self.kinds),
            values,
            triggers: std::mem::take(&mut self.triggers),
            trigger_names: self.trigger_names.clone(),
        }
    }

    /// The events so far as named columns for polars ([`crate::arrow`]): `_t` (the times),
    /// `kind` (uint8), each metric by its name in `METRIC_KEYS` (float64, null where the event
    /// does not carry it) and `trigger` (uint16 codes, as in [`Columns::push`]); this keeps
    /// none of the events (the trigger names stay: [`Columns::take`]).
    pub fn take_arrow(&mut self) -> Vec<Column> {
        let taken = self.take();
        let mut out = Vec::with_capacity(N_METRICS + 3);
        out.push(Column {
            name: "_t".into(),
            values: Values::F64(taken.times),
            nan_is_null: false,
        });
        out.push(Column {
            name: "kind".into(),
            values: Values::U8(taken.kinds),
            nan_is_null: false,
        });
        for (name, values) in METRIC_KEYS.iter().zip(taken.values) {
            out.push(Column {
                name: (*name).into(),
                values: Values::F64(values),
                nan_is_null: true,
            });
        }
        out.push(Column {
            name: "trigger".into(),
            values: Values::U16(taken.triggers),
            nan_is_null: false,
        });
        out
    }
}
