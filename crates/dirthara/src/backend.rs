//! Backends: *how* to talk to each database. The engine decides *when*.
//!
//! A backend reads and writes the history, runs a step (alone, or atomically with its
//! history change where the database allows), drops everything for `fresh`, and — if the
//! database has one — offers a session lock. The SQL backends share all history logic in
//! `sql`; each driver module only says how to execute text and read rows.

use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::code::RustMigration;
use crate::error::{DatabaseError, Error, ErrorKind, Result};
use crate::events::{Event, EventSink, LockHolder};
use crate::history::{AppliedMigration, HistoryChange};
use crate::lock::lease::LeaseStore;
use crate::migration::Direction;

#[cfg(test)]
pub(crate) mod memory;
#[cfg(feature = "mongodb")]
mod mongo;
#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;

/// The kind of database a URL points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendKind {
    Sqlite,
    Postgres,
    Mysql,
    Mongo,
    /// The in-memory backend of the engine's own tests.
    #[doc(hidden)]
    Memory,
}

impl BackendKind {
    /// The backend a URL's scheme selects.
    pub fn from_url(url: &str) -> Result<Self> {
        let scheme = url
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        match scheme.as_str() {
            "sqlite" => Ok(BackendKind::Sqlite),
            "postgres" | "postgresql" => Ok(BackendKind::Postgres),
            "mysql" | "mariadb" => Ok(BackendKind::Mysql),
            "memory" => Ok(BackendKind::Memory),
            "mongodb" | "mongodb+srv" => Ok(BackendKind::Mongo),
            _ => Err(Error::config(format!(
                "`{}`: unknown database URL scheme; use postgres://, mysql://, mariadb://, \
                 sqlite:, mongodb:// or mongodb+srv://",
                redact_url(url)
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Sqlite => "sqlite",
            BackendKind::Postgres => "postgres",
            BackendKind::Mysql => "mysql",
            BackendKind::Mongo => "mongodb",
            BackendKind::Memory => "memory",
        }
    }

    /// What the database's migrations are written in.
    pub fn step_format(self) -> crate::migration::StepFormat {
        match self {
            BackendKind::Mongo => crate::migration::StepFormat::MongoCommands,
            _ => crate::migration::StepFormat::Sql,
        }
    }

    /// Whether the database has a session lock (`locking = true` uses it).
    pub fn has_session_lock(self) -> bool {
        matches!(
            self,
            BackendKind::Postgres | BackendKind::Mysql | BackendKind::Memory
        )
    }
}

/// A connection to one named database, as the engine uses it.
#[async_trait]
pub trait Backend: Send {
    fn kind(&self) -> BackendKind;

    /// The configured name of this connection (`default`, ...).
    fn connection(&self) -> &str;

    /// The history, or `None` when this database has none yet. Never creates anything, and
    /// refuses a history layout newer than this build understands.
    async fn read_history(&mut self, table: &str) -> Result<Option<Vec<AppliedMigration>>>;

    /// Creates the history (or upgrades an older layout). Called under the lock.
    async fn prepare_history(&mut self, table: &str) -> Result<()>;

    /// Whether a step and its history change can commit in one transaction here.
    fn transactional_ddl(&self) -> bool;

    /// Runs a step, in a transaction of its own if `transactional`. After a failure the
    /// session is clean again (any transaction block the step left open is rolled back), so
    /// the next statement dirthara sends is not refused because of the step.
    async fn run_step(&mut self, text: &str, transactional: bool) -> Result<(), StepFailure>;

    /// Runs a step and a history change so that both commit or neither does.
    async fn run_step_recorded(
        &mut self,
        text: &str,
        table: &str,
        change: &HistoryChange,
    ) -> Result<(), StepFailure>;

    /// Runs a Rust migration's step on this connection, in a transaction of its own if
    /// `transactional`, together with `record` (a history change in `table`) when given.
    async fn run_code(
        &mut self,
        _code: &dyn RustMigration,
        _direction: Direction,
        _transactional: bool,
        _record: Option<(&str, &HistoryChange)>,
    ) -> Result<(), StepFailure> {
        Err(StepFailure::refused(format!(
            "{} connections cannot run Rust migrations",
            self.kind().name()
        )))
    }

    /// Applies a history change on its own.
    async fn record(&mut self, table: &str, change: &HistoryChange) -> Result<()>;

    /// Applies history changes in order, all or none, in one round trip where the database
    /// allows (one commit instead of one per change).
    async fn record_all(&mut self, table: &str, changes: &[HistoryChange]) -> Result<()> {
        for change in changes {
            self.record(table, change).await?;
        }
        Ok(())
    }

    /// Drops every table/view of this database except those named in `keep`; returns what
    /// it dropped. Must not end the session (the lock lives in it).
    async fn drop_all(&mut self, keep: &[String]) -> Result<Vec<String>>;

    /// The database's session lock, if it has one.
    fn session_lock(&mut self) -> Option<&mut dyn SessionLock> {
        None
    }

    /// A lease store for `locking = "lease"`, in `table`, on a connection of its own.
    async fn open_lease_store(&mut self, _table: &str) -> Result<Box<dyn LeaseStore>> {
        Err(Error::config(format!(
            "{} does not support `locking = \"lease\"`",
            self.kind().name()
        )))
    }

    /// Closes the connection (releasing any session state).
    async fn close(self: Box<Self>);
}

/// A step that failed, as the backend saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StepFailure {
    pub error: DatabaseError,
    /// The step was refused before it could change anything (e.g. a MongoDB command answering
    /// `ok: 0` as the first of its migration), so no `running` marker needs to stay behind.
    pub nothing_changed: bool,
}

impl StepFailure {
    /// A failure where the step may have changed something.
    pub fn new(error: DatabaseError) -> Self {
        StepFailure {
            error,
            nothing_changed: false,
        }
    }

    /// Refused before anything ran.
    pub fn refused(message: impl Into<String>) -> Self {
        StepFailure {
            error: DatabaseError::from_message(message),
            nothing_changed: true,
        }
    }
}

/// A named lock held by this connection's session.
///
/// Contract: `try_lock` never blocks on the database (waiting is the engine's job, so a
/// waiter never sits inside a lock statement holding a snapshot); the lock is scoped to
/// this database/schema and the history `table`; it is released by `unlock` or when the
/// session ends.
#[async_trait]
pub trait SessionLock: Send {
    /// Takes the lock if it is free; `Ok(false)` when someone else holds it.
    async fn try_lock(&mut self, table: &str) -> Result<bool>;
    /// Whether this session still holds the lock.
    async fn holds_lock(&mut self, table: &str) -> Result<bool>;
    /// Releases the lock and wakes waiters.
    async fn unlock(&mut self, table: &str) -> Result<()>;
    /// Who holds the lock now (`None`: nobody).
    async fn holder(&mut self, table: &str) -> Result<Option<LockHolder>>;
    /// Returns when the lock may have been released, or after `max` at the latest.
    async fn wait_for_release(&mut self, _table: &str, max: Duration) -> Result<()> {
        tokio::time::sleep(jittered(max.min(Duration::from_millis(100)))).await;
        Ok(())
    }
    /// Ends the holder's session(s); returns a description of each one ended.
    async fn force_unlock(&mut self, table: &str) -> Result<Vec<String>>;

    /// True when a step run atomically with its record (`run_step_recorded`) itself fails,
    /// rolled back, if this session no longer holds the lock — so no separate check is
    /// needed before it. The engine then tells a lost lock from a failed step by asking
    /// [`SessionLock::holds_lock`] after a failure.
    fn verifies_in_step(&self) -> bool {
        false
    }
}

/// A random duration between half and all of `d`, so waiting runners do not retry in step.
pub(crate) fn jittered(d: Duration) -> Duration {
    d.mul_f64(0.5 + fastrand::f64() * 0.5)
}

/// What the engine needs to open a connection.
#[derive(Debug, Clone)]
pub struct ConnectRequest {
    /// The connection's configured name.
    pub name: String,
    pub url: String,
    /// The command, for the session's self-description (`dirthara migrate host:pid`).
    pub operation: String,
    pub connect_timeout: Duration,
    /// The command only reads: it must not create anything (e.g. a missing SQLite file).
    pub read_only: bool,
    /// SQL run on every session opened on this connection, before anything else
    /// (`init_sql`): `SET lock_timeout = '5s'`, `SET ROLE migrator`, ...
    pub init_sql: Option<String>,
}

/// Opens connections. The default one dispatches on the URL scheme.
#[async_trait]
pub trait Connector: Send + Sync {
    async fn connect(
        &self,
        request: &ConnectRequest,
        events: &EventSink,
    ) -> Result<Box<dyn Backend>>;
}

/// A failed connection attempt, and whether it is worth retrying (a server still starting).
pub(crate) struct ConnectFailure {
    pub message: String,
    pub transient: bool,
}

/// Connects by URL scheme, retrying a database that is not reachable yet up to the timeout.
#[derive(Debug, Default, Clone, Copy)]
pub struct UrlConnector;

#[async_trait]
impl Connector for UrlConnector {
    async fn connect(
        &self,
        request: &ConnectRequest,
        events: &EventSink,
    ) -> Result<Box<dyn Backend>> {
        let kind = BackendKind::from_url(&request.url)?;
        let started = Instant::now();
        let mut backoff = Duration::from_millis(100);
        let mut announced = Duration::ZERO;
        loop {
            let failure = match connect_once(kind, request).await {
                Ok(backend) => return Ok(backend),
                Err(failure) => failure,
            };
            let elapsed = started.elapsed();
            if !failure.transient || elapsed >= request.connect_timeout {
                let waited = if failure.transient && !elapsed.is_zero() {
                    format!(
                        " (gave up after {:.1}s; raise --connect-timeout to wait longer)",
                        elapsed.as_secs_f64()
                    )
                } else {
                    String::new()
                };
                return Err(Error::new(ErrorKind::Connection {
                    connection: request.name.clone(),
                    message: format!(
                        "{} at {}{waited}",
                        failure.message,
                        redact_url(&request.url)
                    ),
                }));
            }
            if elapsed >= announced {
                events.emit(Event::ConnectionWaiting {
                    connection: request.name.clone(),
                    target: redact_url(&request.url),
                    reason: failure.message,
                });
                announced = elapsed + Duration::from_secs(5);
            }
            // Sleep, but never past the deadline: the last attempt is made at the deadline.
            let remaining = request.connect_timeout.saturating_sub(started.elapsed());
            tokio::time::sleep(jittered(backoff).min(remaining)).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }
}

#[allow(unused_variables)]
async fn connect_once(
    kind: BackendKind,
    request: &ConnectRequest,
) -> std::result::Result<Box<dyn Backend>, ConnectFailure> {
    let unsupported = |feature: &str| ConnectFailure {
        message: format!("this build of dirthara was compiled without the `{feature}` feature"),
        transient: false,
    };
    match kind {
        #[cfg(feature = "sqlite")]
        BackendKind::Sqlite => sqlite::connect(request).await,
        #[cfg(feature = "postgres")]
        BackendKind::Postgres => postgres::connect(request).await,
        #[cfg(feature = "mysql")]
        BackendKind::Mysql => mysql::connect(request).await,
        #[cfg(feature = "mongodb")]
        BackendKind::Mongo => mongo::connect(request).await,
        #[cfg(not(feature = "mongodb"))]
        BackendKind::Mongo => Err(unsupported("mongodb")),
        #[cfg(not(feature = "sqlite"))]
        BackendKind::Sqlite => Err(unsupported("sqlite")),
        #[cfg(not(feature = "postgres"))]
        BackendKind::Postgres => Err(unsupported("postgres")),
        #[cfg(not(feature = "mysql"))]
        BackendKind::Mysql => Err(unsupported("mysql")),
        BackendKind::Memory => Err(unsupported("memory (tests only)")),
    }
}

/// The outcome of running a connection's `init_sql`: a failure is not worth retrying, and
/// names the statement so the user knows which setting to fix.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) fn run_init_sql(
    outcome: std::result::Result<(), sqlx::Error>,
    init_sql: &str,
) -> std::result::Result<(), ConnectFailure> {
    outcome.map_err(|error| ConnectFailure {
        message: format!(
            "its init_sql `{}` failed: {}",
            init_sql.trim(),
            database_message(&error)
        ),
        transient: false,
    })
}

/// Classifies a sqlx connection error: I/O errors and "server is starting" are worth a retry.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) fn connect_failure(error: sqlx::Error) -> ConnectFailure {
    let transient = match &error {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => true,
        // PostgreSQL 57P03 "the database system is starting up"; MySQL 1040 "too many connections".
        sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("57P03") | Some("08004")),
        _ => false,
    };
    ConnectFailure {
        message: database_message(&error),
        transient,
    }
}

