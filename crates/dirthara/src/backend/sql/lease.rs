//! The lease lock in a SQL table (`<history>_lock`), for `locking = "lease"`: the answer for
//! CockroachDB, PgBouncer in transaction-pooling mode, and SQLite shared by several processes.
//!
//! Acquire is an `UPDATE` that only matches an expired lease, then (if it matched nothing) a
//! plain `INSERT` whose unique violation means "held" — each decided by something the
//! database reports unambiguously (rows matched, or a duplicate key), never by message text.
//! MySQL's driver reports rows *matched* (CLIENT_FOUND_ROWS), which is exactly what the
//! expiry condition needs. Every "now" is the database's clock.

use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::{DriverError, SqlDialect, SqlDriver};
use crate::backend::sql::{CatalogSql, SqlSyntax};
use crate::backoff::Backoff;
use crate::error::{Error, ErrorKind, Result};
use crate::lock::LOCK_NAME;
use crate::lock::{LeaseObservation, LeaseRecord, LeaseRequest, LeaseStore};

/// How long opening the store (or reading the lease) waits out a SQLite file kept busy by
/// other runners creating the lease table (or writing their history): far longer than any such write takes, short
/// enough that a file locked for good still fails with a clear error.
const CREATE_PATIENCE: Duration = Duration::from_secs(15);

pub(crate) struct SqlLeaseStore<E> {
    driver: Box<dyn SqlDriver<Error = E>>,
    table: String,
    connection: String,
}

/// The lease table's statements, per dialect.
pub(crate) trait LeaseSql {
    fn lease_now(self) -> &'static str;

    fn lease_expiry(self, ttl: Duration) -> String;

    /// True only for a lease whose expiry is a valid time in the past: a NULL (or, on SQLite,
    /// non-numeric) expiry never matches, so a malformed lease stays held.
    fn lease_expired(self) -> &'static str;

    fn lease_live(self) -> &'static str;

    fn lease_table_sql(self, table: &str) -> String;

    fn lease_observe_sql(self, table: &str) -> String;
}

impl LeaseSql for SqlDialect {
    fn lease_now(self) -> &'static str {
        match self {
            SqlDialect::Sqlite => "julianday('now')",
            SqlDialect::Postgres => "now()",
            SqlDialect::MySql => "UTC_TIMESTAMP(6)",
        }
    }

    fn lease_expiry(self, ttl: Duration) -> String {
        let ms = ttl.as_millis();
        match self {
            SqlDialect::Sqlite => format!("(julianday('now') + {ms} / 86400000.0)"),
            SqlDialect::Postgres => format!("(now() + {ms} * interval '1 millisecond')"),
            SqlDialect::MySql => format!("(UTC_TIMESTAMP(6) + INTERVAL {} MICROSECOND)", ms * 1000),
        }
    }

    fn lease_expired(self) -> &'static str {
        match self {
            SqlDialect::Sqlite => "typeof(expires_at) = 'real' AND expires_at < julianday('now')",
            SqlDialect::Postgres => "expires_at < now()",
            SqlDialect::MySql => "expires_at < UTC_TIMESTAMP(6)",
        }
    }

    fn lease_live(self) -> &'static str {
        match self {
            SqlDialect::Sqlite => "typeof(expires_at) = 'real' AND expires_at >= julianday('now')",
            SqlDialect::Postgres => "expires_at >= now()",
            SqlDialect::MySql => "expires_at >= UTC_TIMESTAMP(6)",
        }
    }

    fn lease_table_sql(self, table: &str) -> String {
        let ts = match self {
            SqlDialect::Sqlite => "REAL",
            SqlDialect::Postgres => "TIMESTAMPTZ",
            SqlDialect::MySql => "DATETIME(6)",
        };
        format!(
            "CREATE TABLE IF NOT EXISTS {} (id VARCHAR(64) NOT NULL PRIMARY KEY, \
             owner_id VARCHAR(64) NOT NULL, hostname VARCHAR(255), pid BIGINT, operation VARCHAR(32), \
             acquired_at {ts}, expires_at {ts})",
            self.ident(table)
        )
    }

    fn lease_observe_sql(self, table: &str) -> String {
        let (acquired, expires, remaining) = match self {
            SqlDialect::Sqlite => (
                "strftime('%Y-%m-%dT%H:%M:%SZ', acquired_at)".to_string(),
                "CASE WHEN typeof(expires_at) = 'real' THEN strftime('%Y-%m-%dT%H:%M:%SZ', expires_at) ELSE CAST(expires_at AS TEXT) END".to_string(),
                "CAST(CAST((expires_at - julianday('now')) * 86400000 AS INTEGER) AS TEXT)".to_string(),
            ),
            SqlDialect::Postgres => (
                self.timestamp_text("acquired_at"),
                self.timestamp_text("expires_at"),
                "((EXTRACT(EPOCH FROM (expires_at - now())) * 1000)::bigint)::text".to_string(),
            ),
            SqlDialect::MySql => (
                self.timestamp_text("acquired_at"),
                self.timestamp_text("expires_at"),
                "CAST(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) DIV 1000 AS CHAR)".to_string(),
            ),
        };
        format!(
            "SELECT owner_id, hostname, {}, operation, {acquired}, {expires}, \
             CASE WHEN {} THEN 'live' WHEN {} THEN 'expired' ELSE 'malformed' END, {remaining} \
             FROM {} WHERE id = {}",
            self.text("pid"),
            self.lease_live(),
            self.lease_expired(),
            self.ident(table),
            self.literal(LOCK_NAME),
        )
    }
}

