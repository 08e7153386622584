//! Black-box tests of the `dirthara` binary against SQLite files in temporary directories.
//!
//! Each test builds its own project (see `support::project::Project`) and runs the binary;
//! nothing here links the library. SQLite has no lock, so runs that change the database pass
//! `--no-lock` (`Project::unlocked`), and the tests that pin the lock refusal use
//! `Project::sqlite`.

mod support;

use support::project::{sqlite_tables, Project};
use support::run::{run_command, Run};

/// The database file every test uses, relative to its project directory.
const DB: &str = "app.db";

/// Migrations 1, 2, 3 creating tables `a`, `b`, `c` (reversible).
fn three(p: &Project) {
    p.table_migration(1, "create_a", "a");
    p.table_migration(2, "create_b", "b");
    p.table_migration(3, "create_c", "c");
}

/// `(version, state)` of every migration, from `status --output json`.
fn states(p: &Project) -> Vec<(i64, String)> {
    p.states(DB).into_iter().map(|(v, s, _)| (v, s)).collect()
}

fn st(rows: &[(i64, &str)]) -> Vec<(i64, String)> {
    rows.iter().map(|(v, s)| (*v, s.to_string())).collect()
}

/// The user tables of the database (the history tables left out).
fn user_tables(p: &Project) -> Vec<String> {
    p.tables(DB)
        .into_iter()
        .filter(|t| !t.starts_with("dirthara_") && !t.starts_with("sqlite_"))
        .collect()
}

fn versions(list: &serde_json::Value) -> Vec<i64> {
    list.as_array()
        .unwrap_or_else(|| panic!("expected an array, got {list}"))
        .iter()
        .map(|s| s["version"].as_i64().expect("version is a number"))
        .collect()
}

/// Lines of human stdout that start with `verb` (`applied` / `reverted`), as `(version, name)`.
fn steps(stdout: &str, verb: &str) -> Vec<(i64, String)> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            if words.next()? != verb {
                return None;
            }
            let version = words.next()?.parse().ok()?;
            Some((version, words.next()?.to_string()))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The lock on SQLite
// ---------------------------------------------------------------------------------------------

#[test]
fn locked_commands_are_refused_on_sqlite_before_the_database_file_is_created() {
    let p = Project::new();
    three(&p);
    let commands: &[&[&str]] = &[
        &["migrate"],
        &["up"],
        &["rollback"],
        &["rollback", "--steps", "2"],
        &["rollback", "--all"],
        &["down"],
        &["refresh"],
        &["fresh", "--force"],
    ];
    for args in commands {
        let run = p.sqlite(DB, args);
        run.error("MIGRATION_LOCK_FAILED")
            .stderr_has("`dirthara:migrations`")
            .stderr_has("`default`")
            .stderr_has("--no-lock");
        assert!(
            run.stdout.is_empty(),
            "{args:?}: nothing on stdout: {run:?}"
        );
        assert!(
            !p.exists(DB),
            "{args:?} must not create the database file before refusing"
        );
    }
}

#[test]
fn locked_commands_with_a_version_argument_are_refused_on_sqlite_without_creating_the_file() {
    let p = Project::new();
    three(&p);
    let commands: &[&[&str]] = &[
        &["to", "2"],
        &["to", "0"],
        &["baseline", "2"],
        &["resolve", "1", "--accept-checksum"],
        &["resolve", "1", "--applied"],
        &["resolve", "1", "--rolled-back"],
    ];
    for args in commands {
        let run = p.sqlite(DB, args);
        run.error("MIGRATION_LOCK_FAILED")
            .stderr_has("`dirthara:migrations`")
            .stderr_has("`default`");
        assert!(!p.exists(DB), "{args:?} must not create the database file");
    }
}

#[test]
fn lock_refusal_leaves_an_existing_database_byte_for_byte_unchanged() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.unlocked(DB, &["migrate"]).success();
    p.table_migration(2, "create_b", "b");
    let before = std::fs::read(p.join(DB)).unwrap();
    let commands: &[&[&str]] = &[
        &["migrate"],
        &["rollback"],
        &["down"],
        &["refresh"],
        &["fresh", "--force"],
    ];
    for args in commands {
        p.sqlite(DB, args).error("MIGRATION_LOCK_FAILED");
        assert_eq!(
            std::fs::read(p.join(DB)).unwrap(),
            before,
            "{args:?} changed the database file"
        );
    }
    assert_eq!(states(&p), st(&[(1, "applied"), (2, "pending")]));
}

#[test]
fn locking_auto_flag_is_refused_like_the_default_and_locking_off_runs() {
    let p = Project::new();
    three(&p);
    p.sqlite(DB, &["--locking", "auto", "migrate"])
        .error("MIGRATION_LOCK_FAILED");
    assert!(!p.exists(DB));
    p.sqlite(DB, &["--locking", "session", "migrate"])
        .error("MIGRATION_LOCK_FAILED");
    assert!(!p.exists(DB));
    p.sqlite(DB, &["--locking", "off", "migrate"])
        .success()
        .stderr_has("WITHOUT the migration lock");
    assert_eq!(user_tables(&p), ["a", "b", "c"]);
}

#[test]
fn no_lock_runs_and_says_so_on_stderr_only() {
    let p = Project::new();
    three(&p);
    let run = p.unlocked(DB, &["migrate"]);
    run.success().stderr_has("WITHOUT the migration lock");
    assert!(!run.stdout.contains("WITHOUT"), "notices belong on stderr");
}

#[test]
fn no_lock_and_locking_flags_together_are_a_usage_error() {
    let p = Project::new();
    let run = p.sqlite(DB, &["--no-lock", "--locking", "off", "migrate"]);
    run.code(2);
    assert!(!p.exists(DB));
}

// ---------------------------------------------------------------------------------------------
// migrate / up
// ---------------------------------------------------------------------------------------------

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

