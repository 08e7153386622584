//! MySQL / MariaDB: `GET_LOCK` on the history connection. A waiter blocks inside
//! `GET_LOCK(name, timeout)` for a short while at a time, so the server hands the lock over
//! the moment it is released. (PostgreSQL must not wait inside its lock function — a waiting
//! `pg_advisory_lock` holds a snapshot that a holder's `CREATE INDEX CONCURRENTLY` waits for —
//! but `GET_LOCK` takes no snapshot.) DDL commits implicitly here, so every step is bracketed
//! by a `running` record and its completion.
//!
//! Lock statements are plain text with literals, never prepared statements with binds, so they
//! pass through proxies that do not keep prepared statements.
//!
//! A limit worth knowing: the server notices a vanished client only when the running
//! statement ends, so a runner killed inside a long statement keeps the lock until then.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{ConnectOptions, Connection, Executor, Row};

use super::sql::{Sibling, SqlBackend, SqlDialect, SqlDriver};
use super::{
    connect_failure, database_message, servers, Backend, Capabilities, ConnectFailure,
    ConnectRequest,
};
use crate::backend::sql::SqlSyntax;
use crate::error::{DatabaseError, Error, ErrorKind, Result};
use crate::events::{Blocker, LockHolder};
use crate::lock::{LockSupport, SessionLock, LOCK_NAME};
use crate::migration::hex;
use crate::source::sql;

mod blocker;
mod waited_table;

/// MySQL limits user-lock names to 64 characters.
const MAX_LOCK_NAME: usize = 64;

pub(crate) struct MySqlDriver {
    conn: MySqlConnection,
    options: MySqlConnectOptions,
    connection: String,
    database: String,
    /// The lock's name as a SQL literal, from the database and history table.
    key_literal: String,
    init_sql: Option<String>,
    /// The server's id for this connection (`CONNECTION_ID()`), to end it from another one.
    id: i64,
    /// A blocking `GET_LOCK` is in flight, or was abandoned in flight (the caller gave up
    /// waiting: Ctrl-C). Its answer may still come, and may be "granted".
    waiting: bool,
    /// A wait (`wait_for_release`) took the lock; the next `try_lock` reports it instead of
    /// asking again (a second `GET_LOCK` would nest: one release would not free it).
    granted: bool,
    /// What the server offers for locking, from what it says it is (`VERSION()`,
    /// `@@version_comment`): TiDB and Vitess speak MySQL's protocol, with other named locks.
    lock_support: LockSupport,
    /// `lock_wait_timeout` as the session opened with it (after `init_sql`), in seconds, and
    /// as a step last set it ([`UNKNOWN`] once a step may have set its own): a step without
    /// a table-lock timeout gets the first one back.
    lock_wait_timeout: (i64, i64),
    /// Whether MariaDB's `METADATA_LOCK_INFO` plugin is loaded, which says who holds each
    /// metadata lock (asked the first time a blocker is looked for).
    metadata_lock_info: Option<bool>,
    /// `VERSION()`, read at connect.
    version: String,
}

/// `lock_wait_timeout` as a step left it: not known, so the next step sets it.
const UNKNOWN: i64 = i64::MIN;

pub(crate) async fn connect(request: &ConnectRequest) -> Result<Box<dyn Backend>, ConnectFailure> {
    let url = match request.url.strip_prefix("mariadb:") {
        Some(rest) => format!("mysql:{rest}"),
        None => request.url.clone(),
    };
    let options = MySqlConnectOptions::from_str(&url)
        .map_err(|e| ConnectFailure::driver(format!("invalid MySQL URL: {e}"), e, false))?
        .disable_statement_logging();
    let mut conn = options.connect().await.map_err(connect_failure)?;
    if let Some(init_sql) = &request.init_sql {
        super::run_init_sql(conn.execute(init_sql.as_str()).await.map(|_| ()), init_sql)?;
    }
    // Resolved once, after `init_sql`: dirthara's own statements name their tables in this
    // database, whatever `USE` a migration runs.
    let row = conn
        .fetch_one(
            "SELECT CAST(DATABASE() AS CHAR), CAST(CONNECTION_ID() AS SIGNED), \
             CAST(VERSION() AS CHAR), CAST(@@version_comment AS CHAR), \
             CAST(@@SESSION.lock_wait_timeout AS SIGNED)",
        )
        .await
        .map_err(connect_failure)?;
    let database: Option<String> = row.try_get(0).map_err(connect_failure)?;
    let id: i64 = row.try_get(1).map_err(connect_failure)?;
    let version = text_column(&row, 2).ok().flatten().unwrap_or_default();
    let comment = text_column(&row, 3).ok().flatten().unwrap_or_default();
    let lock_wait_timeout: i64 = row.try_get(4).map_err(connect_failure)?;
    // Oracle MySQL 8+ answers information_schema.TABLES's sizes from a cache kept a day by
    // default, so a table that grew since it was last read would look small to the lint and
    // the blocking-DDL check. MariaDB has no such cache (nor the variable); a MySQL-protocol
    // server refusing the variable has no such cache either, so a refusal is ignored.
    if !version.to_ascii_lowercase().contains("mariadb") {
        let _ = conn
            .execute("SET SESSION information_schema_stats_expiry = 0")
            .await;
    }
    let Some(database) = database else {
        return Err(ConnectFailure::refused(
            "the URL names no database; add it as the path, e.g. mysql://user@host/app",
        ));
    };
    let driver = MySqlDriver {
        conn,
        options,
        connection: request.name.clone(),
        key_literal: SqlDialect::MySql.literal(&lock_key(&database, &request.history_table)),
        database,
        init_sql: request.init_sql.clone(),
        id,
        waiting: false,
        granted: false,
        lock_support: servers::mysql_lock_support(&version, &comment),
        lock_wait_timeout: (lock_wait_timeout, lock_wait_timeout),
        metadata_lock_info: None,
        version,
    };
    Ok(Box::new(SqlBackend::new(driver, request)))
}

