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

/// A free local port: bound, then released, so nothing listens there.
fn unused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Before the lock is held there is nothing to finish: a runner still retrying a database
/// that is down stops at the first signal, at once, with the signal's exit code.
fn stopped_while_connecting(signal: &str, expected_exit: i32, url: &str) {
    let m = Migrations::tables(1);
    let child = dirthara(url, m.path(), &["migrate", "--connect-timeout", "60s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Long enough to be inside the retry loop (the first attempt fails at once).
    std::thread::sleep(Duration::from_millis(1500));
    let sent_at = Instant::now();
    let sent = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(sent.success());
    let out = support::wait_with_watchdog(child, Duration::from_secs(20));
    let stopped_after = sent_at.elapsed();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(expected_exit), "{stderr}");
    assert!(stderr.contains("Error [INTERRUPTED]"), "{stderr}");
    assert!(stderr.contains("before the lock was taken"), "{stderr}");
    // One signal was enough: the retries did not go on until the 60 s timeout.
    assert!(
        stopped_after < Duration::from_secs(10),
        "took {stopped_after:?} to stop"
    );
}

#[test]
fn sigterm_while_retrying_the_connection_stops_at_once_with_143() {
    let url = format!("postgres://postgres@127.0.0.1:{}/app", unused_port());
    stopped_while_connecting("TERM", 143, &url);
}

#[test]
fn sigint_while_retrying_the_connection_stops_at_once_with_130() {
    let url = format!("mysql://root@127.0.0.1:{}/app", unused_port());
    stopped_while_connecting("INT", 130, &url);
}
