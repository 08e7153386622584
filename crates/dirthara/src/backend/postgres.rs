//! PostgreSQL: a session-level advisory lock on the history connection, with waiters woken
//! by `NOTIFY` the moment the holder releases; each step and its history record are sent
//! as ONE simple-query message, which PostgreSQL runs as one implicit transaction.
//!
//! Everything dirthara sends for itself is plain text (the simple-query protocol, values as
//! escaped literals): sqlx's prepared statements — named ones, and unnamed ones, which it
//! parses and executes in two separate round trips — do not survive a transaction-pooling
//! proxy. Such a proxy also breaks the session lock; `pooler` detects it before the lock is
//! taken.

mod blocker;
mod driver;
mod hosted;
mod pooler;
mod session_lock;

use std::str::FromStr;

use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Executor, Row};

use super::sql::{SqlBackend, SqlDialect};
use super::{
    connect_failure, database_message, servers, session_label, Backend, ConnectFailure,
    ConnectRequest,
};
use crate::backend::sql::SqlSyntax;
use crate::error::{Error, ErrorKind, Result};
use crate::lock::{LockSupport, LOCK_NAME};
use pooler::{SessionCheck, Suspect};

/// The channel a releasing runner notifies and waiting runners listen on.
const RELEASE_CHANNEL: &str = "dirthara_lock_released";

pub(crate) struct PgDriver {
    conn: PgConnection,
    options: PgConnectOptions,
    url: String,
    connection: String,
    schema: String,
    /// The advisory lock's key, from the database, schema and history table.
    lock_key: i64,
    /// The database's oid, to find our lock in `pg_locks` without a lookup per check.
    database_oid: i64,
    /// The server's end of the connection is where we connected: no proxy in between, so
    /// the lock needs no pooler check.
    direct: bool,
    /// What the server offers for locking, from what it says it is (`version()`): a
    /// PostgreSQL-compatible server may fake advisory locks.
    lock_support: LockSupport,
    /// Opened only when this runner has to wait.
    listener: Option<session_lock::ReleaseListener>,
    listener_failed: bool,
    /// What every session runs after connecting, and again after each reset: our own
    /// settings, then the connection's `init_sql`.
    setup: String,
    /// A step has run on this session, so the next one first resets what it may have changed.
    session_used: bool,
    /// Proof that the lock connection is a server session of its own, taken with the lock.
    session_check: Option<SessionCheck>,
    /// `version()`, read at connect.
    version: String,
}

pub(crate) async fn connect(request: &ConnectRequest) -> Result<Box<dyn Backend>, ConnectFailure> {
    let options = PgConnectOptions::from_str(&request.url)
        .map_err(|e| ConnectFailure::driver(format!("invalid PostgreSQL URL: {e}"), e, false))?
        .application_name(&session_label(&request.operation))
        .disable_statement_logging();
    let search_path = search_path(request);
    let setup = [search_path.as_deref(), request.init_sql.as_deref()];
    let (conn, setup, identity) = open(&options, setup).await?;
    let driver = PgDriver {
        lock_key: lock_key(&identity.database, &identity.schema, &request.history_table),
        database_oid: identity.database_oid,
        direct: reaches_server_directly(&options, &identity.server_address, identity.server_port),
        lock_support: servers::postgres_lock_support(&identity.version),
        version: identity.version.clone(),
        schema: identity.schema,
        conn,
        options,
        url: request.url.clone(),
        connection: request.name.clone(),
        listener: None,
        listener_failed: false,
        setup,
        session_used: false,
        session_check: None,
    };
    Ok(Box::new(SqlBackend::new(driver, request)))
}

/// What a second connection takes over from the first ([`SqlDriver::open_sibling`]).
struct PgSiblingParts {
    url: String,
    connection: String,
    schema: String,
    lock_key: i64,
    database_oid: i64,
    direct: bool,
    lock_support: LockSupport,
    setup: String,
    version: String,
}

/// The `search_path` of a session that works in one schema (a fleet's target): that schema
/// first, where unqualified names are created and the history lives, then the shared ones
/// (`public`, for the extensions and types installed there).
fn search_path(request: &ConnectRequest) -> Option<String> {
    let schema = request.schema.as_deref()?;
    let schemas: Vec<String> = std::iter::once(schema)
        .chain(request.shared_schemas.iter().map(String::as_str))
        .map(|schema| SqlDialect::Postgres.ident(schema))
        .collect();
    Some(format!("SET search_path TO {}", schemas.join(", ")))
}

/// By default PostgreSQL notices a vanished client only when it next writes to it, so a
/// runner killed during a long statement would keep its lock (and half a migration) alive
/// until the statement ends. PostgreSQL 14+ can check the socket while it works; older
/// servers and some poolers refuse the setting, which we tolerate.
const CHECK_INTERVAL: &str = "SET client_connection_check_interval = '1s'";