/// Named locks are server-wide, so the key carries the database and history table:
/// unrelated databases on one server do not wait on each other.
fn lock_key(database: &str, table: &str) -> String {
    // Planted fault (tests only): a name of this connection's own (random), which excludes
    // nobody, not even another runner in the same process.
    dirthara_core::fail_point!("lock_key_per_process", |_| format!(
        "{LOCK_NAME}:{}",
        fastrand::u32(..)
    ));
    let readable = format!("{LOCK_NAME}:{database}.{table}");
    if readable.len() <= MAX_LOCK_NAME {
        return readable;
    }
    let digest = Sha256::digest(format!("{database}\0{table}").as_bytes());
    format!("{LOCK_NAME}:{}", &hex(&digest)[..40])
}

impl MySqlDriver {
    fn lock_error(&self, error: sqlx::Error) -> Error {
        Error::new(ErrorKind::LockFailed {
            lock: LOCK_NAME.to_string(),
            connection: self.connection.clone(),
            reason: database_message(&error),
        })
        .caused_by(error)
    }

    /// The one value of a plain-text `SELECT` (NULL as `None`).
    async fn lock_scalar(&mut self, sql: &str) -> Result<Option<i64>> {
        let row = self
            .conn
            .fetch_one(sql)
            .await
            .map_err(|e| self.lock_error(e))?;
        row.try_get::<Option<i64>, _>(0)
            .map_err(|e| self.lock_error(e))
    }

    async fn holder_id(&mut self) -> Result<Option<i64>> {
        let sql = format!("SELECT CAST(IS_USED_LOCK({}) AS SIGNED)", self.key_literal);
        self.lock_scalar(&sql).await
    }
}

/// A text column; MariaDB reports some computed text (e.g. CONCAT over casts) as VARBINARY.
fn text_column(row: &sqlx::mysql::MySqlRow, index: usize) -> Result<Option<String>, sqlx::Error> {
    match row.try_get::<Option<String>, _>(index) {
        Ok(value) => Ok(value),
        Err(_) => Ok(row
            .try_get::<Option<Vec<u8>>, _>(index)?
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())),
    }
}

/// How long a session has been in its state, as the process list's `TIME` says it: in whole
/// seconds, so a 0 is anything under one.
pub(super) fn server_seconds(seconds: u64) -> String {
    match seconds {
        0 => "under 1 s".to_string(),
        seconds => crate::format_duration(Duration::from_secs(seconds)),
    }
}

#[async_trait]
impl SqlDriver for MySqlDriver {
    type Error = sqlx::Error;

    fn server_version(&self) -> Option<&str> {
        Some(&self.version)
    }

    fn dialect(&self) -> SqlDialect {
        SqlDialect::MySql
    }

    async fn execute_count(&mut self, sql: &str) -> Result<u64, sqlx::Error> {
        self.conn.execute(sql).await.map(|r| r.rows_affected())
    }

