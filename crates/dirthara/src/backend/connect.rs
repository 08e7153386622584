//! Opening connections: by URL scheme, retrying a database that is not reachable yet (a
//! container still starting) up to the connect timeout, and running `init_sql` on each.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

#[cfg(sql)]
use super::database_message;
use super::{Backend, BackendKind};
use crate::backoff::Backoff;
use crate::error::{Error, ErrorKind, Result};
use crate::events::{EventKind, EventSink};
use crate::redact::{redact_secrets_of, redact_url};

/// What the engine needs to open a connection.
#[derive(Debug, Clone)]
pub(crate) struct ConnectRequest {
    /// The connection's configured name.
    pub name: String,
    /// What the URL's scheme selects (parsed once per command, by the engine).
    pub kind: BackendKind,
    pub url: String,
    /// The command, for the session's self-description (`dirthara migrate host:pid`).
    #[cfg_attr(
        not(any(feature = "postgres", feature = "mongodb")),
        expect(
            dead_code,
            reason = "only PostgreSQL and MongoDB sessions carry a name"
        )
    )]
    pub operation: String,
    pub connect_timeout: Duration,
    /// The command only reads: it must not create anything (e.g. a missing SQLite file).
    #[cfg_attr(
        not(feature = "sqlite"),
        expect(dead_code, reason = "only opening a SQLite file can create something")
    )]
    pub read_only: bool,
    /// SQL run on every session opened on this connection, before anything else
    /// (`init_sql`): `SET lock_timeout = '5s'`, `SET ROLE migrator`, ...
    #[cfg_attr(
        not(sql),
        expect(
            dead_code,
            reason = "MongoDB has no init_sql (`Config::validate` refuses it)"
        )
    )]
    pub init_sql: Option<String>,
    /// The history table (bare name): fixed per connection, like the schema it resolves to.
    pub history_table: String,
    /// PostgreSQL: the schema the session works in, set as its `search_path` before
    /// `init_sql` (a fleet target that is one schema of a database). Its history, lock and
    /// migrations then live there.
    #[cfg_attr(not(sql), expect(dead_code, reason = "read by the SQL backends only"))]
    pub schema: Option<String>,
    /// PostgreSQL: the schemas on the `search_path` after `schema` (`[fleet] search_path`:
    /// `public`, where extensions and types are installed); only with a `schema`.
    #[cfg_attr(
        not(feature = "postgres"),
        expect(dead_code, reason = "read by the PostgreSQL backend only")
    )]
    pub shared_schemas: Vec<String>,
}

/// Opens connections. The default one dispatches on the URL scheme.
#[async_trait]
pub(crate) trait Connector: Send + Sync {
    async fn connect(
        &self,
        request: &ConnectRequest,
        events: &EventSink,
    ) -> Result<Box<dyn Backend>>;

    /// Takes back a connection to `url` when the command is done with it: `reusable` when
    /// the command ended well and its lock was released cleanly. Closes it, unless this
    /// connector keeps connections for the next command (a fleet's).
    async fn release(&self, _url: &str, backend: Box<dyn Backend>, _reusable: bool) {
        backend.close().await;
    }
}

/// A failed connection attempt, and whether it is worth retrying (a server still starting).
pub(crate) struct ConnectFailure {
    /// What went wrong, in words (the driver's, with what we were doing).
    pub message: String,
    /// The driver's own error, kept as the `CONNECTION_ERROR`'s `source()`.
    pub cause: Option<Arc<dyn std::error::Error + Send + Sync>>,
    pub transient: bool,
}

impl ConnectFailure {
    /// A failure of our own finding (a URL without a database name, ...): not worth retrying.
    pub(crate) fn refused(message: impl Into<String>) -> Self {
        ConnectFailure {
            message: message.into(),
            cause: None,
            transient: false,
        }
    }

    /// A failure the driver reported, with `message` saying what it means here.
    pub(crate) fn driver(
        message: impl Into<String>,
        cause: impl std::error::Error + Send + Sync + 'static,
        transient: bool,
    ) -> Self {
        ConnectFailure {
            message: message.into(),
            cause: Some(Arc::new(cause)),
            transient,
        }
    }
}

/// Connects by URL scheme, retrying a database that is not reachable yet up to the timeout.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct UrlConnector;

#[async_trait]
impl Connector for UrlConnector {
    async fn connect(
        &self,
        request: &ConnectRequest,
        events: &EventSink,
    ) -> Result<Box<dyn Backend>> {
        let started = Instant::now();
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
        let mut announced = Duration::ZERO;
        loop {
            let failure = match super::connect_once(request).await {
                Ok(backend) => return Ok(backend),
                Err(failure) => failure,
            };
            let elapsed = started.elapsed();
            if !failure.transient || elapsed >= request.connect_timeout {
                // Only when it did retry: a timeout of zero asks for one attempt (`wait`,
                // which retries on its own, within its own timeout).
                let retried = !elapsed.is_zero() && !request.connect_timeout.is_zero();
                let waited = if failure.transient && retried {
                    format!(
                        " (gave up after {}; raise --connect-timeout to wait longer)",
                        crate::format_duration(elapsed)
                    )
                } else {
                    String::new()
                };
                let error = Error::new(ErrorKind::Connection {
                    connection: request.name.clone(),
                    message: format!(
                        "{} at {}{waited}",
                        redact_secrets_of(&request.url, &failure.message),
                        redact_url(&request.url)
                    ),
                });
                return Err(match failure.cause {
                    Some(cause) => error.caused_by_shared(cause),
                    None => error,
                });
            }
            if elapsed >= announced {
                events.emit(EventKind::ConnectionWaiting {
                    connection: request.name.clone(),
                    url: redact_url(&request.url),
                    reason: redact_secrets_of(&request.url, &failure.message),
                });
                announced = elapsed.saturating_add(Duration::from_secs(5));
            }
            // Sleep, but never past the deadline: the last attempt is made at the deadline.
            let remaining = request.connect_timeout.saturating_sub(started.elapsed());
            tokio::time::sleep(backoff.next_pause().min(remaining)).await;
        }
    }
}

/// The outcome of running a connection's `init_sql`: a failure is not worth retrying, and
/// names the statement so the user knows which setting to fix.
#[cfg(sql)]
pub(crate) fn run_init_sql(
    outcome: std::result::Result<(), sqlx::Error>,
    init_sql: &str,
) -> std::result::Result<(), ConnectFailure> {
    outcome.map_err(|error| {
        let message = format!(
            "its init_sql `{}` failed: {}",
            init_sql.trim(),
            database_message(&error)
        );
        ConnectFailure::driver(message, error, false)
    })
}

/// Classifies a sqlx connection error: I/O errors and "server is starting" are worth a retry.
#[cfg(sql)]
pub(crate) fn connect_failure(error: sqlx::Error) -> ConnectFailure {
    let transient = match &error {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => true,
        // PostgreSQL 57P03 "the database system is starting up"; MySQL 1040 "too many connections".
        sqlx::Error::Database(db) => matches!(db.code().as_deref(), Some("57P03") | Some("08004")),
        _ => false,
    };
    ConnectFailure::driver(database_message(&error), error, transient)
}