#[test]
fn migrate_with_an_empty_migrations_dir_succeeds() {
    let p = Project::new();
    p.unlocked(DB, &["migrate"])
        .success()
        .stdout_has("Nothing to migrate");
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

// ---------------------------------------------------------------------------------------------
// rollback / down
// ---------------------------------------------------------------------------------------------

/// 1 and 2 applied in batch 1, 3 in batch 2.
fn two_batches(p: &Project) {
    p.table_migration(1, "create_a", "a");
    p.table_migration(2, "create_b", "b");
    p.unlocked(DB, &["migrate"]).success();
    p.table_migration(3, "create_c", "c");
    p.unlocked(DB, &["migrate"]).success();
}

#[test]
fn rollback_reverses_only_the_last_batch_by_default() {
    let p = Project::new();
    two_batches(&p);
    let run = p.unlocked(DB, &["rollback"]);
    run.success().stdout_has("Reverted 1.");
    assert_eq!(steps(&run.stdout, "reverted"), st(&[(3, "create_c")]));
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "applied"), (3, "pending")])
    );
    assert_eq!(user_tables(&p), ["a", "b"]);

    let run = p.unlocked(DB, &["rollback"]);
    run.success();
    assert_eq!(
        steps(&run.stdout, "reverted"),
        st(&[(2, "create_b"), (1, "create_a")]),
        "newest first"
    );
    assert!(user_tables(&p).is_empty());
}

#[test]
fn rollback_steps_n_reverses_the_n_newest_across_batches() {
    let p = Project::new();
    two_batches(&p);
    let run = p.unlocked(DB, &["rollback", "--steps", "2"]);
    run.success();
    assert_eq!(
        steps(&run.stdout, "reverted"),
        st(&[(3, "create_c"), (2, "create_b")])
    );
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "pending"), (3, "pending")])
    );
    assert_eq!(user_tables(&p), ["a"]);
}

#[test]
fn rollback_to_v_reverses_everything_applied_after_v() {
    let p = Project::new();
    two_batches(&p);
    let run = p.unlocked(DB, &["rollback", "--to", "1"]);
    run.success();
    assert_eq!(
        steps(&run.stdout, "reverted"),
        st(&[(3, "create_c"), (2, "create_b")])
    );
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "pending"), (3, "pending")])
    );
}

#[test]
fn rollback_to_0_reverses_everything() {
    let p = Project::new();
    two_batches(&p);
    p.unlocked(DB, &["rollback", "--to", "0"]).success();
    assert_eq!(
        states(&p),
        st(&[(1, "pending"), (2, "pending"), (3, "pending")])
    );
    assert!(user_tables(&p).is_empty());
}

#[test]
fn rollback_to_an_unknown_version_is_refused_and_changes_nothing() {
    let p = Project::new();
    two_batches(&p);
    p.unlocked(DB, &["rollback", "--to", "7"])
        .error("UNKNOWN_VERSION")
        .stderr_has("7");
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "applied"), (3, "applied")])
    );
}

#[test]
fn rollback_all_reverses_every_applied_migration_newest_first() {
    let p = Project::new();
    two_batches(&p);
    let run = p.unlocked(DB, &["rollback", "--all"]);
    run.success().stdout_has("Reverted 3.");
    assert_eq!(
        steps(&run.stdout, "reverted"),
        st(&[(3, "create_c"), (2, "create_b"), (1, "create_a")])
    );
    assert_eq!(
        states(&p),
        st(&[(1, "pending"), (2, "pending"), (3, "pending")])
    );
    assert!(user_tables(&p).is_empty());
}

#[test]
fn rollback_with_nothing_applied_succeeds_and_says_so() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["rollback"])
        .success()
        .stdout_has("Nothing to roll back.");
    p.unlocked(DB, &["down"]).success();
}

#[test]
fn rollback_scope_flags_are_validated_by_the_command_line() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["rollback", "--steps", "0"]).code(2);
    p.unlocked(DB, &["rollback", "--steps", "x"]).code(2);
    p.unlocked(DB, &["rollback", "--steps", "1", "--all"])
        .code(2);
    p.unlocked(DB, &["rollback", "--to", "1", "--all"]).code(2);
    assert!(!p.exists(DB));
}

#[test]
fn down_reverses_exactly_the_most_recently_applied_migration() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    let run = p.unlocked(DB, &["down"]);
    run.success();
    assert_eq!(steps(&run.stdout, "reverted"), st(&[(3, "create_c")]));
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "applied"), (3, "pending")])
    );
    assert_eq!(user_tables(&p), ["a", "b"]);
}

#[test]
fn rolling_back_an_irreversible_migration_is_refused_before_anything_changes() {
    let p = Project::new();
    p.irreversible(1, "create_a", "CREATE TABLE a (id INT);\n");
    p.table_migration(2, "create_b", "b");
    p.unlocked(DB, &["migrate"]).success();
    // --all would revert 2 first, then hit 1: the plan is refused as a whole.
    p.unlocked(DB, &["rollback", "--all"])
        .error("IRREVERSIBLE_MIGRATION")
        .stderr_has("create_a");
    assert_eq!(states(&p), st(&[(1, "applied"), (2, "applied")]));
    assert_eq!(user_tables(&p), ["a", "b"]);
    // Reverting only the reversible one works.
    p.unlocked(DB, &["down"]).success();
    assert_eq!(states(&p), st(&[(1, "applied"), (2, "pending")]));
}

// ---------------------------------------------------------------------------------------------
// to V
// ---------------------------------------------------------------------------------------------

