//! What the table-lock tests share: a blocker (a transaction that read `users` and stays
//! open, as a report query or a session left idle in transaction does), and ways to see
//! what a run did about it. The tests, by what they prove:
//!
//! - [`settings`]: each form of the timeout (file, environment, flag, directive) and `off`
//!   takes effect in a real run, and so does each form of the retry budget;
//! - [`blockers`]: who is named as holding the lock, in human output and ndjson (MariaDB
//!   without metadata-lock instrumentation, and with its `metadata_lock_info` plugin);
//! - [`traps`]: where hand-written retry wrappers went wrong — a migration's own timeout,
//!   `RESET ALL`, the migration lock's wait, steps that are never retried;
//! - [`pooler`]: through PgBouncer in transaction pooling, with `--locking lease`;
//! - [`early`]: a pause cut short once the blocker is done;
//! - [`attempts`]: what each attempt keeps to — a later statement's blocker named, the lock
//!   confirmed before every attempt, a file with its own transaction never retried, MySQL's
//!   whole seconds said.
#![allow(dead_code)]

pub(crate) mod attempts;
pub(crate) mod blockers;
pub(crate) mod early;
pub(crate) mod pooler;
pub(crate) mod settings;
pub(crate) mod step_budget;
pub(crate) mod traps;

use std::time::{Duration, Instant};

use sqlx::{Connection, Executor, Row};

use crate::support::servers::{Server, TestDb};

/// A transaction that read a table and stays open until [`Blocker::end`]. On PostgreSQL it
/// names itself `report-job`.
pub(crate) struct Blocker {
    /// Its session: PostgreSQL `pg_backend_pid()`, MySQL `CONNECTION_ID()`.
    pub session: i64,
    end: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl Blocker {
    /// Holds `users` of `db`.
    pub(crate) async fn hold(db: &TestDb) -> Blocker {
        Blocker::hold_at(db.server, &db.url, "users").await
    }

    /// Connects to `url` and holds `table` (which may be qualified).
    pub(crate) async fn hold_at(server: Server, url: &str, table: &str) -> Blocker {
        let read = format!("SELECT count(*) FROM {table}");
        let (ready, started) = tokio::sync::oneshot::channel();
        let (end, ended) = tokio::sync::oneshot::channel::<()>();
        let task = match server {
            Server::Postgres => {
                let url = with_param(url, "application_name=report-job");
                tokio::spawn(async move {
                    let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
                    let pid: i32 = (c.fetch_one("SELECT pg_backend_pid()").await.unwrap()).get(0);
                    c.execute(format!("BEGIN; {read}").as_str()).await.unwrap();
                    ready.send(i64::from(pid)).unwrap();
                    let _ = ended.await;
                    c.execute("COMMIT").await.unwrap();
                })
            }
            _ => {
                let url = url.to_string();
                tokio::spawn(async move {
                    let mut c = sqlx::MySqlConnection::connect(&url).await.unwrap();
                    let id: i64 = (c
                        .fetch_one("SELECT CAST(CONNECTION_ID() AS SIGNED)")
                        .await
                        .unwrap())
                    .get(0);
                    c.execute("START TRANSACTION").await.unwrap();
                    c.execute(read.as_str()).await.unwrap();
                    ready.send(id).unwrap();
                    let _ = ended.await;
                    c.execute("COMMIT").await.unwrap();
                })
            }
        };
        let session = started.await.expect("the blocker started");
        Blocker { session, end, task }
    }

    /// Commits, and returns once the transaction has ended.
    pub(crate) async fn end(self) {
        let _ = self.end.send(());
        self.task.await.unwrap();
    }

    /// Commits after `hold`, without waiting for it here.
    pub(crate) fn end_after(self, hold: Duration) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            tokio::time::sleep(hold).await;
            self.end().await;
        })
    }
}

fn with_param(url: &str, param: &str) -> String {
    match url.contains('?') {
        true => format!("{url}&{param}"),
        false => format!("{url}?{param}"),
    }
}

pub(crate) async fn users(db: &TestDb) {
    db.execute("CREATE TABLE users (id INT PRIMARY KEY)").await;
}

/// The columns of `users`, sorted.
pub(crate) async fn columns(db: &TestDb) -> Vec<String> {
    let sql = match db.server {
        Server::Postgres => {
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_name = 'users' ORDER BY 1"
        }
        _ => {
            "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
             WHERE table_schema = DATABASE() AND table_name = 'users' ORDER BY 1"
        }
    };
    db.strings(sql).await
}

/// `preview migrate` of `migrations` on `db` with `extra` flags, as its JSON document.
pub(crate) fn preview(
    db: &TestDb,
    migrations: &std::path::Path,
    extra: &[&str],
) -> serde_json::Value {
    let mut args = vec!["preview", "migrate", "--output", "json"];
    args.extend(extra);
    let out = crate::support::dirthara(&db.url, migrations, &args)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {:?}", crate::support::text(&out)))
}

pub(crate) fn ndjson(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The `table_lock_timeout` events of an ndjson run.
pub(crate) fn retries(events: &[serde_json::Value]) -> Vec<&serde_json::Value> {
    (events.iter())
        .filter(|e| e["event"] == "table_lock_timeout")
        .collect()
}

/// Waits until a statement starting with `statement` has waited for a lock in `db` for at
/// least `long` — and still waits: no timeout shorter than that bounds it. Panics after 30 s.
pub(crate) async fn wait_until_waited(db: &TestDb, statement: &str, long: Duration) {
    let ms = long.as_millis();
    let sql = match db.server {
        Server::Postgres => format!(
            "SELECT count(*)::text FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND datname = current_database() AND pid <> pg_backend_pid() \
             AND position({} in query) > 0 AND now() - query_start >= interval '{ms} ms'",
            literal(statement)
        ),
        // MariaDB's process list has the wait in milliseconds; Oracle MySQL's only in whole
        // seconds, so there the wait is rounded up to the next whole second.
        _ => format!(
            "SELECT CAST(COUNT(*) AS CHAR) FROM information_schema.PROCESSLIST \
             WHERE STATE LIKE 'Waiting for%lock' AND DB = DATABASE() \
             AND INFO LIKE {} AND {}",
            literal(&format!("%{statement}%")),
            match db.is_mariadb().await {
                true => format!("TIME_MS >= {ms}"),
                false => format!("TIME >= {}", ms.div_ceil(1000)),
            }
        ),
    };
    let started = Instant::now();
    while db.strings(&sql).await == ["0"] {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "`{statement}` never waited {long:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