/// What a session learns about itself once, after its setup (which may set the search_path):
/// every statement dirthara sends for itself names its tables in this schema, whatever a
/// migration does; the server's own address tells a direct connection from a proxy; and
/// `version()` tells PostgreSQL from a server that only speaks its protocol.
const IDENTITY: &str = "SELECT current_database()::text, coalesce(current_schema()::text, ''), \
     (SELECT oid FROM pg_database WHERE datname = current_database())::bigint, \
     coalesce(host(inet_server_addr()), ''), coalesce(inet_server_port(), 0), version()::text";

struct Identity {
    database: String,
    schema: String,
    database_oid: i64,
    server_address: String,
    server_port: i32,
    version: String,
}

fn identity(row: &sqlx::postgres::PgRow) -> Result<Identity, sqlx::Error> {
    Ok(Identity {
        database: row.try_get(0)?,
        schema: row.try_get(1)?,
        database_oid: row.try_get(2)?,
        server_address: row.try_get(3)?,
        server_port: row.try_get(4)?,
        version: row.try_get(5)?,
    })
}

/// Opens a session the way every dirthara session is opened, returning it with the setup
/// it ran (to run again after each reset) and what it learnt about itself. `setup` is what
/// the session is told before anything else, in order: its schema, then `init_sql`.
async fn open(
    options: &PgConnectOptions,
    setup: [Option<&str>; 2],
) -> Result<(PgConnection, String, Identity), ConnectFailure> {
    let [search_path, init_sql] = setup;
    let mut conn = options.connect().await.map_err(connect_failure)?;
    // The usual case takes one round trip: a server that knows the setting, no init_sql (a
    // schema is set in the same message).
    if init_sql.is_none() && conn.server_version_num().is_some_and(|v| v >= 140_000) {
        let setup = match search_path {
            Some(search_path) => format!("{CHECK_INTERVAL};\n{search_path}"),
            None => CHECK_INTERVAL.to_string(),
        };
        let both = conn
            .fetch_all(format!("{setup}; {IDENTITY}").as_str())
            .await;
        if let Some(Ok(found)) = both.ok().and_then(|rows| rows.last().map(identity)) {
            return Ok((conn, setup, found));
        }
    }
    let mut setup = match conn.execute(CHECK_INTERVAL).await {
        Ok(_) => CHECK_INTERVAL.to_string(),
        Err(_) => String::new(),
    };
    for sql in [search_path, init_sql].into_iter().flatten() {
        super::run_init_sql(conn.execute(sql).await.map(|_| ()), sql)?;
        if !setup.is_empty() {
            setup.push_str(";\n");
        }
        setup.push_str(sql);
    }
    let row = conn.fetch_one(IDENTITY).await.map_err(connect_failure)?;
    let found = identity(&row).map_err(connect_failure)?;
    Ok((conn, setup, found))
}

/// Whether the server's end of this connection is the very address and port the runner
/// connected to — an IP address, or `localhost` answered on a loopback address. A proxy
/// (PgBouncer, pgcat, RDS Proxy, Supavisor) has its own address or port, so through one this
/// is false and the lock takes the full pooler check. Names that need DNS, Unix sockets and
/// port-mapped containers are also false: they are checked the slow way.
fn reaches_server_directly(options: &PgConnectOptions, address: &str, port: i32) -> bool {
    if i32::from(options.get_port()) != port {
        return false;
    }
    let Ok(server) = address.parse::<std::net::IpAddr>() else {
        return false;
    };
    let host = options
        .get_host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(target) => target.to_canonical() == server.to_canonical(),
        Err(_) => host.eq_ignore_ascii_case("localhost") && server.is_loopback(),
    }
}

impl PgDriver {
    /// The statements that return this session to the state it opened with, before a step
    /// that follows another one (empty before the first step): each migration then behaves
    /// the same whether it runs first or after a file that ran `SET search_path = ''` or
    /// `SET ROLE`. `RESET ALL` keeps advisory locks, so the migration lock stays held (unlike
    /// `DISCARD ALL`, which would release it).
    fn take_reset(&mut self) -> String {
        if !std::mem::replace(&mut self.session_used, true) {
            return String::new();
        }
        let mut reset = "RESET ALL;\n".to_string();
        // Through a pooler the session's name was a `SET` of the pooler's, which `RESET ALL`
        // takes away; the blocker of a waiting statement is found by it.
        let name = self.options.get_application_name().unwrap_or_default();
        let name = format!(
            "SET application_name = {}",
            SqlDialect::Postgres.literal(name)
        );
        for setup in [
            Some(name),
            Some(self.setup.clone()).filter(|s| !s.is_empty()),
            // The stamp that proves this is the lock's own server session is a setting too.
            self.session_check.as_ref().map(|c| c.restamp_sql()),
        ]
        .into_iter()
        .flatten()
        {
            reset.push_str(&setup);
            reset.push_str(";\n");
        }
        reset
    }

    /// Counts the statements PostgreSQL completed: a simple query answers each one with a
    /// CommandComplete, in order, and stops at the first error.
    async fn execute_counted(&mut self, sql: &str) -> Result<(), (usize, sqlx::Error)> {
        let mut results = self.conn.execute_many(sql);
        let mut completed = 0;
        while let Some(result) = std::future::poll_fn(|cx| results.as_mut().poll_next(cx)).await {
            match result {
                Ok(_) => completed += 1,
                Err(error) => return Err((completed, error)),
            }
        }
        Ok(())
    }

