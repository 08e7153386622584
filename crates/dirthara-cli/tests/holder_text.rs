//! A lock holder busy with a statement in any language: the runners that report it (a
//! waiter, `unlock`) shorten the statement between characters, never inside one. Cutting
//! at a fixed byte once made a waiter crash (exit 101) in a rolling deploy whenever the
//! holder's statement had accented or CJK text across that byte.

mod support;

use std::time::{Duration, Instant};

use support::servers::{Server, TestDb};
use support::{dirthara, spawn, text, wait_with_watchdog, Migrations};

/// `SELECT SLEEP(n), '` is 18 bytes and `é` 2, so the report's cut at byte 48 falls inside
/// an `é`; the CJK text after it is 3 bytes a character.
fn holding_statement(seconds: u32) -> String {
    format!(
        "SELECT SLEEP({seconds}), 'a{}{}'",
        "é".repeat(30),
        "語".repeat(20)
    )
}

/// How long until runner A, holding the lock, is inside its migration.
async fn wait_until_sleeping(db: &TestDb) {
    let started = Instant::now();
    loop {
        let busy = db
            .strings(&format!(
                "SELECT CAST(ID AS CHAR) FROM information_schema.PROCESSLIST \
                 WHERE DB = '{}' AND INFO LIKE 'SELECT SLEEP(%'",
                db.name
            ))
            .await;
        if !busy.is_empty() {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "runner A never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_holder_busy_with_multi_byte_text_is_reported_by_unlock_and_a_waiter_that_then_proceeds()
{
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let m = Migrations::new();
    m.add(1, "hold", &holding_statement(4), None);
    let a = spawn(dirthara(&db.url, m.path(), &["migrate"]));
    wait_until_sleeping(&db).await;
    // Runner A loaded its files already: migration 2 is for the waiter to apply.
    m.add(2, "after", "CREATE TABLE after_the_wait (id INT)", None);

    let unlock = dirthara(&db.url, m.path(), &["unlock"]).output().unwrap();
    let (stdout, stderr) = text(&unlock);
    assert_eq!(unlock.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("busy with `SELECT SLEEP(4), 'aéééé"),
        "{stdout}{stderr}"
    );

    let b = dirthara(&db.url, m.path(), &["migrate", "--lock-wait", "60s"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&b);
    assert_eq!(b.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("busy with `SELECT SLEEP(4), 'aéééé"),
        "the waiter names what the holder runs: {stderr}"
    );
    let a = wait_with_watchdog(a, Duration::from_secs(60));
    assert!(a.status.success(), "{:?}", text(&a));
    assert_eq!(
        db.history().await,
        vec![(1, 1, "applied".to_string()), (2, 2, "applied".to_string())]
    );
}
