//! `status`.

use crate::support::project::Project;
use crate::{st, states, three, user_tables, DB};

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
fn status_on_an_empty_migrations_dir_is_no_migrations() {
    let p = Project::new();
    p.unlocked(DB, &["status"]).error("NO_MIGRATIONS");
    let run = p.unlocked(DB, &["status", "--output", "json"]);
    assert_eq!(run.json()["error"]["code"], "NO_MIGRATIONS");
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