/// The database's own message for an error, with its code when it has one.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) fn database_message(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Database(db) => match db.code() {
            Some(code) => format!("{} (code {code})", db.message()),
            None => db.message().to_string(),
        },
        other => other.to_string(),
    }
}

/// Everything a SQL database said about a failed step. `step` is the step's text and the
/// character offset at which it started in the text sent, so PostgreSQL's error position can
/// be turned into the file's line and column.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "mysql"))]
pub(crate) fn database_error(error: &sqlx::Error, step: Option<(&str, usize)>) -> DatabaseError {
    let sqlx::Error::Database(db) = error else {
        return DatabaseError {
            message: error.to_string(),
            connection_lost: matches!(error, sqlx::Error::Io(_) | sqlx::Error::Protocol(_)),
            ..DatabaseError::default()
        };
    };
    let mut out = DatabaseError {
        message: db.message().to_string(),
        code: db.code().map(|c| c.into_owned()),
        constraint: db.constraint().map(str::to_string),
        table: db.table().map(str::to_string),
        ..DatabaseError::default()
    };
    #[cfg(feature = "postgres")]
    if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        out.detail = pg.detail().map(str::to_string);
        out.hint = pg.hint().map(str::to_string);
        out.context = pg.r#where().map(str::to_string);
        // 57P01 admin_shutdown (server restart, pg_terminate_backend), 57P02 crash_shutdown,
        // and class 08 (connection exception) end the session.
        out.connection_lost = matches!(pg.code(), "57P01" | "57P02") || pg.code().starts_with("08");
        if let (Some(sqlx::postgres::PgErrorPosition::Original(position)), Some((text, start))) =
            (pg.position(), step)
        {
            // 1-based character index into the whole message sent.
            if let Some(index) = position.checked_sub(1 + start) {
                if index <= text.chars().count() {
                    let (line, column) = line_column(text, index);
                    out.line = Some(line);
                    out.column = Some(column);
                }
            }
        }
    }
    #[cfg(feature = "mysql")]
    if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        out.number = Some(i64::from(my.number()));
        // 1053 server shutdown, 1927 connection killed (MariaDB), 2006/2013 gone away / lost.
        out.connection_lost = matches!(my.number(), 1053 | 1927 | 2006 | 2013);
    }
    out
}

