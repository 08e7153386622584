//! What each attempt keeps to, on the real servers: a blocker is named whichever statement
//! of a step waits (not only one that waits from the start), the migration lock is confirmed
//! before every attempt after the first, a file that manages its own transaction is never
//! retried but still names its blocker, and MySQL's whole seconds are said wherever the
//! timeout is shown.

use std::time::Duration;

use super::blockers::first_warning;
use super::{columns, ndjson, preview, retries, users, Blocker};
use crate::support::servers::{Server, TestDb};
use crate::support::{dirthara, text, wait_with_watchdog, Migrations};

/// The step's first statement runs for longer than the observer's first look; its second
/// then waits for `users`. The blocker is still named: the observer keeps asking while the
/// step runs, not once.
async fn a_blocker_is_named_when_a_later_statement_waits(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    // MySQL bounds the wait in whole seconds: its timeout is 1 s, PostgreSQL's 400 ms; each
    // step's first statement outlasts the first look (0.7 of the timeout) by far.
    let (slow, timeout) = match server {
        Server::Postgres => ("SELECT pg_sleep(0.9);", "400ms"),
        _ => ("SELECT SLEEP(1.6);", "1s"),
    };
    m.add(
        1,
        "add_c",
        &format!("{slow}\nALTER TABLE users ADD COLUMN c INT;"),
        None,
    );
    let blocker = Blocker::hold(&db).await;
    let session = blocker.session;
    let (child, warning, rest) = first_warning(dirthara(
        &db.url,
        m.path(),
        &["migrate", "--table-lock-timeout", timeout],
    ));
    blocker.end().await;
    let out = wait_with_watchdog(child, Duration::from_secs(60));
    let stderr = rest.join().unwrap();
    assert!(out.status.success(), "{stderr}");
    // The table too: MariaDB's is the one the waiting statement names.
    // MariaDB without metadata-lock instrumentation can only guess, and says so; Oracle
    // MySQL's performance_schema names the holder exactly.
    let guessed = db.is_mariadb().await;
    let named = match guessed {
        false => format!("`users` is locked by session {session} ("),
        true => format!(
            "`users` is locked by another session; a guess, not certain: perhaps session \
             {session} ("
        ),
    };
    assert!(warning.contains(&named), "`{named}` missing: {warning}");
    assert_eq!(columns(&db).await, ["c", "id"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_blocker_is_named_when_a_later_statement_waits() {
    a_blocker_is_named_when_a_later_statement_waits(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_a_blocker_is_named_when_a_later_statement_waits() {
    a_blocker_is_named_when_a_later_statement_waits(Server::Mysql).await;
}

/// While the step pauses after giving way, another operator forces the lock open: the next
/// attempt is not made, the run stops with LOCK_LEASE_LOST, and nothing is applied or left
/// recorded. With the lease (its row deleted, the runner's sessions untouched) and with the
/// session lock (the runner's session ended).
#[tokio::test(flavor = "multi_thread")]
async fn postgres_the_migration_lock_is_confirmed_before_every_attempt() {
    for locking in ["lease", "session"] {
        let Some(db) = TestDb::create(Server::Postgres).await else {
            return;
        };
        users(&db).await;
        let m = Migrations::new();
        m.add(1, "add_c", "ALTER TABLE users ADD COLUMN c INT;", None);
        let blocker = Blocker::hold(&db).await;
        let args = [
            "migrate",
            "--locking",
            locking,
            "--table-lock-timeout",
            "300ms",
        ];
        // The first pause is six timeouts (1.8 s): the lock is forced open during it.
        let (child, _, rest) = first_warning(dirthara(&db.url, m.path(), &args));
        let forced = dirthara(
            &db.url,
            m.path(),
            &["unlock", "--force", "--locking", locking],
        )
        .output()
        .unwrap();
        assert!(forced.status.success(), "{locking}: {:?}", text(&forced));
        let out = wait_with_watchdog(child, Duration::from_secs(60));
        let stderr = rest.join().unwrap();
        blocker.end().await;
        assert_eq!(out.status.code(), Some(1), "{locking}: {stderr}");
        assert!(
            stderr.contains("LOCK_LEASE_LOST"),
            "{locking}: the lost lock is named: {stderr}"
        );
        assert_eq!(
            stderr.matches("warning [TABLE_LOCK_TIMEOUT]").count(),
            1,
            "{locking}: no attempt after the lock was lost: {stderr}"
        );
        assert_eq!(columns(&db).await, ["id"], "{locking}");
        assert_eq!(db.history().await, vec![], "{locking}");
    }
}

/// A file with its own `BEGIN`/`COMMIT` is never tried again (what it committed is its
/// own business): it fails at its first timeout, and its error names the blocker.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_file_that_manages_its_own_transaction_is_never_retried_but_names_its_blocker() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(
        1,
        "own",
        "BEGIN;\nALTER TABLE users ADD COLUMN c INT;\nCOMMIT;\n",
        None,
    );
    let doc = preview(&db, m.path(), &[]);
    assert_eq!(
        doc["steps"][0]["retried"], "never: it manages its own transaction",
        "{doc}"
    );
    let blocker = Blocker::hold(&db).await;
    let session = blocker.session;
    let holder = blocker.end_after(Duration::from_secs(3));
    let out = dirthara(
        &db.url,
        m.path(),
        &[
            "migrate",
            "--table-lock-timeout",
            "300ms",
            "--output",
            "ndjson",
        ],
    )
    .output()
    .unwrap();
    holder.await.unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        retries(&ndjson(&stdout)).is_empty(),
        "never retried: {stdout}"
    );
    assert!(stderr.contains("MIGRATION_FAILED"), "{stderr}");
    assert!(
        stderr.contains(&format!("session {session}")) && stderr.contains("report-job"),
        "the blocker is named: {stderr}"
    );
    assert_eq!(columns(&db).await, ["id"]);
}

/// MySQL's `lock_wait_timeout` counts whole seconds: 1,500 ms waits 2 s there. `preview`
/// and the retry warning say the timeout as MySQL applies it, and what was asked for; and
/// why a step is never retried. PostgreSQL keeps the milliseconds.
#[tokio::test(flavor = "multi_thread")]
async fn mariadb_preview_and_the_warning_say_the_timeout_as_applied_and_why_never() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(1, "add_c", "ALTER TABLE users ADD COLUMN c INT;", None);
    m.add(
        2,
        "own",
        "START TRANSACTION;\nINSERT INTO users (id) VALUES (1);\nCOMMIT;\n",
        None,
    );
    let args = ["preview", "migrate", "--table-lock-timeout", "1500ms"];
    let doc = preview(&db, m.path(), &args[2..]);
    let step = &doc["steps"][0];
    assert_eq!(step["table_lock_timeout_ms"], 2000, "{doc}");
    assert_eq!(step["table_lock_timeout_rounded_from_ms"], 1500, "{doc}");
    assert!(
        step["retried"]
            .as_str()
            .unwrap()
            .starts_with("from the statement that gave way"),
        "{doc}"
    );
    assert_eq!(
        doc["steps"][1]["retried"], "never: it manages its own transaction",
        "{doc}"
    );
    let human = dirthara(&db.url, m.path(), &args).output().unwrap();
    let (stdout, _) = text(&human);
    assert!(
        stdout.contains("gives way after waiting 2 s (the 1.50 s asked for, rounded up"),
        "{stdout}"
    );

    let blocker = Blocker::hold(&db).await;
    let (child, warning, rest) = first_warning(dirthara(
        &db.url,
        m.path(),
        &["migrate", "--table-lock-timeout", "1500ms"],
    ));
    blocker.end().await;
    let out = wait_with_watchdog(child, Duration::from_secs(60));
    let stderr = rest.join().unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(
        warning.contains("after waiting 2 s (the 1.50 s asked for, rounded up"),
        "{warning}"
    );
}

/// The migration holds `a` and waits for `b`, which the application read in a transaction
/// that now waits for `a`: PostgreSQL breaks the deadlock by undoing the migration (its
/// `deadlock_timeout` runs out first: the application's is long), before its share of the
/// timeout (500 ms of 1 s, for two tables) would. The step was rolled back whole, so it is
/// retried like a lock timeout, and applied once.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_deadlock_victim_is_retried_and_applied_once() {
    use sqlx::{Connection, Executor, Row};
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    // The migration's sessions find the deadlock after 100 ms; the application's never do.
    db.execute(
        "CREATE TABLE a (id int); CREATE TABLE b (id int); DO $$ BEGIN EXECUTE \
         format('ALTER DATABASE %I SET deadlock_timeout = ''100ms''', current_database()); END $$",
    )
    .await;
    let m = Migrations::new();
    m.add(
        1,
        "both",
        "ALTER TABLE a ADD COLUMN c int;\nSELECT pg_sleep(0.3);\nALTER TABLE b ADD COLUMN c int;",
        None,
    );
    let mut app = sqlx::PgConnection::connect(&db.url).await.unwrap();
    app.execute("SET deadlock_timeout = '30s'; BEGIN; SELECT count(*) FROM b")
        .await
        .unwrap();
    let mut run = dirthara(
        &db.url,
        m.path(),
        &[
            "migrate",
            "--table-lock-timeout",
            "1s",
            "--output",
            "ndjson",
        ],
    );
    let run = tokio::task::spawn_blocking(move || run.output().unwrap());
    // Once the migration holds `a`, the application reads it: each waits for the other.
    let mut watcher = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let held = "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation \
                WHERE c.relname = 'a' AND l.mode = 'AccessExclusiveLock' AND l.granted";
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while watcher.fetch_one(held).await.unwrap().get::<i64, _>(0) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the migration never held `a`"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    app.execute("SELECT count(*) FROM a").await.unwrap();
    app.execute("COMMIT").await.unwrap();
    let out = run.await.unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let events = ndjson(&stdout);
    let retried: Vec<_> = (events.iter())
        .filter(|e| e["event"] == "table_lock_timeout")
        .collect();
    assert_eq!(retried.len(), 1, "{stdout}");
    assert_eq!(retried[0]["deadlock"], true, "{stdout}");
    // The report says it too (`--output json` is the same document as ndjson's result).
    let result = events.iter().find(|e| e["event"] == "result").unwrap();
    let warning = &result["warnings"][0];
    assert_eq!(warning["code"], "TABLE_LOCK_TIMEOUT", "{stdout}");
    assert!(
        (warning["message"].as_str().unwrap())
            .contains("was undone by the database to break a deadlock with the application"),
        "{stdout}"
    );
    assert_eq!(db.history().await.len(), 1);
    let columns = db
        .strings(
            "SELECT table_name || '.' || column_name FROM information_schema.columns \
             WHERE column_name = 'c' ORDER BY 1",
        )
        .await;
    assert_eq!(columns, ["a.c", "b.c"]);
}
