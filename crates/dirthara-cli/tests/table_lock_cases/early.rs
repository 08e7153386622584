//! A pause between attempts is cut short once the session that held the lock is done: the
//! pause after the first attempt keeps the application blocked under a quarter of the time
//! (here at least six timeouts), but the blocker ends as soon as the first retry is
//! announced, and the step is tried again at once — the `table_lock_freed` event, naming
//! the session that was waited for.

use std::time::Duration;

use super::{columns, users, Blocker};
use crate::support::servers::{Server, TestDb};
use crate::support::watch::Watched;
use crate::support::{dirthara, Migrations};

async fn the_next_attempt_comes_once_the_blocker_is_done(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(1, "add_c", "ALTER TABLE users ADD COLUMN c INT;", None);
    let blocker = Blocker::hold(&db).await;
    let session = blocker.session;
    let mut run = Watched::spawn(dirthara(
        &db.url,
        m.path(),
        &[
            "migrate",
            "--table-lock-timeout",
            "1s",
            "--output",
            "ndjson",
        ],
    ));
    run.wait_for("table_lock_timeout", Some(1));
    blocker.end().await;
    let ended = run.finish(Duration::from_secs(60));
    assert_eq!(ended.code, Some(0), "{ended:?}");
    let retry = (ended.events.iter())
        .find(|e| e["event"] == "table_lock_timeout")
        .unwrap();
    assert!(retry["retry_in_ms"].as_u64().unwrap() >= 6000, "{retry}");
    let freed = (ended.events.iter())
        .find(|e| e["event"] == "table_lock_freed")
        .unwrap_or_else(|| panic!("the pause ran its course: {ended:?}"));
    assert_eq!(freed["version"], 1, "{freed}");
    assert_eq!(freed["blocker"]["session_id"], session, "{freed}");
    assert!(freed["pause_left_ms"].as_u64().unwrap() > 0, "{freed}");
    // Blocked a whole timeout in a run just over one: no room to wait again (MariaDB
    // `lock_wait_timeout = 0`; PostgreSQL's 1 ms at most while the room is that short).
    assert!(freed["wait_ms"].as_u64().unwrap() < 1000, "{freed}");
    assert_eq!(ended.finished(), [1]);
    assert_eq!(columns(&db).await, ["c", "id"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_the_next_attempt_comes_once_the_blocker_is_done() {
    the_next_attempt_comes_once_the_blocker_is_done(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_the_next_attempt_comes_once_the_blocker_is_done() {
    the_next_attempt_comes_once_the_blocker_is_done(Server::Mysql).await;
}
