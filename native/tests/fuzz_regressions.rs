//! Every input the native fuzz target once failed on, kept under `fuzz/regressions/` once
//! fixed, checked against the same contract (`contract/mod.rs`); and the contract itself on the
//! shapes it must handle.

mod contract;

use std::fs;
use std::path::Path;

/// Checks the contract on every input of `dir` (its README aside); returns how many.
fn check_all(dir: &Path) -> usize {
    let mut paths: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("an entry").path())
        .filter(|p| p.file_name().is_some_and(|n| n != "README.md"))
        .collect();
    paths.sort();
    for path in &paths {
        let data = fs::read(path).expect("readable");
        eprintln!("{}", path.display());
        contract::check(&data);
    }
    paths.len()
}

#[test]
fn every_kept_finding_keeps_the_contract() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // this target's findings, and the Python readers' (tests/fuzz_regressions: the reproducer
    // families of hostile input, and every finding of the Atheris campaign)
    for dir in ["fuzz/regressions", "../tests/fuzz_regressions"] {
        let n = check_all(&root.join(dir));
        assert!(n > 0, "no regression input under {dir}");
    }
}

#[test]
fn the_contract_holds_on_hand_backs_splits_and_odd_regions() {
    let good = r#"{"time": 1, "name": "recovery:metrics_updated", "data": {"cwnd": 12000, "bytes_in_flight": 0, "smoothed_rtt": 20}}"#;
    let escaped = r#"{"time": 2, "name": "recovery:metrics_updated", "data": {"cwn\u0064": 1}}"#;
    let lost = r#"{"time": 3, "name": "recovery:packet_lost", "data": {}}"#;
    let back = r#"{"time": 0.5, "name": "recovery:metrics_updated", "data": {"cwnd": 6000}}"#;
    let mut seq = Vec::new();
    for r in [good, escaped, good, lost, back, "not json", good] {
        seq.push(0x1e);
        seq.extend_from_slice(r.as_bytes());
        seq.push(b'\n');
    }
    contract::check(&seq);
    let ndjson = [good, lost, escaped, good].join("\n");
    contract::check(ndjson.as_bytes());
    for odd in [&b""[..], b"\x1e", b"\n\n\n", b"\x1e\x1e{", b"{\"time\": 1e999}"] {
        contract::check(odd);
    }
}

#[test]
#[should_panic(expected = "a state repeated")]
fn the_contract_fails_when_it_is_broken() {
    contract::assert_rows_invariants(&[1.0, 2.0], &[3, 3], &[0, 0], 1);
}
