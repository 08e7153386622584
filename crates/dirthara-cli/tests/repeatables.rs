//! Repeatable migrations (issue 31, part 2), on PostgreSQL, MariaDB, SQLite and the
//! MongoDB-compatible server: `R__<name>` files are applied after every versioned migration
//! of the run, in name order; again only when their text changes (a changed placeholder
//! value included, and a change reverted); never by `rollback`; all again by `refresh`. A
//! failing one fails the run with the versioned migrations before it kept, and is applied
//! again once fixed. `status` lists them apart, `preview` shows them.
//!
//! Each repeatable here appends a row (a document) when it runs, so the rows count the runs.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::scenarios::{Database, Place};
use support::servers::Server;
use support::{dirthara, text};

crate::scenario_tests! {
    postgres => Database::Server(Server::Postgres) => [
        repeatables_apply_after_the_versioned_ones_and_again_only_when_they_change,
        a_failing_repeatable_keeps_the_versioned_migrations_and_runs_again_once_fixed,
    ],
    mariadb => Database::Server(Server::Mysql) => [
        repeatables_apply_after_the_versioned_ones_and_again_only_when_they_change,
        a_failing_repeatable_keeps_the_versioned_migrations_and_runs_again_once_fixed,
    ],
    sqlite => Database::Sqlite => [
        repeatables_apply_after_the_versioned_ones_and_again_only_when_they_change,
        a_failing_repeatable_keeps_the_versioned_migrations_and_runs_again_once_fixed,
    ],
    mongodb => Database::Server(Server::Mongo) => [
        repeatables_apply_after_the_versioned_ones_and_again_only_when_they_change,
    ],
}

/// `dirthara ARGS` on `place` with `--dir <dir>`; SQLite runs unlocked.
fn run(place: &Place, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = dirthara(&place.url(), dir, &[]);
    if place.db().is_none() {
        cmd.arg("--no-lock");
    }
    cmd.args(args);
    cmd
}

fn ok(out: &Output) -> String {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
}

fn is_mongo(place: &Place) -> bool {
    place.db().is_some_and(|db| db.server == Server::Mongo)
}

/// The values logged by the repeatables, sorted (a run appends one per repeatable applied;
/// the order they ran in is what the output says).
async fn logged(place: &Place) -> Vec<String> {
    let sql = "SELECT v FROM applied_log";
    let mut values = match place {
        Place::Server(db) if db.server == Server::Mongo => {
            let log = db
                .mongo()
                .await
                .collection::<::mongodb::bson::Document>("applied_log");
            let mut cursor = log.find(::mongodb::bson::doc! {}).await.unwrap();
            let mut values = Vec::new();
            while cursor.advance().await.unwrap() {
                let document = cursor.deserialize_current().unwrap();
                values.push(document.get_str("v").unwrap().to_string());
            }
            values
        }
        Place::Server(db) => db.strings(sql).await,
        Place::Sqlite(dir) => sqlite_strings(&dir.path().join("lock.db"), sql).await,
    };
    values.sort();
    values
}

async fn assert_logged(place: &Place, expected: &[&str]) {
    let mut expected: Vec<String> = expected.iter().map(|v| v.to_string()).collect();
    expected.sort();
    assert_eq!(logged(place).await, expected);
}

async fn sqlite_strings(path: &Path, sql: &str) -> Vec<String> {
    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::{Connection, Row};
    let options = SqliteConnectOptions::new().filename(path);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    let rows = sqlx::query(sql).fetch_all(&mut conn).await.unwrap();
    rows.iter().map(|row| row.get::<String, _>(0)).collect()
}

/// A repeatable that logs `value` when it runs (its placeholder `${label}` too when asked).
fn logging(place: &Place, value: &str) -> (String, &'static str) {
    if is_mongo(place) {
        let text = format!(
            r#"{{"placeholders": true, "commands": [{{"insert": "applied_log", "documents": [{{"v": "{value}"}}]}}]}}"#
        );
        return (text, "json");
    }
    let text = format!(
        "-- dirthara:placeholders everywhere\n\
         INSERT INTO applied_log (v) VALUES ('{value}');\n"
    );
    (text, "sql")
}