#[test]
fn to_v_moves_up_through_v_and_down_until_v_is_the_newest() {
    let p = Project::new();
    three(&p);
    let run = p.unlocked(DB, &["to", "2"]);
    run.success();
    assert_eq!(
        steps(&run.stdout, "applied"),
        st(&[(1, "create_a"), (2, "create_b")])
    );
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "applied"), (3, "pending")])
    );

    p.unlocked(DB, &["to", "3"]).success();
    assert_eq!(user_tables(&p), ["a", "b", "c"]);

    let run = p.unlocked(DB, &["to", "1"]);
    run.success();
    assert_eq!(
        steps(&run.stdout, "reverted"),
        st(&[(3, "create_c"), (2, "create_b")])
    );
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "pending"), (3, "pending")])
    );

    // Already there: nothing to do, still success.
    p.unlocked(DB, &["to", "1"])
        .success()
        .stdout_has("Nothing to migrate");
}

#[test]
fn to_0_reverses_everything() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    let run = p.unlocked(DB, &["to", "0"]);
    run.success();
    assert_eq!(steps(&run.stdout, "reverted").len(), 3);
    assert_eq!(
        states(&p),
        st(&[(1, "pending"), (2, "pending"), (3, "pending")])
    );
    assert!(user_tables(&p).is_empty());
}

#[test]
fn to_an_unknown_version_is_refused_and_changes_nothing() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    p.unlocked(DB, &["to", "7"])
        .error("UNKNOWN_VERSION")
        .stderr_has("7");
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "applied"), (3, "applied")])
    );
    p.unlocked(DB, &["to", "abc"]).code(2);
}

// ---------------------------------------------------------------------------------------------
// refresh / fresh
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// preview
// ---------------------------------------------------------------------------------------------

/// 1 and 2 applied (one batch), 3 pending; returns the database bytes.
fn previewable(p: &Project) -> Vec<u8> {
    p.table_migration(1, "create_a", "a");
    p.table_migration(2, "create_b", "b");
    p.unlocked(DB, &["migrate"]).success();
    p.table_migration(3, "create_c", "c");
    std::fs::read(p.join(DB)).unwrap()
}

/// The `-- <direction> <version> <name>` headers preview prints, in order.
fn preview_headers(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter(|l| l.starts_with("-- up ") || l.starts_with("-- down "))
        .map(|l| l.split(" (").next().unwrap_or(l).to_string())
        .collect()
}

#[track_caller]
fn assert_unchanged(p: &Project, before: &[u8]) {
    assert_eq!(
        std::fs::read(p.join(DB)).unwrap(),
        before,
        "preview changed the database file"
    );
    assert_eq!(
        states(p),
        st(&[(1, "applied"), (2, "applied"), (3, "pending")])
    );
}

#[test]
fn preview_migrate_prints_the_pending_sql_takes_no_lock_and_changes_nothing() {
    let p = Project::new();
    let before = previewable(&p);
    // Default locking: preview takes no lock, so SQLite's refusal does not apply.
    for command in ["migrate", "up"] {
        let run = p.sqlite(DB, &["preview", command]);
        run.success()
            .stdout_has("CREATE TABLE c (id INTEGER PRIMARY KEY);")
            .stderr_has("took no lock");
        assert_eq!(preview_headers(&run.stdout), ["-- up 3 create_c"]);
        assert!(!run.stdout.contains("CREATE TABLE a"), "{}", run.stdout);
        assert_unchanged(&p, &before);
    }
}

#[test]
fn preview_rollback_and_down_print_the_down_sql_and_change_nothing() {
    let p = Project::new();
    let before = previewable(&p);

    let run = p.sqlite(DB, &["preview", "rollback"]);
    run.success()
        .stdout_has("DROP TABLE b;")
        .stdout_has("DROP TABLE a;")
        .stderr_has("took no lock");
    assert_eq!(
        preview_headers(&run.stdout),
        ["-- down 2 create_b", "-- down 1 create_a"]
    );

    let run = p.sqlite(DB, &["preview", "rollback", "--steps", "1"]);
    run.success();
    assert_eq!(preview_headers(&run.stdout), ["-- down 2 create_b"]);

    let run = p.sqlite(DB, &["preview", "rollback", "--all"]);
    run.success();
    assert_eq!(preview_headers(&run.stdout).len(), 2);

    let run = p.sqlite(DB, &["preview", "down"]);
    run.success().stdout_has("DROP TABLE b;");
    assert_eq!(preview_headers(&run.stdout), ["-- down 2 create_b"]);

    assert_unchanged(&p, &before);
}

#[test]
fn preview_refresh_and_fresh_print_their_plans_and_change_nothing() {
    let p = Project::new();
    let before = previewable(&p);

    let run = p.sqlite(DB, &["preview", "refresh"]);
    run.success().stderr_has("took no lock");
    assert_eq!(
        preview_headers(&run.stdout),
        [
            "-- down 2 create_b",
            "-- down 1 create_a",
            "-- up 1 create_a",
            "-- up 2 create_b",
            "-- up 3 create_c"
        ]
    );

    let run = p.sqlite(DB, &["preview", "fresh"]);
    run.success().stdout_has("drop every table");
    assert_eq!(
        preview_headers(&run.stdout),
        ["-- up 1 create_a", "-- up 2 create_b", "-- up 3 create_c"]
    );

    assert_unchanged(&p, &before);
}

#[test]
fn preview_to_v_prints_the_plan_and_changes_nothing() {
    let p = Project::new();
    let before = previewable(&p);
    let run = p.sqlite(DB, &["preview", "to", "1"]);
    run.success().stderr_has("took no lock");
    assert_eq!(preview_headers(&run.stdout), ["-- down 2 create_b"]);
    let run = p.sqlite(DB, &["preview", "to", "3"]);
    run.success();
    assert_eq!(preview_headers(&run.stdout), ["-- up 3 create_c"]);
    let run = p.sqlite(DB, &["preview", "to", "0"]);
    run.success();
    assert_eq!(
        preview_headers(&run.stdout),
        ["-- down 2 create_b", "-- down 1 create_a"]
    );
    assert_unchanged(&p, &before);
}

