//! `preview`: the plan and its SQL, with nothing changed.

use crate::support::project::Project;
use crate::{st, states, three, DB};

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