    fn open_sibling(&self) -> Sibling<sqlx::Error> {
        let options = self.options.clone();
        let connection = self.connection.clone();
        let database = self.database.clone();
        let key_literal = self.key_literal.clone();
        let init_sql = self.init_sql.clone();
        let lock_support = self.lock_support;
        let lock_wait_timeout = self.lock_wait_timeout.0;
        let version = self.version.clone();
        Box::pin(async move {
            let mut conn = options.connect().await?;
            if let Some(init_sql) = &init_sql {
                conn.execute(init_sql.as_str()).await?;
            }
            // Explicitly in the history's database, even if `init_sql` switched to another.
            conn.execute(format!("USE {}", SqlDialect::MySql.ident(&database)).as_str())
                .await?;
            let id: i64 = conn
                .fetch_one("SELECT CAST(CONNECTION_ID() AS SIGNED)")
                .await?
                .try_get(0)?;
            Ok(Box::new(MySqlDriver {
                conn,
                options,
                connection,
                database,
                key_literal,
                init_sql,
                id,
                waiting: false,
                granted: false,
                lock_support,
                lock_wait_timeout: (lock_wait_timeout, UNKNOWN),
                metadata_lock_info: None,
                version,
            }) as Box<dyn SqlDriver<Error = sqlx::Error>>)
        })
    }

    fn schema(&self) -> Option<&str> {
        Some(&self.database)
    }

    async fn fetch_text(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, sqlx::Error> {
        let rows = self.conn.fetch_all(sql).await?;
        rows.iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| row.try_get::<Option<String>, _>(i))
                    .collect()
            })
            .collect()
    }

    fn capabilities(&self) -> Capabilities {
        super::BackendKind::Mysql.capabilities()
    }

    fn lock_support(&self) -> LockSupport {
        self.lock_support
    }

    fn session_lock(&mut self) -> Option<&mut dyn SessionLock> {
        self.lock_support
            .has_session_lock()
            .then_some(self as &mut dyn SessionLock)
    }

    /// `lock_wait_timeout` counts whole seconds: a timeout is rounded up (at least 1 s). Zero
    /// (an attempt that may not wait) is MariaDB's `NOWAIT` (MySQL takes it as 1 s). It has
    /// no transaction scope, so a step without a timeout gets the session's own back.
    fn lock_timeout_sql(&mut self, timeout: Option<Duration>, _local: bool) -> Option<String> {
        let (opened_with, now) = self.lock_wait_timeout;
        let wanted = match timeout {
            Some(timeout) if timeout.is_zero() => 0,
            Some(timeout) => {
                let seconds = timeout.as_nanos().div_ceil(1_000_000_000).max(1);
                i64::try_from(seconds).unwrap_or(i64::MAX)
            }
            None => opened_with,
        };
        if wanted == now {
            return None;
        }
        self.lock_wait_timeout.1 = wanted;
        Some(format!("SET SESSION lock_wait_timeout = {wanted}"))
    }

    /// A step may set `lock_wait_timeout` itself (its value wins for that step alone), so the
    /// next one sets the session's again, whatever the last one left.
    async fn before_step(&mut self) -> Result<(), sqlx::Error> {
        self.lock_wait_timeout.1 = UNKNOWN;
        Ok(())
    }

    fn lock_timeout_setting(&self) -> Option<&'static str> {
        Some("lock_wait_timeout")
    }

    fn lock_held_condition(&self) -> Option<String> {
        // Planted fault (tests only): the marker's check answers "still held" blindly.
        if dirthara_core::planted!("lock_confirmed_blindly") {
            return Some("1 = 1".to_string());
        }
        Some(format!(
            "IS_USED_LOCK({}) = CONNECTION_ID()",
            self.key_literal
        ))
    }

    fn session_identity(&self) -> String {
        self.id.to_string()
    }

    async fn who_blocks(&mut self, identity: &str) -> Option<(Option<String>, Blocker)> {
        let waiting: i64 = identity.parse().ok()?;
        blocker::who_blocks(&mut self.conn, waiting, &mut self.metadata_lock_info).await
    }

    async fn blocker_gone(&mut self, blocker: &Blocker) -> Option<bool> {
        blocker::gone(&mut self.conn, blocker).await
    }

    /// MySQL says where a syntax error is as `... at line N` of the statement that failed;
    /// that line is known in the file when `statement` is one statement.
    fn locate(&self, error: &mut DatabaseError, statement: &str, first_line: usize) {
        if error.line.is_some() {
            return;
        }
        let Some(line) = error
            .message
            .rsplit_once(" at line ")
            .and_then(|(_, n)| n.trim().parse::<usize>().ok())
        else {
            return;
        };
        // Lines count from the start of the text sent, comments included.
        if sql::split_statements(statement, sql::SqlDialect::MySql).len() == 1 {
            error.line = Some((first_line + line).saturating_sub(1));
        }
    }

    fn connection(&mut self) -> crate::rust_migration::Connection<'_> {
        crate::rust_migration::Connection::MySql(&mut self.conn)
    }

    async fn close(self: Box<Self>) {
        if self.waiting {
            // A blocking `GET_LOCK` was abandoned (the runner was interrupted while waiting).
            // The server would still grant it when the holder lets go, and keep it until it
            // noticed this client gone: end the session from another connection at once, so
            // no lock is taken behind the caller's back (ending a session releases its locks).
            if let Ok(mut other) = self.options.connect().await {
                let _ = other.execute(format!("KILL {}", self.id).as_str()).await;
                let _ = other.close().await;
            }
            return;
        }
        let _ = self.conn.close().await;
    }
}