#[test]
fn preview_with_nothing_to_do_says_so() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.unlocked(DB, &["migrate"]).success();
    let run = p.sqlite(DB, &["preview", "migrate"]);
    run.success().stdout_has("would do nothing");
    assert!(preview_headers(&run.stdout).is_empty());
}

#[test]
fn preview_json_is_one_document_with_each_steps_sql() {
    let p = Project::new();
    let before = previewable(&p);
    let run = p.sqlite(DB, &["preview", "refresh", "--output", "json"]);
    run.success();
    let doc = run.json();
    assert!(doc["operation"].is_string(), "{doc}");
    assert_eq!(doc["drop_all"], false);
    let steps = doc["steps"].as_array().expect("steps is an array");
    let plan: Vec<(i64, &str)> = steps
        .iter()
        .map(|s| {
            (
                s["version"].as_i64().unwrap(),
                s["direction"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        plan,
        [(2, "down"), (1, "down"), (1, "up"), (2, "up"), (3, "up")]
    );
    assert_eq!(steps[0]["sql"], "DROP TABLE b;\n");
    assert_eq!(
        steps[4]["sql"],
        "CREATE TABLE c (id INTEGER PRIMARY KEY);\n"
    );
    assert_eq!(steps[4]["name"], "create_c");
    assert_eq!(steps[4]["transactional"], true);
    assert_eq!(steps[4]["out_of_order"], false);
    assert_unchanged(&p, &before);
}

#[test]
fn read_only_commands_do_not_create_a_missing_database_file() {
    let p = Project::new();
    three(&p);
    let commands: &[&[&str]] = &[
        &["status"],
        &["preview", "migrate"],
        &["preview", "fresh"],
        &["unlock"],
        &["unlock", "--force"],
    ];
    for args in commands {
        p.sqlite(DB, args).success();
        assert!(!p.exists(DB), "{args:?} created the database file");
    }
}

// ---------------------------------------------------------------------------------------------
// status
// ---------------------------------------------------------------------------------------------

#[test]
fn status_human_lists_every_migration_with_state_batch_and_applied_at() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    p.unlocked(DB, &["down"]).success();
    let run = p.sqlite(DB, &["status"]);
    run.success();
    let lines: Vec<&str> = run.stdout.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["VERSION", "NAME", "STATE", "BATCH", "APPLIED", "AT"]
    );
    let row = |i: usize| -> Vec<&str> { lines[i].split_whitespace().collect() };
    assert_eq!(row(1)[..4], ["1", "create_a", "applied", "1"]);
    assert!(
        row(1)[4].contains('T'),
        "applied at is a timestamp: {}",
        lines[1]
    );
    assert_eq!(row(2)[..4], ["2", "create_b", "applied", "1"]);
    assert_eq!(row(3), ["3", "create_c", "pending"]);
    assert!(
        run.stdout.contains("`dirthara:migrations`") && run.stdout.contains("`default`"),
        "status names the lock: {}",
        run.stdout
    );
    assert!(run.stdout.contains("no lock to inspect"), "{}", run.stdout);
}

#[test]
fn status_json_has_the_documented_shape() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    p.unlocked(DB, &["down"]).success();
    let run = p.sqlite(DB, &["status", "--output", "json"]);
    run.success();
    let doc = run.json();
    let migrations = doc["migrations"]
        .as_array()
        .expect("migrations is an array");
    assert_eq!(migrations.len(), 3);
    let first = &migrations[0];
    assert_eq!(first["version"], 1);
    assert_eq!(first["name"], "create_a");
    assert_eq!(first["state"], "applied");
    assert_eq!(first["batch"], 1);
    assert!(first["applied_at"].is_string(), "{first}");
    assert_eq!(first["out_of_order"], false);
    let last = &migrations[2];
    assert_eq!(last["version"], 3);
    assert_eq!(last["state"], "pending");
    assert!(last["batch"].is_null(), "{last}");
    assert!(last["applied_at"].is_null(), "{last}");
    assert_eq!(last["out_of_order"], false);
    assert_eq!(doc["lock"]["name"], "dirthara:migrations");
    assert_eq!(doc["lock"]["connection"], "default");
    assert_eq!(doc["lock"]["state"], "unsupported");

    let doc = p.unlocked(DB, &["status", "--output", "json"]).json();
    assert_eq!(doc["lock"]["state"], "off");
}

#[test]
fn status_on_an_empty_migrations_dir_says_so() {
    let p = Project::new();
    p.unlocked(DB, &["status"])
        .success()
        .stdout_has("No migrations found.");
    let doc = p.unlocked(DB, &["status", "--output", "json"]).json();
    assert_eq!(doc["migrations"], serde_json::json!([]));
}

#[test]
fn applied_migration_whose_file_is_gone_shows_as_missing_and_blocks_migrate() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    p.remove("migrations/2_create_b.up.sql");
    p.remove("migrations/2_create_b.down.sql");
    p.table_migration(4, "create_d", "d");
    assert_eq!(
        states(&p),
        st(&[
            (1, "applied"),
            (2, "missing"),
            (3, "applied"),
            (4, "pending")
        ])
    );
    p.unlocked(DB, &["migrate"])
        .error("MISSING_MIGRATION")
        .stderr_has("create_b");
    assert_eq!(user_tables(&p), ["a", "b", "c"], "4 was not applied");
}

// ---------------------------------------------------------------------------------------------
// unlock
// ---------------------------------------------------------------------------------------------

#[test]
fn unlock_on_sqlite_succeeds_and_says_there_is_no_lock_to_inspect() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    let run = p.sqlite(DB, &["unlock"]);
    run.success()
        .stdout_has("`dirthara:migrations`")
        .stdout_has("no lock to inspect");
    let doc = p.sqlite(DB, &["unlock", "--output", "json"]).json();
    assert_eq!(doc["name"], "dirthara:migrations");
    assert_eq!(doc["state"], "unsupported");
}

