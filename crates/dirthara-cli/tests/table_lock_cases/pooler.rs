//! Through a PgBouncer of the test's own in `pool_mode = transaction`, with `--locking
//! lease`: every step carries its table-lock timeout in its own transaction — a statement
//! outside a transaction in its own message, with `SET LOCAL` — so the timeout bounds the
//! statement whichever server session runs it, and never stays behind in a server session
//! the pooler then lends to the application.

use std::time::Duration;

use sqlx::{Connection, Executor, PgConnection, Row};

use super::{columns, retries, users, Blocker};
use crate::support::pgbouncer::PgBouncer;
use crate::support::servers::{Server, TestDb};
use crate::support::watch::Watched;
use crate::support::{dirthara, text, Migrations};

/// One server session behind the bouncer: what dirthara left in it, the next client gets.
#[tokio::test(flavor = "multi_thread")]
async fn no_timeout_stays_behind_in_a_pooled_server_session() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let Some(bouncer) = PgBouncer::start(&db, 1).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(
        1,
        "add_c",
        "-- dirthara:no-transaction\nALTER TABLE users ADD COLUMN c INT;",
        None,
    );
    let out = dirthara(
        &bouncer.url(),
        m.path(),
        &[
            "--locking",
            "lease",
            "migrate",
            "--table-lock-timeout",
            "1500ms",
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(columns(&db).await, ["c", "id"]);
    let mut app = PgConnection::connect(&bouncer.url()).await.unwrap();
    let row = app.fetch_one("SHOW lock_timeout").await.unwrap();
    assert_eq!(
        row.get::<String, _>(0),
        "0",
        "the application's session is ours no more"
    );
}

/// A step in one transaction and a statement outside one, each blocked by a transaction
/// on its table: each gives way with the blocker named, and is applied once it ends.
#[tokio::test(flavor = "multi_thread")]
async fn steps_give_way_through_pgbouncer_with_the_lease() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let Some(bouncer) = PgBouncer::start(&db, 4).await else {
        return;
    };
    users(&db).await;
    db.execute("CREATE TABLE orders (id INT PRIMARY KEY)").await;
    let m = Migrations::new();
    m.add(1, "add_c", "ALTER TABLE users ADD COLUMN c INT;", None);
    m.add(
        2,
        "add_total",
        "-- dirthara:no-transaction\nALTER TABLE orders ADD COLUMN total INT;",
        None,
    );
    // Directly on the server, as the application would be.
    let on_users = Blocker::hold(&db).await;
    let on_orders = Blocker::hold_at(Server::Postgres, &db.url, "orders").await;
    let sessions = [on_users.session, on_orders.session];
    let mut run = Watched::spawn(dirthara(
        &bouncer.url(),
        m.path(),
        &[
            "--locking",
            "lease",
            "migrate",
            "--table-lock-timeout",
            "300ms",
            "--output",
            "ndjson",
        ],
    ));
    run.wait_for("table_lock_timeout", Some(1));
    on_users.end().await;
    run.wait_for("table_lock_timeout", Some(2));
    on_orders.end().await;
    let ended = run.finish(Duration::from_secs(60));
    assert_eq!(ended.code, Some(0), "{ended:?}");
    assert_eq!(ended.finished(), [1, 2]);
    for (version, (table, session)) in [(1, ("users", sessions[0])), (2, ("orders", sessions[1]))] {
        let retry = (retries(&ended.events).into_iter())
            .find(|e| e["version"] == version)
            .unwrap();
        assert_eq!(retry["table"], table, "{retry}");
        assert_eq!(retry["blocker"]["session_id"], session, "{retry}");
        assert_eq!(retry["blocker"]["application"], "report-job", "{retry}");
    }
    assert_eq!(columns(&db).await, ["c", "id"]);
    assert_eq!(
        db.history().await,
        vec![(1, 1, "applied".to_string()), (2, 1, "applied".to_string())]
    );
}
