//! Files refused when they are loaded, before anything connects or runs, even when the bad
//! file is not the first to run: nothing is applied, and every bad file is named at once.
//! Found at run time instead, migration 1 was applied before migration 2 failed.

mod support;

use support::servers::{Server, TestDb};
use support::{dirthara, text, Migrations};

/// Invalid Extended JSON (an `$oid` that is no hex, a `$date` that is no date) parses as
/// JSON, so only the MongoDB parser finds it: it runs at load, on every step.
#[tokio::test(flavor = "multi_thread")]
async fn invalid_extended_json_in_a_later_migration_is_refused_before_the_first_is_applied() {
    let Some(db) = TestDb::create(Server::Mongo).await else {
        return;
    };
    let m = Migrations::collections(1);
    m.add_as(
        "json",
        2,
        "bad_id",
        r#"[{"insert": "c1", "documents": [{"_id": {"$oid": "not-hex"}}]}]"#,
        Some(r#"[{"delete": "c1", "deletes": [{"q": {}, "limit": 0}]}]"#),
    );
    m.add_as(
        "json",
        3,
        "bad_date",
        r#"[{"insert": "c1", "documents": [{"at": {"$date": "yesterday"}}]}]"#,
        Some(r#"[{"delete": "c1", "deletes": [{"q": {"at": {"$date": "soon"}}, "limit": 0}]}]"#),
    );
    // A command that never reverses leaves down files unread; one that can reverse reads
    // (and refuses) them too, still before anything runs.
    let up_problems = [
        "2_bad_id.up.json: up step: command #1 is not valid Extended JSON",
        "3_bad_date.up.json: up step: command #1 is not valid Extended JSON",
    ];
    let down_problem = "3_bad_date.up.json: down step: command #1 is not valid Extended JSON";
    for (command, count) in [
        ("migrate", 2),
        ("status", 2),
        ("rollback", 3),
        ("refresh", 3),
    ] {
        let out = dirthara(&db.url, m.path(), &[command]).output().unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{command}: {stdout}{stderr}");
        assert!(
            stderr.starts_with(&format!("Error [INVALID_MIGRATION]: {count} problems")),
            "{command}: {stderr}"
        );
        for needle in up_problems {
            assert!(stderr.contains(needle), "{command}: {needle}: {stderr}");
        }
        assert_eq!(
            stderr.contains(down_problem),
            count == 3,
            "{command}: {stderr}"
        );
    }
    assert!(db.history().await.is_empty(), "nothing was applied");
    let collections = db.mongo().await.list_collection_names().await.unwrap();
    assert!(!collections.contains(&"c1".to_string()), "{collections:?}");
}

/// Blank to MySQL but not to every database (only `#` comments): refused where the database
/// is known, at load, like the up steps that are blank to all.
#[tokio::test(flavor = "multi_thread")]
async fn an_up_step_blank_to_mariadb_is_refused_before_anything_is_applied() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let m = Migrations::tables(1);
    m.add(
        2,
        "todo",
        "# write the change here\n;\n",
        Some("DROP TABLE t2;"),
    );
    let out = dirthara(&db.url, m.path(), &["migrate"]).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.contains("2_todo.up.sql: empty up: it has nothing to run"),
        "{stderr}"
    );
    let tables = db
        .strings("SELECT CAST(TABLE_NAME AS CHAR) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()")
        .await;
    assert!(
        tables.is_empty(),
        "nothing was created or recorded: {tables:?}"
    );
}

/// A bad file is reported as soon as it is read, even when the server cannot be reached and
/// the connection attempt beside the loading would retry for an hour (`--connect-timeout`):
/// the attempt is dropped, not waited for. Before, the refusal came only after the retries.
#[test]
fn a_bad_file_is_reported_without_waiting_for_an_unreachable_server() {
    let project = support::project::Project::new();
    project.migration("1_empty.up.sql", "-- nothing here\n");
    let port = support::pgbouncer::free_port();
    for url in [
        format!("postgres://postgres@127.0.0.1:{port}/app"),
        format!("mysql://root@127.0.0.1:{port}/app"),
        format!("mongodb://127.0.0.1:{port}/app?directConnection=true"),
    ] {
        let cmd = dirthara(
            &url,
            &project.migrations_dir(),
            &["--connect-timeout", "1h", "migrate"],
        );
        // A deadlock watchdog, not a speed target: the fault it guards waits an hour.
        let out =
            support::wait_with_watchdog(support::spawn(cmd), std::time::Duration::from_secs(90));
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{url}: {stdout}{stderr}");
        assert!(
            // A first "waiting for database" line may come before: the attempt starts at once.
            stderr.contains("Error [INVALID_MIGRATION]:") && stderr.contains("1_empty.up.sql"),
            "{url}: {stderr}"
        );
    }
}
