//! Who is named as holding the lock a step gave way to, in the human `warning
//! [TABLE_LOCK_TIMEOUT]` line and in the ndjson event: the blocking test connection itself
//! (its `pg_backend_pid()` / `CONNECTION_ID()`), and the table.
//!
//! MariaDB keeps no record of who holds a metadata lock unless `performance_schema` or the
//! `metadata_lock_info` plugin is on; the shared test server has neither (and is never
//! reconfigured), so there the blocker is the likely one, and says so. A private MariaDB
//! of the test's own loads the plugin: there the holder is exact, even with an older
//! transaction open on another table — the one the likely guess would have named.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use sqlx::{Connection, Executor};

use super::{ndjson, retries, users, Blocker};
use crate::support::private_server::PrivateServer;
use crate::support::servers::{Server, TestDb};
use crate::support::{dirthara, wait_with_watchdog, Migrations};

/// Starts `cmd` and returns its first `warning [TABLE_LOCK_TIMEOUT]` line; the rest of its
/// stderr is collected by the returned thread.
pub(crate) fn first_warning(mut cmd: Command) -> (Child, String, std::thread::JoinHandle<String>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (send, warnings) = mpsc::channel();
    let rest = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("warning [TABLE_LOCK_TIMEOUT]") {
                let _ = send.send(line.clone());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let line = warnings
        .recv_timeout(Duration::from_secs(30))
        .expect("a TABLE_LOCK_TIMEOUT warning");
    (child, line, rest)
}

/// The human warning names the table and the blocking session, which is the test's own.
async fn the_warning_names_the_blocker(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(1, "add_c", "ALTER TABLE users ADD COLUMN c INT;", None);
    let blocker = Blocker::hold(&db).await;
    let session = blocker.session;
    let (child, warning, rest) = first_warning(dirthara(
        &db.url,
        m.path(),
        &["migrate", "--table-lock-timeout", "300ms"],
    ));
    blocker.end().await;
    let out = wait_with_watchdog(child, Duration::from_secs(60));
    let stderr = rest.join().unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(
        warning.starts_with("warning [TABLE_LOCK_TIMEOUT]: migration 1 (add_c) up, attempt 1"),
        "{warning}"
    );
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
    // Then the blocker ended, during the pause.
    let freed = match guessed {
        false => format!(
            "migration 1 (add_c) up: session {session}, which held the lock, is done; trying \
             again now"
        ),
        true => format!(
            "migration 1 (add_c) up: session {session}, which probably held the lock, is done; \
             trying again now"
        ),
    };
    assert!(stderr.contains(&freed), "`{freed}` missing: {stderr}");
    match server {
        Server::Postgres => {
            assert!(
                warning.contains("(`report-job`, from 127.0.0.1, idle in transaction"),
                "{warning}"
            );
            assert!(warning.contains("SELECT count(*) FROM users`"), "{warning}");
        }
        // Exact: nothing to make certain.
        _ if !guessed => {
            assert!(warning.contains("Sleep for"), "{warning}");
            assert!(!warning.contains("a guess"), "{warning}");
        }
        _ => {
            assert!(warning.contains("Sleep for"), "{warning}");
            // A guess names what would make it certain, and never says to end the session.
            assert!(
                warning.contains("`INSTALL SONAME 'metadata_lock_info'` (no restart)")
                    && warning.contains("`performance_schema = ON`"),
                "{warning}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_the_warning_names_the_blocker() {
    the_warning_names_the_blocker(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_the_warning_names_the_blocker() {
    the_warning_names_the_blocker(Server::Mysql).await;
}

/// A private MariaDB with the `metadata_lock_info` plugin: an older transaction holds
/// `orders`, the blocker holds `users`; the holder of `users` is named, exactly.
#[tokio::test(flavor = "multi_thread")]
async fn mariadb_with_metadata_lock_info_names_the_exact_holder() {
    let Some(private) = PrivateServer::start_or_skip(Server::Mysql) else {
        return;
    };
    let mut admin = sqlx::MySqlConnection::connect(&private.admin_url())
        .await
        .unwrap();
    admin
        .execute("INSTALL SONAME 'metadata_lock_info'")
        .await
        .unwrap_or_else(|e| panic!("the plugin cannot be loaded: {e}\n{}", private.log()));
    let db = TestDb::try_create_at(Server::Mysql, &private.admin_url())
        .await
        .unwrap();
    users(&db).await;
    db.execute("CREATE TABLE orders (id INT PRIMARY KEY)").await;
    let older = Blocker::hold_at(Server::Mysql, &db.url, "orders").await;
    // A second later: MySQL counts transaction starts in whole seconds.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let blocker = Blocker::hold(&db).await;
    let session = blocker.session;
    let holder = blocker.end_after(Duration::from_secs(3));
    let m = Migrations::new();
    m.add(1, "add_c", "ALTER TABLE users ADD COLUMN c INT;", None);
    let out = dirthara(
        &db.url,
        m.path(),
        &[
            "migrate",
            "--table-lock-timeout",
            "1s",
            "--output",
            "ndjson",
        ],
    )
    .output()
    .unwrap();
    holder.await.unwrap();
    older.end().await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let events = ndjson(&stdout);
    let retry = retries(&events)[0];
    assert_eq!(retry["table"], "users", "{retry}");
    assert_eq!(retry["blocker"]["session_id"], session, "{retry}");
    assert!(retry["blocker"].get("likely").is_none(), "exact: {retry}");
    drop(db);
}