impl<E: DriverError> SqlLeaseStore<E> {
    /// Opens the store on its own connection, creating the lease table if needed.
    ///
    /// Several runners may create the table at the same moment. On PostgreSQL the loser may
    /// see a duplicate type; on SQLite every runner's `CREATE TABLE IF NOT EXISTS` needs the
    /// file's one write lock, and with the lease connection's short busy timeout the losers
    /// see SQLITE_BUSY. Neither means "held" nor a failure: what matters is that the table
    /// exists, so a busy file is retried (with jitter) for up to [`CREATE_PATIENCE`].
    pub(crate) async fn open(
        mut driver: Box<dyn SqlDriver<Error = E>>,
        table: String,
        connection: String,
    ) -> Result<Self> {
        let dialect = driver.dialect();
        let started = Instant::now();
        let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_millis(250));
        loop {
            let error = match driver.execute(&dialect.lease_table_sql(&table)).await {
                Ok(()) => break,
                Err(error) => error,
            };
            let check = driver
                .fetch_text(&dialect.existing_tables_sql(&[&table]))
                .await;
            let busy = (dialect == SqlDialect::Sqlite)
                && (error.is_busy() || check.as_ref().is_err_and(E::is_busy));
            match check {
                Ok(rows) if !rows.is_empty() => break,
                _ if busy && started.elapsed() < CREATE_PATIENCE => {
                    tokio::time::sleep(backoff.next_pause()).await;
                }
                _ => return Err(lease_error(&connection, error)),
            }
        }
        Ok(SqlLeaseStore {
            driver,
            table,
            connection,
        })
    }

    fn dialect(&self) -> SqlDialect {
        self.driver.dialect()
    }

    fn error(&self, error: E) -> Error {
        lease_error(&self.connection, error)
    }

    fn where_ours(&self, owner_id: &str) -> String {
        let d = self.dialect();
        format!(
            "id = {} AND owner_id = {}",
            d.literal(LOCK_NAME),
            d.literal(owner_id)
        )
    }
}

/// What the database said about the lease table, kept as the error's `source()`.
fn lease_error(connection: &str, error: impl DriverError) -> Error {
    Error::new(ErrorKind::LockFailed {
        lock: LOCK_NAME.to_string(),
        connection: connection.to_string(),
        reason: format!("lease table: {}", super::database_message(&error)),
    })
    .caused_by(error)
}

#[async_trait]
impl<E: DriverError> LeaseStore for SqlLeaseStore<E> {
    async fn try_acquire(&mut self, request: &LeaseRequest) -> Result<bool> {
        let d = self.dialect();
        let t = d.ident(&self.table);
        let values = [
            d.literal(&request.owner_id),
            d.literal(&request.hostname),
            request.pid.to_string(),
            d.literal(&request.operation),
        ];
        let take_expired = format!(
            "UPDATE {t} SET owner_id = {}, hostname = {}, pid = {}, operation = {}, \
             acquired_at = {}, expires_at = {} WHERE id = {} AND {}",
            values[0],
            values[1],
            values[2],
            values[3],
            d.lease_now(),
            d.lease_expiry(request.ttl),
            d.literal(LOCK_NAME),
            d.lease_expired()
        );
        match self.driver.execute_count(&take_expired).await {
            Ok(1) => return Ok(true),
            Ok(_) => {}
            Err(error) if (d == SqlDialect::Sqlite) && error.is_busy() => return Ok(false),
            Err(error) => return Err(self.error(error)),
        }
        let insert = format!(
            "INSERT INTO {t} (id, owner_id, hostname, pid, operation, acquired_at, expires_at) \
             VALUES ({}, {}, {}, {}, {}, {}, {})",
            d.literal(LOCK_NAME),
            values[0],
            values[1],
            values[2],
            values[3],
            d.lease_now(),
            d.lease_expiry(request.ttl)
        );
        match self.driver.execute_count(&insert).await {
            Ok(_) => Ok(true),
            Err(error) if error.is_unique_violation() => Ok(false),
            Err(error) if (d == SqlDialect::Sqlite) && error.is_busy() => Ok(false),
            Err(error) => Err(self.error(error)),
        }
    }

