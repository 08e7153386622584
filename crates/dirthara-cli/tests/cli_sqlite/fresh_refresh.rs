//! `refresh` and `fresh`.

use crate::support::project::Project;
use crate::support::run::run_command;
use crate::{st, states, steps, three, two_batches, user_tables, versions, DB};

#[test]
fn refresh_reverses_everything_then_applies_all_in_batch_1() {
    let p = Project::new();
    two_batches(&p);
    let run = p.unlocked(DB, &["refresh"]);
    run.success()
        .stdout_has("Reverted 3, applied 3 in batch 1.");
    assert_eq!(
        steps(&run.stdout, "reverted"),
        st(&[(3, "create_c"), (2, "create_b"), (1, "create_a")])
    );
    assert_eq!(
        steps(&run.stdout, "applied"),
        st(&[(1, "create_a"), (2, "create_b"), (3, "create_c")])
    );
    let batches: Vec<Option<i64>> = p.states(DB).into_iter().map(|(_, _, b)| b).collect();
    assert_eq!(batches, [Some(1), Some(1), Some(1)]);
    assert_eq!(user_tables(&p), ["a", "b", "c"]);
}

#[test]
fn refresh_with_an_irreversible_migration_is_refused_before_anything_changes() {
    let p = Project::new();
    p.irreversible(1, "create_a", "CREATE TABLE a (id INT);\n");
    p.table_migration(2, "create_b", "b");
    p.unlocked(DB, &["migrate"]).success();
    p.unlocked(DB, &["refresh"]).error("IRREVERSIBLE_MIGRATION");
    assert_eq!(states(&p), st(&[(1, "applied"), (2, "applied")]));
    assert_eq!(user_tables(&p), ["a", "b"]);
}

#[test]
fn fresh_force_drops_every_table_and_applies_all_once_in_batch_1() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    // A table no current migration knows about: created by a migration whose files are
    // deleted afterwards.
    p.irreversible(2, "create_stray", "CREATE TABLE stray (id INT);\n");
    p.unlocked(DB, &["migrate"]).success();
    p.table_migration(3, "create_c", "c");
    p.unlocked(DB, &["migrate"]).success();
    p.remove("migrations/2_create_stray.sql");
    assert_eq!(user_tables(&p), ["a", "c", "stray"]);

    let run = p.unlocked(DB, &["fresh", "--force"]);
    run.success().stdout_has("dropped").stdout_has("stray");
    assert_eq!(
        steps(&run.stdout, "applied"),
        st(&[(1, "create_a"), (3, "create_c")])
    );
    assert_eq!(user_tables(&p), ["a", "c"]);
    assert_eq!(
        p.states(DB),
        vec![
            (1, "applied".to_string(), Some(1)),
            (3, "applied".to_string(), Some(1)),
        ]
    );
}

/// Only SQLite's own `sqlite_*` tables are left to it: in `LIKE 'sqlite_%'` the `_` matches
/// any character, so a table named `sqlitex` would be kept, and the migration that creates it
/// would then fail on it.
#[test]
fn fresh_drops_a_table_whose_name_only_looks_like_sqlites_own() {
    let p = Project::new();
    p.table_migration(1, "create_sqlitex", "sqlitex");
    p.unlocked(DB, &["migrate"]).success();
    let run = p.unlocked(DB, &["fresh", "--force"]);
    run.success().stdout_has("sqlitex");
    assert_eq!(steps(&run.stdout, "applied"), st(&[(1, "create_sqlitex")]));
    assert_eq!(user_tables(&p), ["sqlitex"]);
}

#[test]
fn fresh_json_reports_dropped_tables_and_applied_migrations() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    let doc = p
        .unlocked(DB, &["fresh", "--force", "--output", "json"])
        .json();
    assert_eq!(doc["batch"], 1);
    assert_eq!(versions(&doc["applied"]), [1, 2, 3]);
    let dropped: Vec<&str> = doc["dropped"]
        .as_array()
        .expect("dropped is an array")
        .iter()
        .filter_map(|d| d.as_str())
        .collect();
    for table in ["a", "b", "c", "dirthara_migrations"] {
        assert!(dropped.contains(&table), "{table} not in {dropped:?}");
    }
}

#[test]
fn fresh_without_force_and_without_a_terminal_is_refused_and_changes_nothing() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    p.table_migration(4, "create_d", "d");
    let before = std::fs::read(p.join(DB)).unwrap();
    let run = p.unlocked(DB, &["fresh"]);
    run.code(1).stderr_has("--force");
    assert!(run.stderr.starts_with("Error [") || run.stderr.contains("\nError ["));
    assert_eq!(std::fs::read(p.join(DB)).unwrap(), before);
    assert_eq!(
        states(&p),
        st(&[
            (1, "applied"),
            (2, "applied"),
            (3, "applied"),
            (4, "pending")
        ])
    );
    // Typing something other than `yes` on stdin (not a terminal) does not confirm either.
    let url = format!("sqlite:{DB}");
    let run = run_command(
        p.cmd()
            .args(["-d", url.as_str(), "--no-lock", "fresh"])
            .write_stdin("yes\n"),
    );
    run.code(1);
    assert_eq!(std::fs::read(p.join(DB)).unwrap(), before);
}

#[test]
fn fresh_on_an_empty_database_applies_everything() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["fresh", "--force"])
        .success()
        .stdout_has("Applied 3 in batch 1.");
    assert_eq!(user_tables(&p), ["a", "b", "c"]);
}
