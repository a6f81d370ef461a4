//! quicsm's native core: the derived-state path of its qlog reader.
//!
//! `quicsm.extract.native` wraps the deriver; `quicsm.qlog.seq` hands it whole regions of
//! JSON-SEQ/NDJSON records through `scan`. The Python modules stay the reference
//! (`quicsm/extract/deriver.py`, `quicsm/qlog/seq.py`, `quicsm/qlog/events.py`); this crate
//! must give the same rows, and hands back every record it cannot decode exactly as they would.
//!
//! The crate is pure Rust (`cargo test` links it as it is); the Python bindings, `python.rs`,
//! are compiled in with the `python` feature, which maturin turns on when it builds
//! `quicsm._native`. The tables both sides share are generated from `quicsm/core/tables.json`
//! at build time (`build.rs`, `tables.rs`).

pub mod arrow;
pub mod census;
pub mod columns;
pub mod contained;
pub mod deriver;
pub mod packets;
pub mod record;
pub mod scan;
pub mod sendable;
pub mod tables;

#[cfg(feature = "python")]
mod python;
