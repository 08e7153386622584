//! Where hand-written retry wrappers went wrong, in real runs against a held blocker:
//! - a migration's own `SET lock_timeout` (MySQL `lock_wait_timeout`) wins for that
//!   migration, and for that migration only;
//! - the timeout survives a migration's `RESET ALL` (MySQL: setting it back to its default);
//! - it never bounds the wait for the migration lock;
//! - several statements outside a transaction (PostgreSQL) are never tried again, and the
//!   error names who held the lock.

use std::time::Duration;

use super::{columns, users, wait_until_waited, Blocker};
use crate::support::servers::{Server, TestDb};
use crate::support::watch::Watched;
use crate::support::{dirthara, spawn, text, wait_with_watchdog, Migrations};

/// What a migration runs to read the table-lock timeout in force, as `seen.v`.
fn record_timeout(server: Server) -> &'static str {
    match server {
        Server::Postgres => "CREATE TABLE seen AS SELECT current_setting('lock_timeout') AS v;",
        _ => "CREATE TABLE seen AS SELECT CAST(@@SESSION.lock_wait_timeout AS CHAR) AS v;",
    }
}

/// Migration 1 sets a 30 s timeout of its own before its `ALTER`, which then waits past our
/// 900 ms (and the default 2 s) until the blocker ends; migration 2 records the timeout in
/// force for it: ours again.
async fn a_migrations_own_timeout_wins_for_it_alone(server: Server, first: &str) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(1, "own_timeout", first, None);
    m.add(2, "seen", record_timeout(server), None);
    let blocker = Blocker::hold(&db).await;
    let child = spawn(dirthara(
        &db.url,
        m.path(),
        &[
            "migrate",
            "--table-lock-timeout",
            "900ms",
            "--table-lock-retry-for",
            "0",
        ],
    ));
    wait_until_waited(&db, "ALTER TABLE users", Duration::from_millis(2500)).await;
    blocker.end().await;
    let out = wait_with_watchdog(child, Duration::from_secs(30));
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{first}: {stdout}\n{stderr}");
    assert!(!stderr.contains("TABLE_LOCK_TIMEOUT"), "{first}: {stderr}");
    assert_eq!(columns(&db).await, ["c", "id"]);
    let ours = match server {
        Server::Postgres => "900ms",
        _ => "1",
    };
    assert_eq!(
        db.strings("SELECT v FROM seen").await,
        [ours],
        "the next migration has ours again: {first}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_migrations_own_lock_timeout_wins_for_it_alone() {
    a_migrations_own_timeout_wins_for_it_alone(
        Server::Postgres,
        "SET lock_timeout = '30s';\nALTER TABLE users ADD COLUMN c INT;",
    )
    .await;
}

