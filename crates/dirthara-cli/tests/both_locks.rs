//! `status` and `unlock` look at both locks — the session lock and the lease — whatever
//! `locking` says, and `unlock --force` releases whichever is held, naming it. Two
//! pipelines configured differently (one with `--locking lease`, one with the default) must
//! not hide each other's lock from the operator who comes to clear it.

mod support;

use std::time::Duration;

use support::servers::{Server, TestDb};
use support::{dirthara, spawn, text, wait_with_watchdog, Migrations};

/// A runner holding the lock of `holder_args` in a slow first migration.
fn slow_holder(db: &TestDb, holder_args: &[&str]) -> (Migrations, std::process::Child) {
    let m = Migrations::new();
    m.add(1, "slow", &db.server.sleep(8.0), None);
    let mut args = vec!["migrate"];
    args.extend_from_slice(holder_args);
    let child = spawn(dirthara(&db.url, m.path(), &args));
    (m, child)
}

/// Polls `status --output json` with `args` until `pick` finds the lock held.
fn wait_for_held(
    db: &TestDb,
    m: &Migrations,
    args: &[&str],
    pick: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let started = std::time::Instant::now();
    loop {
        let mut all = vec!["status", "--output", "json"];
        all.extend_from_slice(args);
        let out = dirthara(&db.url, m.path(), &all).output().unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if pick(&doc["lock"]) {
            return doc;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the holder never showed: {:?}",
            text(&out)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn other_held(lock: &serde_json::Value, strategy: &str) -> bool {
    (lock["others"].as_array().into_iter().flatten())
        .any(|o| o["strategy"] == strategy && o["state"] == "held")
}

async fn a_lease_is_seen_and_cleared_without_locking_lease(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let (m, holder) = slow_holder(&db, &["--locking", "lease"]);
    // The default strategy (the session lock) is free; the lease is held.
    let doc = wait_for_held(&db, &m, &[], |lock| other_held(lock, "lease"));
    assert_eq!(doc["lock"]["strategy"], "session");
    assert_eq!(doc["lock"]["state"], "free");
    let human = dirthara(&db.url, m.path(), &["unlock"]).output().unwrap();
    let (stdout, _) = text(&human);
    assert!(stdout.contains("also: the lease is held by"), "{stdout}");

    let forced = dirthara(&db.url, m.path(), &["unlock", "--force"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&forced);
    assert!(forced.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("lease: deleted the lease held by"),
        "{stdout}"
    );
    assert!(!stdout.contains("Nothing to release"), "{stdout}");
    let after = dirthara(&db.url, m.path(), &["status", "--output", "json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&after.stdout).unwrap();
    assert!(doc["lock"]["others"].is_null(), "{doc}");
    // The holder learns at its next check that the lease is gone; it must not be left running.
    let out = wait_with_watchdog(holder, Duration::from_secs(60));
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains("LOCK_LEASE_EXPIRED") || stderr.contains("LOCK_LEASE_LOST"),
        "the holder did not notice its lease was taken away: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_lease_is_seen_and_cleared_without_locking_lease() {
    a_lease_is_seen_and_cleared_without_locking_lease(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_a_lease_is_seen_and_cleared_without_locking_lease() {
    a_lease_is_seen_and_cleared_without_locking_lease(Server::Mysql).await;
}

async fn a_session_lock_is_seen_and_cleared_with_locking_lease(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let (m, holder) = slow_holder(&db, &[]);
    let doc = wait_for_held(&db, &m, &["--locking", "lease"], |lock| {
        other_held(lock, "session")
    });
    assert_eq!(doc["lock"]["strategy"], "lease");
    assert_eq!(doc["lock"]["state"], "free");
    // `status` looked without creating the lease table.
    assert!(
        !db.tables()
            .await
            .contains(&"dirthara_migrations_lock".to_string()),
        "status created the lease table"
    );
    let forced = dirthara(
        &db.url,
        m.path(),
        &["unlock", "--force", "--locking", "lease"],
    )
    .output()
    .unwrap();
    let (stdout, stderr) = text(&forced);
    assert!(forced.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("session lock: terminated"), "{stdout}");
    let out = wait_with_watchdog(holder, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(1), "{:?}", text(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_session_lock_is_seen_and_cleared_with_locking_lease() {
    a_session_lock_is_seen_and_cleared_with_locking_lease(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_a_session_lock_is_seen_and_cleared_with_locking_lease() {
    a_session_lock_is_seen_and_cleared_with_locking_lease(Server::Mysql).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_locking_off_both_locks_are_still_looked_at() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let (m, holder) = slow_holder(&db, &[]);
    let doc = wait_for_held(&db, &m, &["--no-lock"], |lock| other_held(lock, "session"));
    assert_eq!(doc["lock"]["state"], "off");
    let forced = dirthara(&db.url, m.path(), &["unlock", "--force", "--no-lock"])
        .output()
        .unwrap();
    let (stdout, _) = text(&forced);
    assert!(stdout.contains("session lock: terminated"), "{stdout}");
    wait_with_watchdog(holder, Duration::from_secs(60));
}

/// SQLite has no session lock: with the default `locking` nothing can be locked, yet a lease
/// another runner holds is shown and can be cleared.
#[tokio::test(flavor = "multi_thread")]
async fn sqlite_a_lease_is_seen_and_cleared_with_the_default_locking() {
    use sqlx::{Connection, Executor};
    let dir = support::scratch_dir();
    let url = format!("sqlite:{}", dir.path().join("app.db").display());
    let m = Migrations::tables(1);
    // `to 0`: before the first migration, nothing to do.
    let created = dirthara(&url, m.path(), &["to", "0", "--locking", "lease"])
        .output()
        .unwrap();
    assert!(created.status.success(), "{:?}", text(&created));
    let mut c = sqlx::SqliteConnection::connect(&url).await.unwrap();
    c.execute(
        "INSERT INTO dirthara_migrations_lock (id, owner_id, hostname, pid, operation, \
         acquired_at, expires_at) VALUES ('dirthara:migrations', 'other', 'ci-7', 42, 'migrate', \
         julianday('now'), julianday('now') + 1)",
    )
    .await
    .unwrap();
    c.close().await.unwrap();
    let out = dirthara(&url, m.path(), &["status", "--output", "json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["lock"]["state"], "unsupported", "{doc}");
    assert!(other_held(&doc["lock"], "lease"), "{doc}");
    let forced = dirthara(&url, m.path(), &["unlock", "--force"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&forced);
    assert!(forced.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("dirthara migrate ci-7:42"), "{stdout}");
    let taken = dirthara(&url, m.path(), &["migrate", "--locking", "lease"])
        .output()
        .unwrap();
    assert!(taken.status.success(), "{:?}", text(&taken));
}
