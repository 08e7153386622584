//! A failing migration: stopped, rolled back with its record, or kept applied.

use crate::support::project::Project;
use crate::{st, states, steps, user_tables, DB};

#[test]
fn a_failing_migration_stops_the_run_and_is_rolled_back_with_its_record() {
    let p = Project::new();
    p.irreversible(1, "one", "CREATE TABLE t1 (id INT);\n");
    p.irreversible(2, "two", "CREATE TABLE t2 (id INT);\nTHIS IS NOT SQL;\n");
    p.irreversible(3, "three", "CREATE TABLE t3 (id INT);\n");
    let run = p.unlocked(DB, &["migrate"]);
    run.error("MIGRATION_FAILED");
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with("Error [MIGRATION_FAILED]"))
        .unwrap();
    assert!(
        line.contains("migration 2 (two)"),
        "names version and name: {line}"
    );
    assert!(line.contains("up"), "names the direction: {line}");
    assert_eq!(steps(&run.stdout, "applied"), st(&[(1, "one")]));

    assert_eq!(user_tables(&p), ["t1"], "t2's CREATE TABLE was rolled back");
    assert_eq!(
        p.states(DB),
        vec![
            (1, "applied".to_string(), Some(1)),
            (2, "pending".to_string(), None),
            (3, "pending".to_string(), None),
        ]
    );

    // Fixed: the next run applies 2 and 3 in the next batch.
    p.irreversible(2, "two", "CREATE TABLE t2 (id INT);\n");
    p.unlocked(DB, &["migrate"])
        .success()
        .stdout_has("Applied 2 in batch 2.");
    assert_eq!(user_tables(&p), ["t1", "t2", "t3"]);
}

#[test]
fn a_failing_down_step_keeps_the_migration_applied() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.reversible(
        2,
        "create_b",
        "CREATE TABLE b (id INT);\n",
        "DROP TABLE b;\nNOT SQL;\n",
    );
    p.unlocked(DB, &["migrate"]).success();
    p.unlocked(DB, &["rollback"])
        .error("MIGRATION_FAILED")
        .stderr_has("down");
    assert_eq!(states(&p), st(&[(1, "applied"), (2, "applied")]));
    assert_eq!(user_tables(&p), ["a", "b"]);
}
