//! MySQL/MariaDB waiters block inside `GET_LOCK` (woken by the server at release) instead of
//! polling: the wait still ends on time, a signal still interrupts it, and an interrupted
//! waiter never ends up holding the lock behind anyone's back.

mod support;

use std::path::Path;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use support::servers::{Server, TestDb};
use support::{dirthara, spawn, text, wait_with_watchdog, Migrations};

/// Sessions of the test database blocked in a waiting `GET_LOCK` (timeout not 0).
async fn blocked_waiters(db: &TestDb) -> usize {
    db.strings(&format!(
        "SELECT CAST(ID AS CHAR) FROM information_schema.PROCESSLIST \
         WHERE DB = '{}' AND INFO LIKE 'SELECT CAST(GET_LOCK(%' \
         AND INFO NOT LIKE '%, 0) AS SIGNED)'",
        db.name
    ))
    .await
    .len()
}

async fn wait_for(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let started = Instant::now();
    while !done().await {
        assert!(started.elapsed() < Duration::from_secs(20), "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runner A, holding the lock for `seconds` inside migration 1.
async fn holder(db: &TestDb, m: &Migrations, seconds: f64) -> Child {
    m.add(1, "hold", &format!("SELECT SLEEP({seconds})"), None);
    let a = spawn(dirthara(&db.url, m.path(), &["migrate"]));
    wait_for("runner A is inside its migration", async || {
        !db.strings(&format!(
            "SELECT CAST(ID AS CHAR) FROM information_schema.PROCESSLIST \
             WHERE DB = '{}' AND INFO LIKE 'SELECT SLEEP(%'",
            db.name
        ))
        .await
        .is_empty()
    })
    .await;
    a
}

fn finished(child: Child) -> Output {
    wait_with_watchdog(child, Duration::from_secs(60))
}

fn migrate(db: &TestDb, dir: &Path, args: &[&str]) -> Command {
    let mut all = vec!["migrate"];
    all.extend(args);
    dirthara(&db.url, dir, &all)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_blocks_in_get_lock_and_takes_over_when_the_holder_is_done() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let m = Migrations::new();
    let a = holder(&db, &m, 1.5).await;
    let b = spawn(migrate(&db, m.path(), &["--lock-wait", "60s"]));
    wait_for("runner B blocks in GET_LOCK", async || {
        blocked_waiters(&db).await == 1
    })
    .await;
    let (a, b) = (finished(a), finished(b));
    assert!(a.status.success(), "{:?}", text(&a));
    assert!(b.status.success(), "{:?}", text(&b));
    assert_eq!(db.history().await, vec![(1, 1, "applied".to_string())]);
    // B released what it took: a third run gets the lock without waiting.
    let c = migrate(&db, m.path(), &["--lock-wait", "0"])
        .output()
        .unwrap();
    assert!(c.status.success(), "{:?}", text(&c));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bounded_wait_inside_get_lock_ends_on_time() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let m = Migrations::new();
    let a = holder(&db, &m, 6.0).await;
    let started = Instant::now();
    let b = migrate(&db, m.path(), &["--lock-wait", "1200ms"])
        .output()
        .unwrap();
    let waited = started.elapsed();
    let (_, stderr) = text(&b);
    assert_eq!(b.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Error [MIGRATION_LOCK_HELD]"), "{stderr}");
    // Not before the wait was up, and not a whole extra GET_LOCK timeout after it.
    assert!(waited >= Duration::from_millis(1200), "{waited:?}");
    assert!(waited < Duration::from_millis(1200 + 1500), "{waited:?}");
    assert!(finished(a).status.success());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiter_interrupted_inside_get_lock_stops_and_never_takes_the_lock_later() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let m = Migrations::new();
    let a = holder(&db, &m, 2.0).await;
    let b = spawn(migrate(&db, m.path(), &["--lock-wait", "60s"]));
    wait_for("runner B blocks in GET_LOCK", async || {
        blocked_waiters(&db).await == 1
    })
    .await;
    let sent = Command::new("kill")
        .arg("-INT")
        .arg(b.id().to_string())
        .status()
        .unwrap();
    assert!(sent.success());
    let b = finished(b);
    let (_, stderr) = text(&b);
    assert_eq!(b.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("Error [INTERRUPTED]"), "{stderr}");
    // B's session is gone at once (no GET_LOCK left waiting to be granted when A lets go)...
    assert_eq!(blocked_waiters(&db).await, 0);
    let a = finished(a);
    assert!(a.status.success(), "{:?}", text(&a));
    // ...so once A is done the lock is free, and B applied nothing.
    let c = migrate(&db, m.path(), &["--lock-wait", "0"])
        .output()
        .unwrap();
    assert!(c.status.success(), "{:?}", text(&c));
    assert_eq!(db.history().await, vec![(1, 1, "applied".to_string())]);
}
