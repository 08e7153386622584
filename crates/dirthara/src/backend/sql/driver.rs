//! What a SQL driver module provides to the shared SQL layer: run text, read rows as text,
//! and the few facts and statements that differ between servers. The driver's error is its
//! own ([`SqlDriver::Error`]), so a driver that is not sqlx fits too.

use async_trait::async_trait;

use super::{Atomic, DriverError, SqlDialect};
use crate::backend::{Capabilities, ConnectRequest, StepFailure};
use crate::error::Result;
use crate::lock::{LockSupport, SessionLock};
use crate::rust_migration::Connection;

/// Rows whose columns are all text (or NULL), as the history queries select them.
///
/// Decoded unchecked: every column is selected as text, so asking the driver to compare
/// each value's type with `String`'s first (which `try_get` does, per value) only costs —
/// about a third of reading a 1,000-row history.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn text_rows<R>(rows: &[R]) -> Result<Vec<Vec<Option<String>>>, sqlx::Error>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    for<'r> Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    rows.iter()
        .map(|row| {
            (0..row.len())
                .map(|i| row.try_get_unchecked::<Option<String>, _>(i))
                .collect()
        })
        .collect()
}

/// Builds a history statement once the step's duration is known (`None`: measured in SQL).
pub(crate) type RecordFn<'a> = dyn Fn(Option<std::time::Duration>) -> String + Send + Sync + 'a;

/// What a SQL driver module provides: run text, read rows as text.
#[async_trait]
pub(crate) trait SqlDriver: Send {
    /// The driver's own error (sqlx's for the drivers here).
    type Error: DriverError;

    fn dialect(&self) -> SqlDialect;

    /// Runs one or more statements as sent (no prepared statement, no implicit transaction
    /// beyond what the database itself does with a multi-statement string) and returns the
    /// rows affected (MySQL: rows matched).
    async fn execute_count(&mut self, sql: &str) -> Result<u64, Self::Error>;

    async fn execute(&mut self, sql: &str) -> Result<(), Self::Error> {
        self.execute_count(sql).await.map(|_| ())
    }

    /// A SQL condition that holds exactly when it is evaluated in this session while the
    /// session holds the migration lock: what a `running` marker carries where the session
    /// lock [`verifies_in_marker`](crate::lock::SessionLock::verifies_in_marker).
    fn lock_held_condition(&self) -> Option<String> {
        None
    }

    /// Whether `error` says the text sent ended inside a statement: the tokenizer ended it
    /// where the database reads on (SQLite takes `end` as a column name inside a trigger).
    fn ended_inside_a_statement(&self, _error: &Self::Error) -> bool {
        false
    }

    /// After `execute` failed: the 1-based line of its text where the failing statement
    /// starts, for a driver that sends text statement by statement (SQLite). `None` where
    /// the database locates an error itself.
    fn failed_statement_line(&self) -> Option<usize> {
        None
    }

    /// A second connection to the same database with the same settings (the lease store's,
    /// the table-lock observer's). The future borrows nothing, so it can be made before a
    /// step runs and opened only if the step comes to need it.
    fn open_sibling(&self) -> Sibling<Self::Error>;

    /// See [`Backend::reopen`]: the session made what a new connection for `request` would
    /// be, when this driver can; the history's names are then taken from [`SqlDriver::schema`]
    /// again.
    async fn reopen(&mut self, _request: &ConnectRequest) -> Result<bool, Self::Error> {
        Ok(false)
    }