fn write_repeatable(dir: &Path, place: &Place, name: &str, value: &str) {
    let (text, ext) = logging(place, value);
    std::fs::write(dir.join(format!("R__{name}.{ext}")), text).unwrap();
}

/// Migration 1: the log.
fn write_versioned(dir: &Path, place: &Place) {
    if is_mongo(place) {
        std::fs::write(dir.join("1_log.up.json"), r#"[{"create": "applied_log"}]"#).unwrap();
        std::fs::write(dir.join("1_log.down.json"), r#"[{"drop": "applied_log"}]"#).unwrap();
        return;
    }
    let up = "CREATE TABLE applied_log (v VARCHAR(80) NOT NULL);\n";
    std::fs::write(dir.join("1_log.up.sql"), up).unwrap();
    std::fs::write(dir.join("1_log.down.sql"), "DROP TABLE applied_log;\n").unwrap();
}

async fn repeatables_apply_after_the_versioned_ones_and_again_only_when_they_change(
    database: Database,
) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let project = support::scratch_dir();
    let dir = project.path();
    write_versioned(dir, &place);
    write_repeatable(dir, &place, "b_label", "label ${label}");
    write_repeatable(dir, &place, "a_log", "a");
    let with = |label: &str, args: &[&str]| {
        let mut cmd = run(&place, dir, &["--placeholder", &format!("label={label}")]);
        cmd.args(args);
        cmd.output().unwrap()
    };

    // `preview` shows them after the versioned step, in name order.
    let preview = ok(&with("one", &["preview", "migrate"]));
    let at = |needle: &str| (preview.find(needle)).unwrap_or_else(|| panic!("{needle}: {preview}"));
    assert!(at("up 1 log") < at("R__a_log (repeatable") && at("R__a_log") < at("R__b_label"));
    assert!(preview.contains("label one"), "the filled text: {preview}");

    let first = ok(&with("one", &["migrate"]));
    let at = |needle: &str| (first.find(needle)).unwrap_or_else(|| panic!("{needle}: {first}"));
    assert!(at("applied  1 log") < at("applied  R__a_log") && at("R__a_log") < at("R__b_label"));
    assert!(
        first.contains("Applied 1 in batch 1, applied 2 repeatables."),
        "{first}"
    );
    assert_logged(&place, &["a", "label one"]).await;

    // Unchanged: nothing runs.
    let again = ok(&with("one", &["migrate"]));
    assert!(again.contains("Nothing to migrate"), "{again}");
    assert_logged(&place, &["a", "label one"]).await;

    // A new placeholder value: the repeatable that uses it runs again; the versioned
    // migration is not "modified" (its checksum is of the text as written).
    let relabelled = ok(&with("two", &["migrate"]));
    assert!(relabelled.contains("applied  R__b_label") && !relabelled.contains("R__a_log"));
    assert_logged(&place, &["a", "label one", "label two"]).await;

    // Changed, then reverted: applied each time.
    let status = ok(&with("two", &["status"]));
    assert!(
        status.contains("R__a_log") && !status.contains("changed"),
        "{status}"
    );
    write_repeatable(dir, &place, "a_log", "a, changed");
    let status = ok(&with("two", &["status"]));
    let line = (status.lines().find(|l| l.starts_with("R__a_log"))).unwrap_or_default();
    assert!(line.contains("changed"), "{status}");
    ok(&with("two", &["migrate"]));
    write_repeatable(dir, &place, "a_log", "a");
    ok(&with("two", &["migrate"]));
    assert_logged(&place, &["a", "label one", "label two", "a, changed", "a"]).await;

    // `status --output json` marks them; the versioned migration is listed apart.
    let json: serde_json::Value =
        serde_json::from_str(&ok(&with("two", &["--output", "json", "status"]))).unwrap();
    assert_eq!(json["migrations"].as_array().unwrap().len(), 1);
    let repeatables = json["repeatables"].as_array().unwrap();
    assert_eq!(repeatables.len(), 2, "{json}");
    for r in repeatables {
        assert_eq!(
            (r["state"].as_str(), r["repeatable"].as_bool()),
            (Some("applied"), Some(true))
        );
    }

    // `rollback` leaves them alone: only the versioned migration is reverted.
    let rollback = ok(&with("two", &["rollback"]));
    assert!(
        rollback.contains("reverted 1 log") && !rollback.contains("R__"),
        "{rollback}"
    );
    // `refresh` (down, then up) applies every repeatable again, after the versioned ones.
    ok(&with("two", &["migrate"]));
    let refresh = ok(&with("two", &["refresh"]));
    assert!(refresh.contains("applied  R__a_log") && refresh.contains("applied  R__b_label"));
    assert_logged(&place, &["a", "label two"]).await;
}

async fn a_failing_repeatable_keeps_the_versioned_migrations_and_runs_again_once_fixed(
    database: Database,
) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let project = support::scratch_dir();
    let dir = project.path();
    write_versioned(dir, &place);
    write_repeatable(dir, &place, "a_log", "a");
    std::fs::write(
        dir.join("R__b_broken.sql"),
        "SELECT 1;\nINSERT INTO no_such_table VALUES (1);\n",
    )
    .unwrap();
    let failed = run(&place, dir, &["migrate"]).output().unwrap();
    let (stdout, stderr) = text(&failed);
    assert!(!failed.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("[MIGRATION_FAILED]")
            && stderr.contains("repeatable migration `R__b_broken` failed")
            && stderr.contains("R__b_broken.sql"),
        "{stderr}"
    );
    // The versioned migration and the repeatable before the broken one stay applied.
    assert_logged(&place, &["a"]).await;
    let status = ok(&run(&place, dir, &["status"]).output().unwrap());
    let line = (status.lines().find(|l| l.starts_with("1 "))).unwrap_or_default();
    assert!(line.contains("applied"), "{status}");
    let line = (status.lines().find(|l| l.starts_with("R__b_broken"))).unwrap_or_default();
    assert!(line.contains("failed"), "{status}");
    assert!(
        status.contains("R__b_broken failed:"),
        "why it failed: {status}"
    );
    // Never dirty: `status --dirty` has nothing to resolve.
    let dirty = ok(&run(&place, dir, &["status", "--dirty"]).output().unwrap());
    assert!(dirty.contains("No migration is dirty."), "{dirty}");

    // Unchanged, it runs again once what it needs is there (a new versioned migration); the
    // one that succeeded does not.
    std::fs::write(
        dir.join("2_fix.up.sql"),
        "CREATE TABLE no_such_table (id INT);\n",
    )
    .unwrap();
    let fixed = ok(&run(&place, dir, &["migrate"]).output().unwrap());
    let at = |needle: &str| (fixed.find(needle)).unwrap_or_else(|| panic!("{needle}: {fixed}"));
    assert!(at("applied  2 fix") < at("applied  R__b_broken"), "{fixed}");
    assert!(!fixed.contains("R__a_log"), "{fixed}");
    assert_logged(&place, &["a"]).await;

    // A repeatable whose file is gone is reported, not an error.
    std::fs::remove_file(dir.join("R__b_broken.sql")).unwrap();
    ok(&run(&place, dir, &["migrate"]).output().unwrap());
    let status = ok(&run(&place, dir, &["status"]).output().unwrap());
    let line = (status.lines().find(|l| l.starts_with("R__b_broken"))).unwrap_or_default();
    assert!(line.contains("removed"), "{status}");
}
