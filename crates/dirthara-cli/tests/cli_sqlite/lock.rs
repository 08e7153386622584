//! The lock on SQLite, which has no session lock: the commands that would take one are
//! refused before anything changes, `--no-lock` runs them, and `unlock` finds nothing to
//! inspect.

use crate::support::project::Project;
use crate::{st, states, three, user_tables, DB};

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
fn quiet_never_hides_that_a_run_is_unlocked() {
    let p = Project::new();
    three(&p);
    for output in ["human", "json"] {
        let run = p.unlocked(DB, &["-q", "--output", output, "migrate"]);
        run.success().stderr_has("WITHOUT the migration lock");
        p.unlocked(DB, &["rollback", "--all"]).success();
    }
}

#[test]
fn no_lock_and_locking_flags_together_are_a_usage_error() {
    let p = Project::new();
    let run = p.sqlite(DB, &["--no-lock", "--locking", "off", "migrate"]);
    run.code(2);
    assert!(!p.exists(DB));
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
