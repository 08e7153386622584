//! Bad input: refused before the database is touched.

use crate::support::project::Project;
use crate::{st, states, user_tables, DB};

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
fn a_broken_down_file_is_refused_by_the_commands_that_reverse_and_never_read_by_the_others() {
    let p = Project::new();
    p.table_migration(1, "create_a", "a");
    p.migration("2_b.up.sql", "CREATE TABLE b (id INT);\n");
    p.migration("2_b.down.sql", b"DROP TABLE b; -- caf\xe9\n".as_slice());
    // Neither migrate nor status needs a down step: they run as if it were fine.
    p.unlocked(DB, &["preview", "migrate"]).success();
    p.unlocked(DB, &["migrate"]).success();
    p.unlocked(DB, &["status"]).success();
    assert_eq!(states(&p), st(&[(1, "applied"), (2, "applied")]));
    // Every command that may reverse reads it, and refuses before changing anything.
    for args in [
        &["rollback"][..],
        &["down"],
        &["to", "1"],
        &["refresh"],
        &["preview", "rollback"],
    ] {
        p.unlocked(DB, args)
            .error("INVALID_MIGRATION")
            .stderr_has("2_b.down.sql")
            .stderr_has("not valid UTF-8");
        assert_eq!(
            states(&p),
            st(&[(1, "applied"), (2, "applied")]),
            "{args:?}"
        );
    }
    p.migration("2_b.down.sql", "DROP TABLE b;\n");
    p.unlocked(DB, &["rollback"]).success();
    assert_eq!(states(&p), st(&[(1, "pending"), (2, "pending")]));
}

#[test]
fn each_step_runs_in_a_transaction_unless_its_own_file_says_otherwise() {
    let p = Project::new();
    // The down step cannot run in a transaction; the up step can, and does.
    p.reversible(
        1,
        "create_a",
        "CREATE TABLE a (id INT);\n",
        "-- dirthara:no-transaction\nDROP TABLE a;\n",
    );
    p.reversible(
        2,
        "create_b",
        "CREATE TABLE b (id INT);\n",
        "BEGIN;\nDROP TABLE b;\nCOMMIT;\n",
    );
    let preview = p.unlocked(DB, &["preview", "migrate", "--output", "json"]);
    let steps = preview.success().json()["steps"].clone();
    for step in steps.as_array().unwrap() {
        assert_eq!(step["transactional"], true, "{step}");
        assert!(step.get("own_transaction").is_none(), "{step}");
    }
    p.unlocked(DB, &["migrate"]).success();
    let preview = p.unlocked(DB, &["preview", "refresh", "--output", "json"]);
    let steps = preview.success().json()["steps"].clone();
    let modes: Vec<_> = (steps.as_array().unwrap().iter())
        .map(|s| {
            (
                s["direction"].clone(),
                s["version"].clone(),
                s["transactional"].clone(),
            )
        })
        .collect();
    let (up, down) = ("up", "down");
    assert_eq!(
        modes,
        [
            (down.into(), 2.into(), false.into()),
            (down.into(), 1.into(), false.into()),
            (up.into(), 1.into(), true.into()),
            (up.into(), 2.into(), true.into()),
        ]
    );
    assert_eq!(
        steps[0]["own_transaction"], "`BEGIN` at line 1 of the down step",
        "{steps}"
    );
    p.unlocked(DB, &["refresh"]).success();
    assert_eq!(states(&p), st(&[(1, "applied"), (2, "applied")]));
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

/// A folder named like a Diesel migration without `up.sql` was once passed over in silence: a
/// typo (`up.sq`) or an empty folder is named in a `SKIPPED_FILE` warning with what it holds,
/// a folder with only `down.sql` is refused.
#[test]
fn a_diesel_folder_without_up_sql_is_warned_about_or_refused_never_skipped_silently() {
    let p = Project::new();
    p.migration("2024-01-01-000001_a/up.sql", "CREATE TABLE a (id INT);\n");
    p.migration("2024-01-01-000002_b/up.sq", "CREATE TABLE b (id INT);\n");
    std::fs::create_dir(p.join("migrations/2024-01-01-000003_c")).unwrap();
    p.unlocked(DB, &["migrate"])
        .success()
        .warning("SKIPPED_FILE")
        .stderr_has(
            "migrations/2024-01-01-000002_b was not loaded: a folder named like a Diesel \
             migration, but without `up.sql` (it holds `up.sq`)",
        )
        .stderr_has("migrations/2024-01-01-000003_c was not loaded")
        .stderr_has("(it holds nothing)");
    assert_eq!(user_tables(&p), ["a"]);

    let p = Project::new();
    p.migration("2024-01-01-000001_a/up.sql", "CREATE TABLE a (id INT);\n");
    p.migration("2024-01-01-000002_b/down.sql", "DROP TABLE b;\n");
    assert_refused(
        &p,
        "2024-01-01-000002_b: a Diesel migration folder with `down.sql` but no `up.sql`",
    );
}
