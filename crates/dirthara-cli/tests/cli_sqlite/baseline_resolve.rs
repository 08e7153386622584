//! `baseline` and `resolve`.

use crate::support::project::Project;
use crate::{st, states, steps, three, user_tables, DB};

#[test]
fn baseline_records_migrations_up_to_v_without_running_them() {
    let p = Project::new();
    // 1 and 2 would fail if they ran: baseline must only record them.
    p.irreversible(1, "legacy_one", "THIS IS NOT SQL;\n");
    p.irreversible(2, "legacy_two", "THIS IS NOT SQL EITHER;\n");
    p.table_migration(3, "create_c", "c");
    let run = p.unlocked(DB, &["baseline", "2"]);
    run.success()
        .stdout_has("legacy_one")
        .stdout_has("legacy_two");
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "applied"), (3, "pending")])
    );
    let run = p.unlocked(DB, &["migrate"]);
    run.success();
    assert_eq!(steps(&run.stdout, "applied"), st(&[(3, "create_c")]));
    assert_eq!(user_tables(&p), ["c"]);
}

#[test]
fn baseline_of_an_unknown_version_is_refused() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["baseline", "7"]).error("UNKNOWN_VERSION");
    let run = p.unlocked(DB, &["status", "--output", "json"]);
    for m in run.json()["migrations"].as_array().unwrap() {
        assert_eq!(m["state"], "pending", "{m}");
    }
}

#[test]
fn resolve_accept_checksum_records_the_edited_files_checksum() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.unlocked(DB, &["migrate"]).success();
    p.migration(
        "1_create_a.up.sql",
        "-- reformatted on purpose\nCREATE TABLE a (id INTEGER PRIMARY KEY);\n",
    );
    p.table_migration(2, "create_b", "b");
    p.unlocked(DB, &["migrate"])
        .error("CHECKSUM_MISMATCH")
        .stderr_has("resolve 1 --accept-checksum");
    p.unlocked(DB, &["resolve", "1", "--accept-checksum"])
        .success();
    assert_eq!(states(&p), st(&[(1, "applied"), (2, "pending")]));
    p.unlocked(DB, &["migrate"]).success();
    assert_eq!(states(&p), st(&[(1, "applied"), (2, "applied")]));
}

#[test]
fn resolve_needs_exactly_one_resolution_flag() {
    let p = Project::new();
    p.unlocked(DB, &["resolve", "1"]).code(2);
    p.unlocked(DB, &["resolve", "1", "--applied", "--rolled-back"])
        .code(2);
    assert!(!p.exists(DB));
}

#[test]
fn accepting_an_unchanged_checksum_records_nothing() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    let run = p.unlocked(
        DB,
        &["resolve", "2", "--accept-checksum", "--output", "json"],
    );
    run.success();
    assert_eq!(
        run.json()["recorded"],
        serde_json::Value::Null,
        "{}",
        run.stdout
    );
}