/// Outside a transaction each statement carries the timeout in its own message: from the
/// migration's own `SET` on, they do not.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_no_transaction_migrations_own_lock_timeout_wins_for_it_alone() {
    a_migrations_own_timeout_wins_for_it_alone(
        Server::Postgres,
        "-- dirthara:no-transaction\nSET lock_timeout = '30s';\nALTER TABLE users ADD COLUMN c INT;",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_a_migrations_own_lock_wait_timeout_wins_for_it_alone() {
    a_migrations_own_timeout_wins_for_it_alone(
        Server::Mysql,
        "SET SESSION lock_wait_timeout = 30;\nALTER TABLE users ADD COLUMN c INT;",
    )
    .await;
}

/// Migration 1 resets every setting; migration 2's `ALTER` still gives way (one attempt
/// allowed: the run fails with TABLE_LOCK_TIMEOUT instead of waiting for the blocker).
async fn the_timeout_survives_a_reset_between_migrations(server: Server, reset: &str) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(1, "reset", reset, None);
    m.add(2, "add_c", "ALTER TABLE users ADD COLUMN c INT;", None);
    let blocker = Blocker::hold(&db).await;
    let child = spawn(dirthara(
        &db.url,
        m.path(),
        &[
            "migrate",
            "--table-lock-timeout",
            "900ms",
            "--table-lock-retry-for",
            "0",
        ],
    ));
    // Without the timeout the run would wait for the blocker, which outlives the watchdog.
    let out = wait_with_watchdog(child, Duration::from_secs(20));
    blocker.end().await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("Error [TABLE_LOCK_TIMEOUT]: migration 2 (add_c)"),
        "{stderr}"
    );
    let applied: Vec<i64> = db.history().await.into_iter().map(|r| r.0).collect();
    assert_eq!(applied, [1]);
    assert_eq!(columns(&db).await, ["id"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_the_timeout_survives_reset_all_between_migrations() {
    the_timeout_survives_a_reset_between_migrations(Server::Postgres, "RESET ALL;").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_the_timeout_survives_a_no_transaction_reset_all() {
    the_timeout_survives_a_reset_between_migrations(
        Server::Postgres,
        "-- dirthara:no-transaction\nRESET ALL;",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_the_timeout_survives_a_reset_to_the_default_between_migrations() {
    the_timeout_survives_a_reset_between_migrations(
        Server::Mysql,
        "SET SESSION lock_wait_timeout = DEFAULT;",
    )
    .await;
}

/// Runner A holds the migration lock while its statement waits (its file turns the timeout
/// off); runner B, with a 300 ms table-lock timeout, waits for the migration lock for more
/// than a second all the same, gets it once A is done, and finds nothing to do.
async fn the_timeout_never_bounds_the_wait_for_the_migration_lock(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(
        1,
        "add_c",
        "-- dirthara:table-lock-timeout off\nALTER TABLE users ADD COLUMN c INT;",
        None,
    );
    let blocker = Blocker::hold(&db).await;
    let a = spawn(dirthara(&db.url, m.path(), &["migrate"]));
    // A holds the migration lock: its statement is waiting.
    wait_until_waited(&db, "ALTER TABLE users", Duration::from_millis(100)).await;
    let mut b = Watched::spawn(dirthara(
        &db.url,
        m.path(),
        &[
            "migrate",
            "--table-lock-timeout",
            "300ms",
            "--output",
            "ndjson",
        ],
    ));
    b.wait_for("lock_waiting", None);
    // Longer than B's table-lock timeout: B keeps waiting, whatever the scheduling.
    tokio::time::sleep(Duration::from_secs(1)).await;
    blocker.end().await;
    let a = wait_with_watchdog(a, Duration::from_secs(30));
    assert!(a.status.success(), "{:?}", text(&a));
    let b = b.finish(Duration::from_secs(30));
    assert_eq!(b.code, Some(0), "{b:?}");
    let acquired = (b.events.iter())
        .find(|e| e["event"] == "lock_acquired")
        .unwrap_or_else(|| panic!("{b:?}"));
    assert!(
        acquired["waited_ms"].as_u64().unwrap() >= 1000,
        "{acquired}"
    );
    assert!(
        !(b.events.iter()).any(|e| e["event"] == "migration_started"),
        "nothing left to do: {b:?}"
    );
    assert_eq!(db.history().await, vec![(1, 1, "applied".to_string())]);
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_the_timeout_never_bounds_the_wait_for_the_migration_lock() {
    the_timeout_never_bounds_the_wait_for_the_migration_lock(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_the_timeout_never_bounds_the_wait_for_the_migration_lock() {
    the_timeout_never_bounds_the_wait_for_the_migration_lock(Server::Mysql).await;
}

/// Two statements outside a transaction: the first commits before the second gives way, so
/// the step is never tried again. It fails at once (not after the retry budget), naming
/// who held the lock, and stays `running` for a person to look at.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_several_statements_outside_a_transaction_are_never_retried() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(
        1,
        "two",
        "-- dirthara:no-transaction\nCREATE TABLE before_it (id INT);\nALTER TABLE users ADD COLUMN c INT;\n",
        None,
    );
    let blocker = Blocker::hold(&db).await;
    let child = spawn(dirthara(
        &db.url,
        m.path(),
        &["migrate", "--table-lock-timeout", "300ms"],
    ));
    // Tried again, it would give way until the default budget (10 min) ran out.
    let out = wait_with_watchdog(child, Duration::from_secs(30));
    let session = blocker.session;
    blocker.end().await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        !stderr.contains("warning [TABLE_LOCK_TIMEOUT]"),
        "never retried: {stderr}"
    );
    assert!(stderr.contains("Error [MIGRATION_FAILED]"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the lock was held by session {session} (`report-job`"
        )),
        "the blocker is named: {stderr}"
    );
    assert!(db.tables().await.contains(&"before_it".to_string()));
    assert_eq!(columns(&db).await, ["id"]);
    assert_eq!(db.history().await, vec![(1, 1, "running".to_string())]);
}