#[test]
fn unlock_force_on_sqlite_succeeds_with_nothing_to_release() {
    let p = Project::new();
    three(&p);
    p.unlocked(DB, &["migrate"]).success();
    let run = p.sqlite(DB, &["unlock", "--force"]);
    run.success()
        .stdout_has("no lock to inspect")
        .stdout_has("Nothing to release.");
    let doc = p
        .sqlite(DB, &["unlock", "--force", "--output", "json"])
        .json();
    assert_eq!(doc["released"], serde_json::json!([]));
    // And it changed nothing.
    assert_eq!(
        states(&p),
        st(&[(1, "applied"), (2, "applied"), (3, "applied")])
    );
}

// ---------------------------------------------------------------------------------------------
// new
// ---------------------------------------------------------------------------------------------

/// Splits `<version>_<rest>` and checks the version is a plausible UTC `YYYYMMDDHHMMSS`.
#[track_caller]
fn timestamp_version(file: &str) -> (i64, &str) {
    let (version, rest) = file.split_once('_').expect("`<version>_<name>`");
    assert_eq!(version.len(), 14, "{file}: a 14-digit timestamp version");
    assert!(version.bytes().all(|b| b.is_ascii_digit()), "{file}");
    let n = |r: std::ops::Range<usize>| version[r].parse::<u32>().unwrap();
    assert!(n(0..4) >= 2024, "{file}: year");
    assert!((1..=12).contains(&n(4..6)), "{file}: month");
    assert!((1..=31).contains(&n(6..8)), "{file}: day");
    assert!(
        n(8..10) < 24 && n(10..12) < 60 && n(12..14) < 60,
        "{file}: time"
    );
    (version.parse().unwrap(), rest)
}

#[test]
fn new_creates_timestamped_up_and_down_files_in_the_dir_creating_it() {
    let p = Project::new();
    let run = p.run(&["--dir", "db/migrations", "new", "create_users"]);
    run.success();
    let files = p.list("db/migrations");
    assert_eq!(files.len(), 2, "{files:?}");
    let (down_version, down) = timestamp_version(&files[0]);
    let (up_version, up) = timestamp_version(&files[1]);
    assert_eq!(down_version, up_version);
    assert_eq!(down, "create_users.down.sql");
    assert_eq!(up, "create_users.up.sql");
    for file in &files {
        assert!(
            run.stdout.contains(file.as_str()),
            "stdout names {file}: {}",
            run.stdout
        );
    }
    assert!(p.list("migrations").is_empty(), "only --dir is written to");
}

#[test]
fn new_defaults_to_the_migrations_dir_and_its_files_are_accepted_by_migrate() {
    let p = Project::new();
    p.run(&["new", "first"]).success();
    let files = p.list("migrations");
    assert_eq!(files.len(), 2, "{files:?}");
    p.unlocked(DB, &["status"]).success().stdout_has("first");
}

#[test]
fn new_mongo_creates_json_command_files_that_are_refused_until_filled_in() {
    let p = Project::new();
    p.run(&["new", "--mongo", "add_users"]).success();
    let mut files = p.list("migrations");
    files.sort();
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(timestamp_version(&files[0]).1, "add_users.down.json");
    assert_eq!(timestamp_version(&files[1]).1, "add_users.up.json");
    // An empty command list is not a migration yet: it is refused, naming the file.
    p.run(&["preview", "migrate"])
        .error("INVALID_MIGRATION")
        .stderr_has("has no commands");
}

#[test]
fn new_irreversible_creates_only_an_up_file() {
    let p = Project::new();
    p.run(&["new", "--irreversible", "seed_data"]).success();
    let files = p.list("migrations");
    assert_eq!(files.len(), 1, "{files:?}");
    let (_, rest) = timestamp_version(&files[0]);
    assert_eq!(rest, "seed_data.sql");
}

#[test]
fn new_twice_in_a_row_gives_distinct_increasing_versions() {
    let p = Project::new();
    p.run(&["new", "one"]).success();
    p.run(&["new", "two"]).success();
    let files = p.list("migrations");
    assert_eq!(files.len(), 4, "{files:?}");
    let one = files.iter().find(|f| f.ends_with("_one.up.sql")).unwrap();
    let two = files.iter().find(|f| f.ends_with("_two.up.sql")).unwrap();
    assert!(
        timestamp_version(one).0 < timestamp_version(two).0,
        "{files:?}"
    );
    // Same name twice: still two distinct migrations.
    p.run(&["new", "one"]).success();
    assert_eq!(p.list("migrations").len(), 6);
    p.unlocked(DB, &["status"]).success();
}