/// The 1-based line and column of the `index`-th character (0-based) of `text`.
#[cfg(feature = "postgres")]
fn line_column(text: &str, index: usize) -> (usize, usize) {
    let mut line = 1;
    let mut column = 1;
    for c in text.chars().take(index) {
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

/// A URL with its password replaced, safe to print: the `user:password@` part and any
/// `password=` query parameter.
pub fn redact_url(url: &str) -> String {
    let url = redact_query_password(url);
    let url = url.as_str();
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &authority[..at];
    let redacted = match userinfo.split_once(':') {
        Some((user, _password)) => format!("{user}:***"),
        None => return url.to_string(),
    };
    let mut out = String::with_capacity(url.len());
    out.push_str(&url[..scheme_end + 3]);
    out.push_str(&redacted);
    out.push_str(&rest[at..]);
    out
}

fn redact_query_password(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_string();
    };
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((key, _))
                if key.eq_ignore_ascii_case("password")
                    || key.eq_ignore_ascii_case("sslpassword") =>
            {
                format!("{key}=***")
            }
            _ => param.to_string(),
        })
        .collect();
    format!("{base}?{}", params.join("&"))
}

/// `dirthara <operation> <host>:<pid>`: how our sessions describe themselves to the server.
#[cfg(any(feature = "postgres", feature = "mongodb"))]
pub(crate) fn session_label(operation: &str) -> String {
    let mut label = format!(
        "dirthara {operation} {}:{}",
        crate::hostname(),
        std::process::id()
    );
    // PostgreSQL truncates application_name at 63 bytes.
    label.truncate(63);
    label
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_printed() {
        assert_eq!(
            redact_url("postgres://app:s3cr%40t@db.example:5432/prod?sslmode=require"),
            "postgres://app:***@db.example:5432/prod?sslmode=require"
        );
        assert_eq!(
            redact_url("mysql://root@localhost/x"),
            "mysql://root@localhost/x"
        );
        assert_eq!(redact_url("sqlite:demo.db"), "sqlite:demo.db");
        assert_eq!(
            redact_url("postgres://u:p@h/db?x=a@b"),
            "postgres://u:***@h/db?x=a@b"
        );
    }

    #[test]
    fn url_schemes_select_backends() {
        assert_eq!(
            BackendKind::from_url("postgresql://x/y").unwrap(),
            BackendKind::Postgres
        );
        assert_eq!(
            BackendKind::from_url("mariadb://x/y").unwrap(),
            BackendKind::Mysql
        );
        assert_eq!(
            BackendKind::from_url("sqlite::memory:").unwrap(),
            BackendKind::Sqlite
        );
        let err = BackendKind::from_url("oracle://u:pw@x/y").unwrap_err();
        assert_eq!(err.code(), crate::Code::ConfigError);
        assert!(!err.to_string().contains("pw"));
    }
}
