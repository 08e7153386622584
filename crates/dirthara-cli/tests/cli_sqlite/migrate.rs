//! `migrate` / `up`.

use crate::support::project::Project;
use crate::{st, steps, three, user_tables, DB};

#[test]
fn migrate_applies_every_pending_migration_in_one_batch_and_prints_each_on_stdout() {
    let p = Project::new();
    three(&p);
    let run = p.unlocked(DB, &["migrate"]);
    run.success().stdout_has("Applied 3 in batch 1.");
    assert_eq!(
        steps(&run.stdout, "applied"),
        st(&[(1, "create_a"), (2, "create_b"), (3, "create_c")])
    );
    assert_eq!(user_tables(&p), ["a", "b", "c"]);
    assert_eq!(
        p.states(DB),
        vec![
            (1, "applied".to_string(), Some(1)),
            (2, "applied".to_string(), Some(1)),
            (3, "applied".to_string(), Some(1)),
        ]
    );
}

#[test]
fn up_is_an_alias_of_migrate() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["up"])
        .success()
        .stdout_has("Applied 3 in batch 1.");
    assert_eq!(user_tables(&p), ["a", "b", "c"]);
}

#[test]
fn migrate_with_nothing_pending_succeeds_and_says_so() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    let run = p.unlocked(DB, &["migrate"]);
    run.success().stdout_has("Nothing to migrate");
    assert!(steps(&run.stdout, "applied").is_empty());
}

/// An empty directory is a wrong `--dir` far more often than a project without migrations:
/// never "up to date", and nothing is created.
#[test]
fn migrate_with_an_empty_migrations_dir_is_no_migrations_and_creates_nothing() {
    let p = Project::new();
    p.unlocked(DB, &["migrate"])
        .error("NO_MIGRATIONS")
        .stderr_has("no migrations in `migrations`")
        .stderr_has("Point --dir");
    assert!(!p.path().join("app.db").exists(), "no database was created");
}

#[test]
fn each_migrate_run_that_applies_something_records_a_new_batch() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.unlocked(DB, &["migrate"]).success();
    p.table_migration(2, "create_b", "b");
    p.table_migration(3, "create_c", "c");
    p.unlocked(DB, &["migrate"])
        .success()
        .stdout_has("Applied 2 in batch 2.");
    p.unlocked(DB, &["migrate"]).success();
    let batches: Vec<Option<i64>> = p.states(DB).into_iter().map(|(_, _, b)| b).collect();
    assert_eq!(batches, [Some(1), Some(2), Some(2)]);
}

#[test]
fn migrations_apply_in_version_order_not_file_name_order() {
    let p = Project::new();
    // "10" sorts before "9" as text; version order must win: 9 creates the table 10 alters.
    p.irreversible(9, "create_t", "CREATE TABLE t (id INTEGER);\n");
    p.irreversible(10, "add_col", "ALTER TABLE t ADD COLUMN name TEXT;\n");
    let run = p.unlocked(DB, &["migrate"]);
    run.success();
    assert_eq!(
        steps(&run.stdout, "applied"),
        st(&[(9, "create_t"), (10, "add_col")])
    );
}

#[test]
fn global_options_work_after_the_subcommand() {
    let p = Project::new();
    three(&p);
    p.run(&[
        "migrate",
        "-d",
        "sqlite:app.db",
        "--no-lock",
        "--dir",
        "migrations",
        "--output",
        "json",
    ])
    .success();
    assert_eq!(user_tables(&p), ["a", "b", "c"]);
}

#[test]
fn several_dirs_are_loaded_together() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.write("more/2_create_b.up.sql", "CREATE TABLE b (id INT);\n");
    p.write("more/2_create_b.down.sql", "DROP TABLE b;\n");
    p.unlocked(DB, &["--dir", "migrations", "--dir", "more", "migrate"])
        .success()
        .stdout_has("Applied 2 in batch 1.");
    assert_eq!(user_tables(&p), ["a", "b"]);
}

#[test]
fn custom_history_table_is_used() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.unlocked(DB, &["--history-table", "schema_log", "migrate"])
        .success();
    let tables = p.tables(DB);
    assert!(tables.contains(&"schema_log".to_string()), "{tables:?}");
    assert!(
        !tables.contains(&"dirthara_migrations".to_string()),
        "{tables:?}"
    );
    let run = p.unlocked(
        DB,
        &[
            "--history-table",
            "schema_log",
            "status",
            "--output",
            "json",
        ],
    );
    assert_eq!(run.json()["migrations"][0]["state"], "applied");
}