    fn lock_error(&self, error: sqlx::Error) -> Error {
        Error::new(ErrorKind::LockFailed {
            lock: LOCK_NAME.to_string(),
            connection: self.connection.clone(),
            reason: database_message(&error),
        })
        .caused_by(error)
    }

    /// A failed session check as the error the runner stops with.
    fn suspect_error(&self, suspect: Suspect) -> Error {
        match suspect {
            Suspect::Database(error) => self.lock_error(error),
            Suspect::Shared(evidence) => Error::new(ErrorKind::LockFailed {
                lock: LOCK_NAME.to_string(),
                connection: self.connection.clone(),
                reason: pooler_reason(
                    &evidence,
                    hosted::hosted_pooler_advice(self.options.get_host(), self.options.get_port()),
                ),
            }),
        }
    }

    /// The `pg_locks` condition that matches our lock (bigint keys use objsubid 1).
    fn lock_match(&self) -> String {
        let key = self.lock_key;
        let (high, low) = ((key as u64) >> 32, (key as u64) & 0xffff_ffff);
        format!(
            "l.locktype = 'advisory' AND l.granted AND l.classid::bigint = {high} \
             AND l.objid::bigint = {low} AND l.objsubid = 1 AND l.database = {}",
            self.database_oid
        )
    }
}

/// The advisory-lock key: 64 bits of SHA-256 over the lock name, database, schema and
/// history table, so runners sharing a history exclude each other and nobody else.
fn lock_key(database: &str, schema: &str, table: &str) -> i64 {
    // Planted fault (tests only): a key of this connection's own (random), which excludes
    // nobody, not even another runner in the same process.
    dirthara_core::fail_point!("lock_key_per_process", |_| fastrand::i64(..));
    let digest = Sha256::digest(format!("{LOCK_NAME}\0{database}\0{schema}\0{table}").as_bytes());
    i64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// Why the session lock was refused, with the likely cause and the fix.
fn pooler_reason(evidence: &str, hosted: Option<String>) -> String {
    let hosted = hosted
        .map(|advice| format!(" Here, {advice}."))
        .unwrap_or_default();
    format!(
        "the session lock cannot hold on this connection: {evidence}. This is what a \
         transaction-pooling proxy does (PgBouncer with pool_mode = transaction, Odyssey with \
         pool \"transaction\", pgcat, RDS Proxy, Supavisor): it runs each transaction in \
         whichever server session is free, so a session lock taken in one is not held in the \
         next. Nothing was changed. Use --locking \
         lease (`locking = \"lease\"`), which works through any proxy, or connect directly to \
         PostgreSQL or through a session-pooled connection.{hosted}"
    )
}

/// A statement that fails — rolling back the message it leads — unless this session still
/// holds the session-level advisory lock `key`, which it then holds through the commit.
///
/// It asks the lock manager, not `pg_locks`: reading `pg_locks` copies the server's whole lock
/// table, which measured about 0.25 ms per migration; these three calls touch only this
/// session's own lock entry (about 0.05 ms). A transaction-level hold is taken first, so
/// that giving the session-level hold back (which succeeds only if this session had it) and
/// taking it again leaves no moment at which another session could take the lock. The `IF`s
/// are separate statements so that they run in this order.
fn lock_guard(key: i64) -> String {
    format!(
        "DO $dirthara_guard$ BEGIN \
         IF NOT pg_try_advisory_xact_lock({key}) THEN RAISE EXCEPTION 'dirthara: another \
         session holds the migration lock'; END IF; \
         IF NOT pg_advisory_unlock({key}) THEN RAISE EXCEPTION 'dirthara: this session no \
         longer holds the migration lock'; END IF; \
         PERFORM pg_advisory_lock({key}); END $dirthara_guard$;"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direct(url: &str, address: &str, port: i32) -> bool {
        reaches_server_directly(&PgConnectOptions::from_str(url).unwrap(), address, port)
    }

    #[test]
    fn only_the_very_address_and_port_connected_to_count_as_direct() {
        assert!(direct("postgres://u@127.0.0.1:5432/d", "127.0.0.1", 5432));
        assert!(direct("postgres://u@[::1]:5432/d", "::1", 5432));
        assert!(direct("postgres://u@localhost:5432/d", "::1", 5432));
        assert!(direct("postgres://u@10.0.0.6/d", "::ffff:10.0.0.6", 5432));
        // A proxy listens on a port (or an address) of its own.
        assert!(!direct("postgres://u@127.0.0.1:6432/d", "127.0.0.1", 5432));
        assert!(!direct("postgres://u@10.0.0.5:5432/d", "10.0.0.6", 5432));
        assert!(!direct("postgres://u@localhost:5432/d", "10.0.0.6", 5432));
        // What cannot be compared without more lookups takes the full check.
        assert!(!direct("postgres://u@db.internal:5432/d", "10.0.0.6", 5432));
        assert!(!direct(
            "postgres://u@localhost/d?host=/var/run/postgresql",
            "",
            0
        ));
    }
}
