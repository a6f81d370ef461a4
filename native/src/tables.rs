//! The tables shared with quicsm's Python modules, generated at build time from
//! `quicsm/core/tables.json` by `build.rs` (see there). Never edited by hand.

include!(concat!(env!("OUT_DIR"), "/tables.rs"));
