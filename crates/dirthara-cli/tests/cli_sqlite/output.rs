//! JSON and NDJSON output.

use crate::support::project::Project;
use crate::support::run::Run;
use crate::{three, versions, DB};

#[test]
fn json_run_result_is_one_document_with_applied_reverted_and_batch() {
    let p = Project::new();
    three(&p);
    let run = p.unlocked(DB, &["migrate", "--output", "json"]);
    run.success();
    assert!(run.stderr.contains("WITHOUT the migration lock"));
    let doc = run.json();
    assert_eq!(doc["batch"], 1);
    assert_eq!(doc["reverted"], serde_json::json!([]));
    assert_eq!(versions(&doc["applied"]), [1, 2, 3]);
    let first = &doc["applied"][0];
    assert_eq!(first["name"], "create_a");
    assert!(first["duration_ms"].is_u64(), "{first}");

    let doc = p
        .unlocked(DB, &["rollback", "--steps", "2", "--output", "json"])
        .json();
    assert_eq!(versions(&doc["reverted"]), [3, 2]);
    assert_eq!(doc["applied"], serde_json::json!([]));
}

#[test]
fn json_with_nothing_pending_has_an_empty_applied_list() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    let run = p.unlocked(DB, &["migrate", "--output", "json"]);
    run.success();
    let doc = run.json();
    assert_eq!(doc["applied"], serde_json::json!([]));
    assert_eq!(doc["reverted"], serde_json::json!([]));
    assert!(doc["batch"].is_null(), "{doc}");
}

#[test]
fn json_output_on_failure_prints_no_partial_document_on_stdout() {
    let p = Project::new();
    p.irreversible(1, "broken", "THIS IS NOT SQL;\n");
    let run = p.unlocked(DB, &["migrate", "--output", "json"]);
    run.error("MIGRATION_FAILED");
    assert!(
        run.stdout.trim().is_empty()
            || serde_json::from_str::<serde_json::Value>(&run.stdout).is_ok(),
        "stdout is empty or one JSON document: {run:?}"
    );
}

#[test]
fn ndjson_prints_one_json_object_per_line_ending_with_the_result() {
    let p = Project::new();
    three(&p);
    let run = p.unlocked(DB, &["migrate", "--output", "ndjson"]);
    run.success();
    let events = ndjson_events(&run);
    assert!(events.len() >= 2, "{events:?}");
    for event in &events {
        assert!(event.is_object(), "{event}");
        assert!(
            event["event"].is_string(),
            "every line names its event: {event}"
        );
    }
    let result = events.last().unwrap();
    assert_eq!(result["event"], "result");
    assert_eq!(versions(&result["applied"]), [1, 2, 3]);
    assert_eq!(result["batch"], 1);
    let finished: Vec<i64> = events
        .iter()
        .filter(|e| e["event"] == "migration_finished")
        .map(|e| e["version"].as_i64().unwrap())
        .collect();
    assert_eq!(finished, [1, 2, 3]);

    let run = p.unlocked(DB, &["status", "--output", "ndjson"]);
    run.success();
    let events = ndjson_events(&run);
    assert_eq!(events.last().unwrap()["event"], "result");
}

fn ndjson_events(run: &Run) -> Vec<serde_json::Value> {
    assert!(
        run.stdout.ends_with('\n'),
        "ndjson ends with a newline: {:?}",
        run.stdout
    );
    run.ndjson()
}

/// `at`: RFC 3339, UTC, microseconds — `2026-12-01T20:28:27.123456Z`.
fn is_rfc3339_micros(text: &str) -> bool {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| range.into_iter().all(|i| b[i].is_ascii_digit());
    b.len() == 27
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..26)
        && b[26] == b'Z'
}

#[test]
fn every_ndjson_line_carries_its_instant_in_order_and_failures_too() {
    let p = Project::new();
    three(&p);
    let before = std::time::SystemTime::now();
    let run = p.sqlite(DB, &["--locking", "lease", "migrate", "--output", "ndjson"]);
    run.success();
    let events = ndjson_events(&run);
    let stamps: Vec<&str> = (events.iter())
        .map(|e| e["at"].as_str().unwrap_or_else(|| panic!("no `at`: {e}")))
        .collect();
    assert!(stamps.iter().all(|at| is_rfc3339_micros(at)), "{stamps:?}");
    // Fixed width, so text order is time order: never going back.
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
    let today = dirthara::format_timestamp(before);
    assert!(stamps[0][..10] >= today[..10], "{stamps:?} vs {today}");
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"lock_acquired") && kinds.contains(&"lock_released"),
        "{kinds:?}"
    );

    // The error line that ends a failed run is stamped too.
    p.migration("4_bad.sql", "THIS IS NOT SQL");
    let failed = p.sqlite(DB, &["--locking", "lease", "migrate", "--output", "ndjson"]);
    failed.error("MIGRATION_FAILED");
    let last = failed.ndjson().pop().unwrap();
    assert_eq!(last["event"], "error", "{last}");
    assert!(is_rfc3339_micros(last["at"].as_str().unwrap()), "{last}");
}

#[test]
fn ndjson_events_carry_durations_in_milliseconds() {
    let p = Project::new();
    three(&p);
    let run = p.unlocked(DB, &["migrate", "--output", "ndjson"]);
    run.success();
    let finished: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &serde_json::Value| e["event"] == "migration_finished")
        .collect();
    assert_eq!(finished.len(), 3);
    assert!(
        finished.iter().all(|e| e["duration_ms"].is_u64()),
        "{finished:?}"
    );
}
