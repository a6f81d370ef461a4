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

/// The inside of the first `events` array of a contained-JSON fixture.
fn events_of(fixture: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/qlog").join(fixture);
    let text = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let at = text.windows(8).position(|w| w == b"\"events\"").expect("an events member");
    let open = at + text[at..].iter().position(|&c| c == b'[').expect("its array");
    text[open + 1..].to_vec()
}

#[test]
fn the_contained_contract_holds_on_real_events_and_hand_backs() {
    // real producers: aioquic (data first), quiche (cut mid-write); picoquic's and draft-01's
    // array events (event_fields) are every one handed back
    for fixture in [
        "aioquic_0.3.qlog",
        "picoquic_cubic/server.qlog",
        "quiche_truncated.qlog",
        "draft01_delta.qlog",
    ] {
        let events = events_of(fixture);
        let read = contract::check_contained(&events);
        let arrays = !fixture.starts_with("aioquic") && !fixture.starts_with("quiche");
        assert!(if arrays { read == 0 } else { read > 0 }, "{fixture}: {read} events read");
    }
    let state = r#"{"time": 1, "name": "recovery:congestion_state_updated", "data": {"old": "slow_start", "new": "recovery", "trigger": null}}"#;
    let metrics = r#" {"data": {"cwnd": 12000, "bytes_in_flight": 10, "latest_rtt": 5}, "name": "recovery:metrics_updated", "time": 2.5}"#;
    let odd = [
        r#"{"time": "3", "name": "a:b"}"#,    // a string time: Python's
        r#"{"time": 3, "name": "a:\u0062"}"#, // an escaped name
        r#"{"time": 1, "name": "a:b"}"#,      // backwards
        r#"[1, "a:b", {}]"#,                  // an array event
        r#"{"time": 4, "name": "recovery:congestion_state_updated", "data": {"new": 7}}"#,
        r#"{"time": 4, "name": "x", "name": "y"}"#, // a duplicate key
        r#"{"time": 5, "name": "recovery:metrics_updated", "data": {"cwnd": "a"}}"#,
        "{\"time\": 6, \"name\": \"caf\u{e9}:x\"}", // non-ASCII: Python's lower()
        r#"{"time": 7, "name": "x"} garbage"#,
        "\n {\"time\": 8, \"name\": \"x\"}\n",
    ];
    let mut doc = vec![state, metrics];
    doc.extend(odd);
    doc.extend([state, metrics, metrics]);
    assert_eq!(contract::check_contained(doc.join(",").as_bytes()), 2, "up to the first odd one");
    contract::check_contained((doc.join(",") + "]}").as_bytes());
    // more distinct names than one call counts
    let names: Vec<String> =
        (0..200).map(|i| format!(r#"{{"time": {i}, "name": "n:{i}"}}"#)).collect();
    assert_eq!(contract::check_contained((names.join(",") + ",").as_bytes()), 200);
}

#[test]
#[should_panic(expected = "read elements that are not JSON")]
fn the_contained_contract_fails_when_it_is_broken() {
    // what check_contained requires of every element the reader reads, on an element no JSON
    // parser reads (the reader itself never reads it: this is the check, not the reader)
    contract::check_elements_for_test(br#"{"time": 1, "name": "x",}"#, 1);
}
