//! SIGINT / SIGTERM: the running migration finishes and is recorded, the lock is released,
//! the rest is left undone, and the exit code says which signal stopped the run.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::servers::{Server, TestDb};
use support::{dirthara, text, Migrations};

async fn interrupted_by(signal: &str, expected_exit: i32) {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "slow",
        "CREATE TABLE first (id INT);\nSELECT pg_sleep(1.5);",
        None,
    );
    m.add(2, "second", "CREATE TABLE second (id INT)", None);
    m.add(3, "third", "CREATE TABLE third (id INT)", None);
    let child = dirthara(&db.url, m.path(), &["migrate"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while db
        .strings("SELECT query FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%pg_sleep(1.5)%' AND pid <> pg_backend_pid()")
        .await
        .is_empty()
    {
        assert!(started.elapsed() < Duration::from_secs(20), "never reached the slow migration");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sent = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(expected_exit), "{stderr}");
    assert!(stderr.contains("Error [INTERRUPTED]"), "{stderr}");
    assert!(
        stderr.contains("left undone: 2 second, 3 third"),
        "{stderr}"
    );
    // The running migration finished and was recorded; nothing after it ran.
    assert_eq!(db.history().await, vec![(1, 1, "applied".to_string())]);
    assert_eq!(
        db.tables().await,
        vec!["dirthara_migrations", "dirthara_migrations_meta", "first"]
    );
    // The lock was released: the next run proceeds at once.
    let out = dirthara(&db.url, m.path(), &["migrate", "--lock-wait", "0"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn sigint_finishes_the_running_migration_and_exits_130() {
    interrupted_by("INT", 130).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_finishes_the_running_migration_and_exits_143() {
    interrupted_by("TERM", 143).await;
}