#[async_trait]
impl SessionLock for MySqlDriver {
    async fn try_lock(&mut self) -> Result<bool> {
        if std::mem::take(&mut self.granted) {
            return Ok(true);
        }
        // Timeout 0: the attempt itself never blocks; `wait_for_release` does the waiting.
        let sql = format!("SELECT CAST(GET_LOCK({}, 0) AS SIGNED)", self.key_literal);
        Ok(self.lock_scalar(&sql).await? == Some(1))
    }

    /// The marker before each step reads and carries `IS_USED_LOCK(..) = CONNECTION_ID()`
    /// ([`SqlDriver::lock_held_condition`]): a migration costs no round trip for the check.
    fn verifies_in_marker(&self) -> bool {
        true
    }

    async fn holds_lock(&mut self) -> Result<bool> {
        let sql = format!(
            "SELECT CAST(IS_USED_LOCK({}) = CONNECTION_ID() AS SIGNED)",
            self.key_literal
        );
        Ok(self.lock_scalar(&sql).await? == Some(1))
    }

    async fn unlock(&mut self) -> Result<()> {
        let sql = format!("SELECT RELEASE_LOCK({})", self.key_literal);
        self.lock_scalar(&sql).await.map(|_| ())
    }

    /// Blocks in `GET_LOCK` for at most `max`: the server wakes us the moment the holder
    /// releases. A granted lock is kept for the next `try_lock` to report. The wait is on
    /// this (the lock) session, so nothing else of ours is held up by it.
    async fn wait_for_release(&mut self, max: Duration) -> Result<()> {
        let sql = format!(
            "SELECT CAST(GET_LOCK({}, {:.3}) AS SIGNED)",
            self.key_literal,
            max.as_secs_f64()
        );
        // If this future is dropped mid-wait (Ctrl-C), `waiting` stays set and `close` ends
        // the session rather than let the server grant the lock to it later.
        self.waiting = true;
        let got = self.lock_scalar(&sql).await;
        self.waiting = false;
        self.granted = got? == Some(1);
        Ok(())
    }

    async fn holder(&mut self) -> Result<Option<LockHolder>> {
        let Some(id) = self.holder_id().await? else {
            return Ok(None);
        };
        let sql = format!(
            "SELECT CAST(HOST AS CHAR), CAST(TIME AS SIGNED), CAST(INFO AS CHAR) \
             FROM information_schema.PROCESSLIST WHERE ID = {id}"
        );
        let row = self
            .conn
            .fetch_optional(sql.as_str())
            .await
            .map_err(|e| self.lock_error(e))?;
        let mut holder = LockHolder::default();
        holder.session_id = Some(id);
        if let Some(row) = row {
            holder.client_address = text_column(&row, 0).ok().flatten();
            let seconds: Option<i64> = row.try_get(1).ok().flatten();
            let info = text_column(&row, 2).ok().flatten();
            // MySQL has no session name others can read (sqlx cannot send connection
            // attributes), so the holder is named by connection id, address and activity.
            let time = server_seconds(seconds.and_then(|s| u64::try_from(s).ok()).unwrap_or(0));
            holder.activity = Some(match info {
                Some(statement) => {
                    let mut statement = statement.split_whitespace().collect::<Vec<_>>().join(" ");
                    dirthara_core::text::truncate_at_char_boundary(&mut statement, 48);
                    format!("busy with `{statement}` for {time}")
                }
                None => format!("idle for {time}"),
            });
        }
        Ok(Some(holder))
    }

    async fn force_unlock(&mut self) -> Result<Vec<String>> {
        let Some(holder) = self.holder().await? else {
            return Ok(Vec::new());
        };
        let id = holder.session_id.unwrap_or_default();
        self.conn
            .execute(format!("KILL CONNECTION {id}").as_str())
            .await
            .map_err(|e| self.lock_error(e))?;
        Ok(vec![format!(
            "terminated connection {id} from {}",
            holder
                .client_address
                .as_deref()
                .unwrap_or("an unknown host")
        )])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_process_lists_whole_seconds_are_said_as_every_duration_is() {
        assert_eq!(super::server_seconds(0), "under 1 s");
        assert_eq!(super::server_seconds(3), "3 s");
        assert_eq!(super::server_seconds(125), "2 min 5 s");
    }
}
