//! Files that changed, or arrived out of order, after others were applied.

use crate::support::project::Project;
use crate::support::run::run_command;
use crate::{st, states, steps, user_tables, DB};

#[test]
fn a_modified_applied_file_is_a_checksum_mismatch_and_nothing_runs() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.unlocked(DB, &["migrate"]).success();
    p.migration(
        "1_create_a.up.sql",
        "CREATE TABLE a (id INTEGER, extra TEXT);\n",
    );
    p.table_migration(2, "create_b", "b");

    let run = p.unlocked(DB, &["migrate"]);
    run.error("CHECKSUM_MISMATCH")
        .stderr_has("1_create_a.up.sql");
    assert_eq!(states(&p), st(&[(1, "modified"), (2, "pending")]));
    assert_eq!(user_tables(&p), ["a"]);
    p.unlocked(DB, &["rollback"]).error("CHECKSUM_MISMATCH");
    assert_eq!(user_tables(&p), ["a"]);
}

#[test]
fn crlf_line_endings_or_a_bom_are_not_a_checksum_mismatch() {
    let p = Project::new();
    let lf = "CREATE TABLE a (id INTEGER);\nCREATE TABLE a2 (id INTEGER);\n";
    p.irreversible(1, "create_a", lf);
    p.unlocked(DB, &["migrate"]).success();

    let crlf = lf.replace('\n', "\r\n");
    p.irreversible(1, "create_a", &crlf);
    p.unlocked(DB, &["migrate"])
        .success()
        .stdout_has("Nothing to migrate");
    assert_eq!(states(&p), st(&[(1, "applied")]));

    p.irreversible(1, "create_a", &format!("\u{feff}{crlf}"));
    p.unlocked(DB, &["migrate"]).success();
    assert_eq!(states(&p), st(&[(1, "applied")]));
}

// ---------------------------------------------------------------------------------------------
// Out-of-order migrations
// ---------------------------------------------------------------------------------------------

/// 1 and 3 applied, then 2 added.
fn out_of_order(p: &Project) {
    p.table_migration(1, "create_a", "a");
    p.table_migration(3, "create_c", "c");
    p.unlocked(DB, &["migrate"]).success();
    p.table_migration(2, "create_b", "b");
}

#[test]
fn an_out_of_order_migration_is_flagged_then_applied_with_a_warning() {
    let p = Project::new();
    out_of_order(&p);

    let doc = p.sqlite(DB, &["status", "--output", "json"]).json();
    let flags: Vec<(i64, bool)> = doc["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["version"].as_i64().unwrap(),
                m["out_of_order"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(flags, [(1, false), (2, true), (3, false)]);
    p.sqlite(DB, &["status"])
        .success()
        .stdout_has("out of order");
    p.sqlite(DB, &["preview", "migrate"])
        .success()
        .stdout_has("OUT OF ORDER");

    let run = p.unlocked(DB, &["migrate"]);
    run.success().warning("OUT_OF_ORDER");
    assert!(!run.stdout.contains("warning"), "warnings belong on stderr");
    assert_eq!(steps(&run.stdout, "applied"), st(&[(2, "create_b")]));
    assert_eq!(
        p.states(DB),
        vec![
            (1, "applied".to_string(), Some(1)),
            (2, "applied".to_string(), Some(2)),
            (3, "applied".to_string(), Some(1)),
        ]
    );
}

#[test]
fn strict_refuses_an_out_of_order_migration_and_applies_nothing() {
    let p = Project::new();
    out_of_order(&p);
    p.table_migration(4, "create_d", "d");
    p.unlocked(DB, &["--strict", "migrate"])
        .error("OUT_OF_ORDER")
        .stderr_has("2");
    assert_eq!(
        states(&p),
        st(&[
            (1, "applied"),
            (2, "pending"),
            (3, "applied"),
            (4, "pending")
        ])
    );
    assert_eq!(user_tables(&p), ["a", "c"]);
    // DIRTHARA_STRICT and `strict = true` in the file mean the same.
    run_command(p.cmd().env("DIRTHARA_STRICT", "true").args([
        "-d",
        "sqlite:app.db",
        "--no-lock",
        "migrate",
    ]))
    .error("OUT_OF_ORDER");
    p.write("dirthara.toml", "strict = true\n");
    p.unlocked(DB, &["migrate"]).error("OUT_OF_ORDER");
    assert_eq!(user_tables(&p), ["a", "c"]);
}