    async fn renew(&mut self, owner_id: &str, ttl: Duration) -> Result<bool> {
        let d = self.dialect();
        let sql = format!(
            "UPDATE {} SET expires_at = {} WHERE {} AND {}",
            d.ident(&self.table),
            d.lease_expiry(ttl),
            self.where_ours(owner_id),
            d.lease_live()
        );
        match self.driver.execute_count(&sql).await {
            Ok(n) => Ok(n == 1),
            Err(error) => Err(self.error(error)),
        }
    }

    async fn release(&mut self, owner_id: &str) -> Result<bool> {
        let sql = format!(
            "DELETE FROM {} WHERE {}",
            self.dialect().ident(&self.table),
            self.where_ours(owner_id)
        );
        match self.driver.execute_count(&sql).await {
            Ok(n) => Ok(n == 1),
            Err(error) => Err(self.error(error)),
        }
    }

    async fn observe(&mut self) -> Result<LeaseObservation> {
        let sql = self.dialect().lease_observe_sql(&self.table);
        // A SQLite reader is refused while another process commits; that is a moment, not
        // an answer, so it is waited out (bounded) rather than reported as a lock failure.
        let started = Instant::now();
        let rows = loop {
            match self.driver.fetch_text(&sql).await {
                Ok(rows) => break rows,
                Err(error)
                    if (self.dialect() == SqlDialect::Sqlite)
                        && error.is_busy()
                        && started.elapsed() < CREATE_PATIENCE =>
                {
                    tokio::time::sleep(crate::backoff::jittered(Duration::from_millis(50))).await;
                }
                Err(error) => return Err(self.error(error)),
            }
        };
        let Some(row) = rows.into_iter().next() else {
            return Ok(LeaseObservation::Free);
        };
        let text = |i: usize| row.get(i).cloned().flatten();
        let record = LeaseRecord {
            owner_id: text(0),
            hostname: text(1),
            pid: text(2).and_then(|p| p.parse().ok()),
            operation: text(3),
            acquired_at: text(4),
            expires_at: text(5),
        };
        let millis = text(7).and_then(|m| m.parse::<i64>().ok()).unwrap_or(0);
        Ok(match text(6).as_deref() {
            Some("live") => LeaseObservation::Held {
                record,
                remaining: Duration::from_millis(millis.max(0) as u64),
            },
            Some("expired") => LeaseObservation::Stale {
                record,
                expired_for: Duration::from_millis(millis.unsigned_abs()),
            },
            _ => LeaseObservation::Malformed { record },
        })
    }

    async fn force_release(&mut self) -> Result<bool> {
        let d = self.dialect();
        let sql = format!(
            "DELETE FROM {} WHERE id = {}",
            d.ident(&self.table),
            d.literal(LOCK_NAME)
        );
        // On SQLite a holder inside a transactional migration keeps the file's one write
        // lock until its step commits: wait that out (bounded) as `observe` does, rather than
        // fail at the first SQLITE_BUSY.
        let started = Instant::now();
        loop {
            match self.driver.execute_count(&sql).await {
                Ok(n) => return Ok(n > 0),
                Err(error)
                    if (self.dialect() == SqlDialect::Sqlite)
                        && error.is_busy()
                        && started.elapsed() < CREATE_PATIENCE =>
                {
                    tokio::time::sleep(crate::backoff::jittered(Duration::from_millis(50))).await;
                }
                Err(error) => return Err(self.error(error)),
            }
        }
    }

    fn concurrent_renewal(&self) -> bool {
        !(self.dialect() == SqlDialect::Sqlite)
    }

    async fn close(self: Box<Self>) {
        self.driver.close().await
    }
}

#[cfg(all(test, feature = "sqlite"))]
mod tests;