#[test]
fn new_refuses_a_bad_name_and_creates_nothing() {
    let p = Project::new();
    for name in ["bad name", "bad/name", "", "semi;colon", "ünicode"] {
        let run = p.run(&["--dir", "fresh_dir", "new", name]);
        run.code(1);
        assert!(
            run.stderr.starts_with("Error ["),
            "{name:?}: an `Error [CODE]` on stderr: {run:?}"
        );
        assert!(
            !p.exists("fresh_dir") || p.list("fresh_dir").is_empty(),
            "{name:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// completions, help, version, usage errors
// ---------------------------------------------------------------------------------------------

#[test]
fn completions_bash_prints_a_completion_script() {
    let p = Project::new();
    let run = p.run(&["completions", "bash"]);
    run.success().stdout_has("_dirthara").stdout_has("complete");
    p.run(&["completions", "nosuchshell"]).code(2);
}

#[test]
fn help_and_version_exit_0_on_stdout() {
    let p = Project::new();
    let run = p.run(&["--help"]);
    run.success().stdout_has("Usage:").stdout_has("migrate");
    p.run(&["help"]).success().stdout_has("Usage:");
    p.run(&["migrate", "--help"]).success().stdout_has("Usage:");
    p.run(&["rollback", "--help"])
        .success()
        .stdout_has("--steps");
    p.run(&["-h"]).success();
    let run = p.run(&["--version"]);
    run.success()
        .stdout_has(env!("CARGO_PKG_VERSION"))
        .stdout_has("dirthara");
    p.run(&["-V"]).success();
}

#[test]
fn unknown_flags_and_subcommands_are_usage_errors_with_exit_2() {
    let p = Project::new();
    three(&p);
    for args in [
        &["migrate", "--bogus"][..],
        &["--bogus", "status"],
        &["status", "extra"],
        &["frobnicate"],
        &["--output", "yaml", "status"],
        &[],
    ] {
        let run = p.sqlite(DB, args);
        run.code(2);
        assert!(
            run.stdout.is_empty(),
            "{args:?}: usage errors go to stderr: {run:?}"
        );
        assert!(!run.stderr.is_empty(), "{args:?}");
    }
    assert!(!p.exists(DB));
}

#[test]
fn unknown_flag_without_a_subcommand_exits_2() {
    let p = Project::new();
    let run = p.run(&["--bogus"]);
    run.code(2).stderr_has("--bogus");
    p.run(&["to", "--help"]).success();
}

// ---------------------------------------------------------------------------------------------
// baseline / resolve
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// JSON and NDJSON output
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Bad input: refused before the database is touched
// ---------------------------------------------------------------------------------------------

/// Every reading command refuses the directory with INVALID_MIGRATION naming `file`, and the
/// database file is never created.
#[track_caller]
fn assert_refused(p: &Project, file: &str) {
    for args in [&["migrate"][..], &["status"], &["preview", "migrate"]] {
        let run = p.unlocked(DB, args);
        run.error("INVALID_MIGRATION").stderr_has(file);
        assert!(
            !p.exists(DB),
            "{args:?}: the database file must not be created"
        );
    }
}

#[test]
fn a_sql_file_whose_name_does_not_parse_is_refused() {
    for file in ["abc.sql", "1create.sql", "create_1.up.sql", "x_y.down.sql"] {
        let p = Project::new();
        p.table_migration(1, "create_a", "a");
        p.migration(file, "CREATE TABLE z (id INT);\n");
        assert_refused(&p, file);
    }
}

#[test]
fn two_migrations_with_one_version_are_refused() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.irreversible(1, "create_other", "CREATE TABLE other (id INT);\n");
    assert_refused(&p, "1_create");

    let p = Project::new();
    p.irreversible(5, "one", "CREATE TABLE a (id INT);\n");
    p.irreversible(5, "two", "CREATE TABLE b (id INT);\n");
    assert_refused(&p, "5_");
}

#[test]
fn a_down_without_its_up_is_refused() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.migration("2_create_b.down.sql", "DROP TABLE b;\n");
    assert_refused(&p, "2_create_b.down.sql");
}

#[test]
fn an_unknown_directive_is_refused() {
    let p = Project::new();
    p.irreversible(
        1,
        "create_a",
        "-- dirthara:bogus\nCREATE TABLE a (id INT);\n",
    );
    let run = p.unlocked(DB, &["migrate"]);
    run.error("INVALID_MIGRATION").stderr_has("dirthara:bogus");
    assert_refused(&p, "1_create_a.sql");
}

#[test]
fn known_directives_are_accepted() {
    let p = Project::new();
    p.irreversible(
        1,
        "create_a",
        "-- dirthara:no-transaction\nCREATE TABLE a (id INT);\n",
    );
    let run = p.sqlite(DB, &["preview", "migrate", "--output", "json"]);
    run.success();
    assert_eq!(run.json()["steps"][0]["transactional"], false);
    p.unlocked(DB, &["migrate"]).success();
    assert_eq!(user_tables(&p), ["a"]);
}

#[test]
fn an_empty_migration_file_is_refused() {
    for contents in ["", "\n  \n"] {
        let p = Project::new();
        p.table_migration(1, "create_a", "a");
        p.irreversible(2, "nothing", contents);
        assert_refused(&p, "2_nothing.sql");
    }
}

#[test]
fn a_non_utf8_migration_file_is_refused() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.migration(
        "2_latin1.sql",
        b"INSERT INTO a (id) VALUES (1); -- caf\xe9\n".as_slice(),
    );
    assert_refused(&p, "2_latin1.sql");
}

#[test]
fn version_0_is_a_real_migration_and_to_0_keeps_it() {
    let p = Project::new();
    p.table_migration(0, "create_z", "z");
    p.table_migration(1, "create_a", "a");
    p.unlocked(DB, &["migrate"]).success();
    assert_eq!(states(&p), st(&[(0, "applied"), (1, "applied")]));
    p.unlocked(DB, &["to", "0"]).success();
    assert_eq!(states(&p), st(&[(0, "applied"), (1, "pending")]));
    p.unlocked(DB, &["rollback", "--all"]).success();
    assert_eq!(states(&p), st(&[(0, "pending"), (1, "pending")]));
}

#[test]
fn a_readme_and_other_non_sql_files_in_the_migrations_dir_are_ignored() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.migration("README.md", "# Migrations\n\nRun `dirthara migrate`.\n");
    p.migration(".gitkeep", "");
    p.unlocked(DB, &["migrate"])
        .success()
        .stdout_has("Applied 1 in batch 1.");
    assert_eq!(states(&p), st(&[(1, "applied")]));
}