    /// Runs a query whose columns are all text (or NULL).
    async fn fetch_text(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, Self::Error>;

    /// Sends `step` and the statement `record` builds (given `None`: the database measures
    /// the step's duration itself) as ONE message that commits as a whole, where the database
    /// runs a multi-statement message as one transaction (PostgreSQL). `None` where it does
    /// not: the backend then brackets them in a transaction statement by statement. On
    /// failure the transaction is rolled back before this returns.
    ///
    /// With `checks_lock`, the message also fails (rolled back) unless this session still
    /// holds the session lock; only a driver whose session lock says
    /// [`SessionLock::verifies_in_step`] is asked that.
    async fn execute_atomically(
        &mut self,
        _step: &str,
        _record: Option<&RecordFn<'_>>,
        _atomic: Atomic,
    ) -> Option<Result<(), StepFailure>> {
        None
    }

    /// The statement that bounds how long what follows it waits for a table (or metadata)
    /// lock: for the rest of the transaction (`local`) or of the session. `None` where the
    /// database has no such lock waits to bound (SQLite).
    ///
    /// With `None` (no timeout for what follows), the statement that undoes a session-level
    /// one an earlier step set, if any.
    fn lock_timeout_sql(
        &mut self,
        _timeout: Option<std::time::Duration>,
        _local: bool,
    ) -> Option<String> {
        None
    }

    /// How another connection finds this one's waiting statement (PostgreSQL: its
    /// `application_name`; MySQL: its connection id).
    fn session_identity(&self) -> String {
        String::new()
    }

    /// Who blocks the session `identity`, and the table it waits for; asked on a connection
    /// of its own while that session waits. `None` when nothing can be said.
    async fn who_blocks(
        &mut self,
        _identity: &str,
    ) -> Option<(Option<String>, crate::events::Blocker)> {
        None
    }

    /// Whether the transaction `blocker` held the lock with has ended (see
    /// [`Backend::blocker_gone`]); asked on the connection [`SqlDriver::who_blocks`] is.
    async fn blocker_gone(&mut self, _blocker: &crate::events::Blocker) -> Option<bool> {
        None
    }

    /// The setting that bounds a statement's wait for a table lock (`lock_timeout`,
    /// `lock_wait_timeout`), for spotting a migration that sets its own: from that statement
    /// on, the migration's value wins.
    fn lock_timeout_setting(&self) -> Option<&'static str> {
        None
    }

    /// The table-lock timeout of a step sent statement by statement travels in each
    /// statement's own message, as `lock_timeout_sql(.., local)` before it — never as a
    /// session setting, which a transaction-pooling proxy neither keeps for the statement
    /// nor takes away from the next client (PostgreSQL). Else it is set once for the session
    /// before the step's statements (MySQL).
    fn lock_timeout_in_each_message(&self) -> bool {
        false
    }

    /// `error` refused a statement because it may not run inside a transaction block (and
    /// the message it shared with its `SET LOCAL` was one): nothing of that message ran.
    fn refused_in_a_transaction_block(&self, _error: &Self::Error) -> bool {
        false
    }

    /// Returns the session to a clean state after a failed step: a step that opened its own
    /// transaction block and failed inside it leaves the session refusing every statement
    /// (PostgreSQL 25P02) until it is rolled back. Errors are ignored: there may be no
    /// transaction to roll back, or no session left.
    async fn clean_up_after_failure(&mut self) {
        let _ = self.execute("ROLLBACK").await;
    }

    /// Called before a step that is not sent through [`SqlDriver::execute_atomically`]:
    /// returns the session to the state it opened with, where the database can do that
    /// without losing the lock (PostgreSQL).
    async fn before_step(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }

    /// The schema (PostgreSQL), database (MySQL) or attached database (SQLite) the history
    /// lives in, resolved once when the connection opened.
    fn schema(&self) -> Option<&str>;

    /// What the database can do (see [`Capabilities`]).
    fn capabilities(&self) -> Capabilities;

    /// What the server offers for locking, as learnt when the connection opened.
    fn lock_support(&self) -> LockSupport;

    fn session_lock(&mut self) -> Option<&mut dyn SessionLock> {
        None
    }

    /// The connection a Rust migration receives.
    fn connection(&mut self) -> Connection<'_>;

    /// Points `error` at the line of the file where the driver can tell it from what the
    /// database said about `statement`, which starts at `first_line` of the file.
    fn locate(
        &self,
        _error: &mut crate::error::DatabaseError,
        _statement: &str,
        _first_line: usize,
    ) {
    }

    /// The server's version as it reports it (`version()`, `VERSION()`), read at connect.
    fn server_version(&self) -> Option<&str> {
        None
    }

    async fn close(self: Box<Self>);
}

/// A second connection being opened ([`SqlDriver::open_sibling`]).
pub(crate) type Sibling<E> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Box<dyn SqlDriver<Error = E>>, E>> + Send>,
>;