#[test]
fn a_missing_migrations_dir_is_a_config_error_naming_it_before_the_database_is_touched() {
    let p = Project::new();
    for args in [
        &["--dir", "nope", "migrate"][..],
        &["--dir", "nope", "status"],
    ] {
        p.unlocked(DB, args)
            .error("CONFIG_ERROR")
            .stderr_has("`nope`");
        assert!(!p.exists(DB), "{args:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// A failing migration
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Checksums
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

#[test]
fn dirthara_toml_in_the_working_dir_is_honoured() {
    let p = Project::new();
    p.write("db/1_create_a.up.sql", "CREATE TABLE a (id INT);\n");
    p.write("db/1_create_a.down.sql", "DROP TABLE a;\n");
    p.write(
        "dirthara.toml",
        "directories = [\"db\"]\nlocking = false\n\n[connections]\ndefault = \"sqlite:x.db\"\n",
    );
    let run = p.run(&["migrate"]);
    run.success()
        .stdout_has("Applied 1 in batch 1.")
        .stderr_has("WITHOUT the migration lock");
    assert!(p.tables("x.db").contains(&"a".to_string()));
    let doc = p.run(&["status", "--output", "json"]).json();
    assert_eq!(doc["lock"]["state"], "off");
}

#[test]
fn flags_override_dirthara_toml() {
    let p = Project::new();
    p.write("db/1_create_a.sql", "CREATE TABLE a (id INT);\n");
    p.write("other/7_create_o.sql", "CREATE TABLE o (id INT);\n");
    p.write(
        "dirthara.toml",
        "directories = [\"db\"]\nlocking = false\n[connections]\ndefault = \"sqlite:x.db\"\n",
    );
    p.run(&["-d", "sqlite:y.db", "--dir", "other", "migrate"])
        .success();
    assert!(!p.exists("x.db"), "-d overrides [connections] default");
    assert!(p.tables("y.db").contains(&"o".to_string()));
    assert!(!p.tables("y.db").contains(&"a".to_string()));
    // --locking auto overrides `locking = false`.
    p.run(&["--locking", "auto", "migrate"])
        .error("MIGRATION_LOCK_FAILED");
    assert!(!p.exists("x.db"));
}

#[test]
fn config_flag_reads_another_file_with_dirs_relative_to_it() {
    let p = Project::new();
    p.write("conf/db/1_create_a.sql", "CREATE TABLE a (id INT);\n");
    p.write(
        "conf/settings.toml",
        "directories = [\"db\"]\nlocking = false\n[connections]\ndefault = \"sqlite:c.db\"\n",
    );
    p.run(&["--config", "conf/settings.toml", "migrate"])
        .success()
        .stdout_has("Applied 1 in batch 1.");
    p.run(&["--config", "conf/missing.toml", "status"])
        .error("CONFIG_ERROR")
        .stderr_has("missing.toml");
}

#[test]
fn database_url_environment_variable_is_used_and_the_flag_overrides_it() {
    let p = Project::new();
    three(&p);
    run_command(
        p.cmd()
            .env("DATABASE_URL", "sqlite:env.db")
            .args(["--no-lock", "migrate"]),
    )
    .success();
    assert!(p.tables("env.db").contains(&"a".to_string()));
    run_command(p.cmd().env("DATABASE_URL", "sqlite:env.db").args([
        "-d",
        "sqlite:flag.db",
        "--no-lock",
        "migrate",
    ]))
    .success()
    .stdout_has("Applied 3 in batch 1.");
    assert!(p.exists("flag.db"));
}

#[test]
fn dirthara_environment_variables_are_read() {
    let p = Project::new();
    p.write("envdir/1_create_a.sql", "CREATE TABLE a (id INT);\n");
    run_command(
        p.cmd()
            .env("DATABASE_URL", "sqlite:env.db")
            .env("DIRTHARA_LOCKING", "false")
            .env("DIRTHARA_DIRECTORIES", "envdir")
            .arg("migrate"),
    )
    .success()
    .stdout_has("Applied 1 in batch 1.");
    run_command(
        p.cmd()
            .env("DATABASE_URL", "sqlite:env.db")
            .env("DIRTHARA_LOCKING", "sideways")
            .arg("status"),
    )
    .error("CONFIG_ERROR")
    .stderr_has("DIRTHARA_LOCKING");
}

#[test]
fn dotenv_file_with_database_url_is_read_and_the_environment_wins_over_it() {
    let p = Project::new();
    three(&p);
    p.write(
        ".env",
        "# local settings\nDATABASE_URL=\"sqlite:dotenv.db\"\n",
    );
    p.run(&["--no-lock", "migrate"]).success();
    assert!(p.tables("dotenv.db").contains(&"a".to_string()));
    run_command(
        p.cmd()
            .env("DATABASE_URL", "sqlite:real.db")
            .args(["--no-lock", "migrate"]),
    )
    .success()
    .stdout_has("Applied 3 in batch 1.");
    assert!(p.exists("real.db"));
}

#[test]
fn a_dotenv_line_that_cannot_be_read_is_a_config_error_naming_the_file() {
    let p = Project::new();
    three(&p);
    p.write(
        ".env",
        "DATABASE_URL=sqlite:dotenv.db
BAD LINE
",
    );
    p.run(&["--no-lock", "migrate"])
        .error("CONFIG_ERROR")
        .stderr_has(".env");
    assert!(!p.exists("dotenv.db"));
}

#[test]
fn an_unknown_key_in_dirthara_toml_is_a_config_error_naming_the_key() {
    let p = Project::new();
    p.write(
        "dirthara.toml",
        "directoriez = [\"db\"]\n[connections]\ndefault = \"sqlite:x.db\"\n",
    );
    p.run(&["--no-lock", "migrate"])
        .error("CONFIG_ERROR")
        .stderr_has("directoriez");
    assert!(!p.exists("x.db"));
}

#[test]
fn a_bad_value_in_dirthara_toml_is_a_config_error_naming_the_key() {
    let p = Project::new();
    p.write(
        "dirthara.toml",
        "locking = \"sideways\"\n[connections]\ndefault = \"sqlite:x.db\"\n",
    );
    p.run(&["status"])
        .error("CONFIG_ERROR")
        .stderr_has("locking");
    p.write("dirthara.toml", "this is not toml = = \n");
    p.run(&["status"])
        .error("CONFIG_ERROR")
        .stderr_has("dirthara.toml");
}

#[test]
fn a_missing_database_url_is_a_config_error_telling_how_to_pass_one() {
    let p = Project::new();
    three(&p);
    for args in [
        &["--no-lock", "migrate"][..],
        &["status"],
        &["preview", "migrate"],
    ] {
        p.run(args)
            .error("CONFIG_ERROR")
            .stderr_has("--database-url")
            .stderr_has("DATABASE_URL");
    }
}

#[test]
fn a_password_in_a_url_is_never_printed() {
    let p = Project::new();
    three(&p);
    let urls = [
        "postgres://u:hunter2@127.0.0.1:1/x",
        "postgresql://u:hunter2@127.0.0.1:1/x?sslmode=disable",
        "mysql://u:hunter2@127.0.0.1:1/x",
        "mariadb://u:hunter2@127.0.0.1:1/x",
    ];
    let commands: &[&[&str]] = &[
        &["status"],
        &["--no-lock", "migrate"],
        &["migrate"],
        &["fresh"],
        &["preview", "migrate"],
        &["unlock"],
        &["--output", "ndjson", "status"],
        &["-v", "--output", "json", "status"],
    ];
    for url in urls {
        for args in commands {
            let run = run_command(
                p.cmd()
                    .args(["-d", url, "--connect-timeout", "0"])
                    .args(*args),
            );
            run.code(1).nowhere("hunter2");
        }
    }
    // The error says which connection failed, with the password masked.
    let run = p.run(&[
        "-d",
        "postgres://u:hunter2@127.0.0.1:1/x",
        "--connect-timeout",
        "0",
        "status",
    ]);
    run.error("CONNECTION_ERROR").stderr_has("127.0.0.1");
    // In the environment too.
    run_command(
        p.cmd()
            .env("DATABASE_URL", "postgres://u:hunter2@127.0.0.1:1/x")
            .args(["--connect-timeout", "0", "status"]),
    )
    .error("CONNECTION_ERROR")
    .nowhere("hunter2");
    // And while retrying (the waiting notice).
    p.run(&[
        "-d",
        "postgres://u:hunter2@127.0.0.1:1/x",
        "--connect-timeout",
        "300ms",
        "--output",
        "ndjson",
        "status",
    ])
    .error("CONNECTION_ERROR")
    .nowhere("hunter2");
}

#[test]
fn a_password_in_the_url_query_string_is_never_printed() {
    let p = Project::new();
    let run = p.run(&[
        "-d",
        "postgres://u@127.0.0.1:1/x?password=hunter2",
        "--connect-timeout",
        "0",
        "status",
    ]);
    run.error("CONNECTION_ERROR").nowhere("hunter2");
}

#[test]
fn help_text_does_not_print_the_database_url_from_the_environment() {
    let p = Project::new();
    let run = run_command(
        p.cmd()
            .env("DATABASE_URL", "postgres://u:hunter2@127.0.0.1:1/x")
            .arg("--help"),
    );
    run.success().nowhere("hunter2");
}

// ---------------------------------------------------------------------------------------------
// The test helper itself
// ---------------------------------------------------------------------------------------------

#[test]
fn the_sqlite_file_reader_sees_many_tables_and_not_dropped_ones() {
    let p = Project::new();
    // Enough tables that the schema spans several b-tree pages.
    let create: String = (0..300)
        .map(|i| format!("CREATE TABLE t_{i:03} (id INTEGER PRIMARY KEY, note TEXT);\n"))
        .collect();
    let drop: String = (0..300)
        .map(|i| format!("DROP TABLE t_{i:03};\n"))
        .collect();
    p.reversible(1, "many", &create, &drop);
    p.irreversible(
        2,
        "index_only",
        "CREATE INDEX t_000_note ON t_000 (note);\n",
    );
    p.unlocked(DB, &["migrate"]).success();
    let tables = user_tables(&p);
    assert_eq!(tables.len(), 300, "{tables:?}");
    assert_eq!(tables[0], "t_000");
    assert_eq!(tables[299], "t_299");
    assert!(p.tables(DB).contains(&"dirthara_migrations".to_string()));
    p.irreversible(3, "drop_some", "DROP TABLE t_005;\nDROP TABLE t_250;\n");
    p.unlocked(DB, &["migrate"]).success();
    let tables = user_tables(&p);
    assert_eq!(tables.len(), 298);
    assert!(!tables.contains(&"t_005".to_string()));
    assert!(!tables.contains(&"t_250".to_string()));
    assert!(sqlite_tables(&p.join("nope.db")).is_empty());
}

#[test]
fn a_migration_on_a_connection_without_a_url_is_refused_before_anything_runs() {
    // Regression: the `running` marker used to be written before the connection was opened,
    // leaving a dirty record behind.
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.write(
        "migrations/2_facts.sql",
        "-- dirthara:connection analytics\nCREATE TABLE facts (id INT);\n",
    );
    p.unlocked(DB, &["migrate"])
        .error("INVALID_MIGRATION")
        .stderr_has("2_facts.sql")
        .stderr_has("connection `analytics` has no URL");
    assert!(!p.path().join(DB).exists(), "nothing was touched");
}

#[test]
fn dirthara_strict_accepts_any_case_and_refuses_nonsense() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.table_migration(3, "create_c", "c");
    p.unlocked(DB, &["migrate"]).success();
    p.table_migration(2, "create_b", "b");
    let strict = |value: &str| {
        run_command(p.cmd().env("DIRTHARA_STRICT", value).args([
            "-d",
            &format!("sqlite:{DB}"),
            "--no-lock",
            "migrate",
        ]))
    };
    strict("TRUE").error("OUT_OF_ORDER");
    strict("maybe")
        .error("CONFIG_ERROR")
        .stderr_has("DIRTHARA_STRICT");
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
