//! Everything the SQL backends share: the SQL text of the history (per dialect) and one
//! implementation of [`Backend`] over a minimal driver.
//!
//! Values spliced into history statements are integers, hex checksums and names restricted
//! to a safe alphabet at load time; they are still quoted with [`Dialect::literal`].

use async_trait::async_trait;

use super::history_tables::{self, Known, Prepared};
use super::{database_message, Backend, Capabilities, ConnectRequest, Namespaces, Step};
use super::{StepBody, StepFailure};
use crate::code::Connection;
use crate::error::{Error, Result};
use crate::history::{AppliedMigration, HistoryChange, HistoryDigest};
use crate::lock::{lease_table, LeaseStore, LockHost, LockSupport, SessionLock};

mod dialect;
mod history;
mod lease;
mod observer;
mod script;
mod steps;

use steps::Sending;

pub(crate) use dialect::{DbObject, Dialect, HistoryNames};

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
    fn dialect(&self) -> Dialect;

    /// Runs one or more statements as sent (no prepared statement, no implicit transaction
    /// beyond what the database itself does with a multi-statement string) and returns the
    /// rows affected (MySQL: rows matched).
    async fn execute_count(&mut self, sql: &str) -> Result<u64, sqlx::Error>;

    async fn execute(&mut self, sql: &str) -> Result<(), sqlx::Error> {
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
    fn ended_inside_a_statement(&self, _error: &sqlx::Error) -> bool {
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
    fn open_sibling(&self) -> Sibling;

    /// See [`Backend::reopen`]: the session made what a new connection for `request` would
    /// be, when this driver can; the history's names are then taken from [`SqlDriver::schema`]
    /// again.
    async fn reopen(&mut self, _request: &ConnectRequest) -> Result<bool, sqlx::Error> {
        Ok(false)
    }

    /// Runs a query whose columns are all text (or NULL).
    async fn fetch_text(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, sqlx::Error>;

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
    fn refused_in_a_transaction_block(&self, _error: &sqlx::Error) -> bool {
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
    async fn before_step(&mut self) -> Result<(), sqlx::Error> {
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

    async fn close(self: Box<Self>);
}

/// A second connection being opened ([`SqlDriver::open_sibling`]).
pub(crate) type Sibling = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Box<dyn SqlDriver>, sqlx::Error>> + Send>,
>;

/// A [`Backend`] for any SQL database, given its driver.
pub(crate) struct SqlBackend<D> {
    driver: D,
    connection: String,
    /// The history and meta tables, qualified with the schema resolved at connect.
    names: HistoryNames,
    known: Known,
    /// A connection of our own that asks who blocks a statement while it waits for its table
    /// lock (afterwards the wait is over and the database can no longer say); opened the
    /// first time a step has a table-lock timeout.
    observer: Option<Box<dyn SqlDriver>>,
}

impl<D: SqlDriver> SqlBackend<D> {
    /// The backend of a freshly opened driver: the history's names are fixed here, in the
    /// schema (or database) the session resolved after its `init_sql`.
    pub(crate) fn new(driver: D, request: &ConnectRequest) -> Self {
        let names = HistoryNames::new(driver.dialect(), driver.schema(), &request.history_table);
        SqlBackend {
            driver,
            connection: request.name.clone(),
            names,
            known: Known::default(),
            observer: None,
        }
    }

    fn history_error(&self, error: sqlx::Error) -> Error {
        Error::history(&self.connection, database_message(&error)).caused_by(error)
    }

    fn change_sql(&self, change: &HistoryChange, elapsed: Option<std::time::Duration>) -> String {
        change_sql(self.driver.dialect(), &self.names, change, elapsed)
    }
}

#[async_trait]
impl<D: SqlDriver> LockHost for SqlBackend<D> {
    fn lock_support(&self) -> LockSupport {
        self.driver.lock_support()
    }

    fn session_lock(&mut self) -> Option<&mut dyn SessionLock> {
        self.driver.session_lock()
    }

    async fn lease_store(&mut self, create: bool) -> Result<Option<Box<dyn LeaseStore>>> {
        let table = lease_table(&self.names.table);
        if !create {
            let dialect = self.driver.dialect();
            let found = self
                .driver
                .fetch_text(&dialect.existing_tables_sql(&[&table]))
                .await
                .map_err(|e| self.history_error(e))?;
            if found.is_empty() {
                return Ok(None);
            }
        }
        // Its own connection: the heartbeat renews while a migration runs on ours.
        let driver = self.driver.open_sibling().await.map_err(|e| {
            Error::new(crate::ErrorKind::Connection {
                connection: self.connection.clone(),
                message: database_message(&e),
            })
            .caused_by(e)
        })?;
        let store = lease::SqlLeaseStore::open(driver, table, self.connection.clone()).await?;
        Ok(Some(Box::new(store)))
    }
}

#[async_trait]
impl<D: SqlDriver> Backend for SqlBackend<D> {
    fn capabilities(&self) -> Capabilities {
        self.driver.capabilities()
    }

    fn lock_host(&mut self) -> &mut dyn LockHost {
        self
    }

    async fn read_history(&mut self) -> Result<Option<Vec<AppliedMigration>>> {
        history_tables::read(self).await
    }

    async fn prepare_history(&mut self) -> Result<Vec<AppliedMigration>> {
        history_tables::prepare(self).await
    }

    async fn prepare_history_expecting(&mut self, expected: &HistoryDigest) -> Result<Prepared> {
        history_tables::prepare_expecting(self, Some(expected)).await
    }

    async fn run(&mut self, step: Step<'_>) -> Result<(), StepFailure> {
        match step.lock_timeout {
            Some(timeout) => self.run_observed(step, timeout).await,
            None => self.run_step(step).await,
        }
    }

    async fn blocker_gone(&mut self, blocker: &crate::events::Blocker) -> Option<bool> {
        self.observed_blocker_gone(blocker).await
    }

    async fn record(&mut self, changes: &[HistoryChange]) -> Result<()> {
        let sql = match changes {
            [] => return Ok(()),
            [one] => self.change_sql(one, None),
            several => {
                let dialect = self.driver.dialect();
                let mut sql = dialect.begin().to_string();
                for change in several {
                    sql.push_str("; ");
                    sql.push_str(&self.change_sql(change, None));
                }
                sql.push_str("; COMMIT");
                sql
            }
        };
        let sent = self.driver.execute(&sql).await;
        if sent.is_err() && changes.len() > 1 {
            // A statement failed inside the transaction: end it, so nothing half-done stays.
            self.driver.clean_up_after_failure().await;
        }
        sent.map_err(|e| self.history_error(e))
    }

    async fn record_guarded(&mut self, changes: &[HistoryChange]) -> Result<bool> {
        let Some(condition) = self.driver.lock_held_condition() else {
            unreachable!("only a session lock that verifies in the marker is asked to")
        };
        let Some((marker, earlier)) = changes.split_last() else {
            return Ok(true);
        };
        // The check is read first, as a row; the marker is written under the same condition.
        // Only this session can give its lock up (another one ending it ends this message
        // too), so the two agree: a marker is written exactly when the row says held.
        let dialect = self.driver.dialect();
        let mut sql = format!("SELECT CAST({condition} AS CHAR); {}", dialect.begin());
        for change in earlier {
            sql.push_str("; ");
            sql.push_str(&self.change_sql(change, None));
        }
        sql.push_str("; ");
        sql.push_str(&dialect.guarded_change_sql(&self.names, marker, &condition));
        sql.push_str("; COMMIT");
        let rows = match self.driver.fetch_text(&sql).await {
            Ok(rows) => rows,
            Err(error) => {
                self.driver.clean_up_after_failure().await;
                return Err(self.history_error(error));
            }
        };
        let held = rows.first().and_then(|row| row.first().cloned().flatten());
        Ok(held.as_deref() == Some("1"))
    }

    async fn drop_all(&mut self) -> Result<Vec<String>> {
        // The history goes too: look again before using it.
        self.known.forget();
        let keep = lease_table(&self.names.table);
        let dialect = self.driver.dialect();
        let rows = self
            .driver
            .fetch_text(&dialect.list_objects_sql(self.driver.schema()))
            .await
            .map_err(|e| self.history_error(e))?;
        let objects: Vec<DbObject> = rows
            .into_iter()
            .filter_map(
                |r| match (r.first().cloned().flatten(), r.get(1).cloned().flatten()) {
                    (Some(kind), Some(name)) if name != keep => Some(DbObject { kind, name }),
                    _ => None,
                },
            )
            .collect();
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        let sql = dialect.drop_sql(self.driver.schema(), &objects);
        self.driver
            .execute(&sql)
            .await
            .map_err(|e| self.history_error(e))?;
        Ok(objects.into_iter().map(|o| o.name).collect())
    }

    async fn read_table(
        &mut self,
        table: &str,
        columns: &[&str],
        order_by: &str,
    ) -> Result<Option<Vec<Vec<Option<String>>>>> {
        let dialect = self.driver.dialect();
        let found = self
            .driver
            .fetch_text(&dialect.existing_tables_sql(&[table]))
            .await
            .map_err(|e| self.history_error(e))?;
        if found.is_empty() {
            return Ok(None);
        }
        let sql = dialect.read_table_sql(table, columns, order_by);
        let rows = self.driver.fetch_text(&sql).await;
        rows.map(Some).map_err(|e| self.history_error(e))
    }

    async fn list_namespaces(&mut self, what: Namespaces) -> Result<Vec<String>> {
        let dialect = self.driver.dialect();
        let Some(sql) = dialect.list_namespaces_sql(what) else {
            return Err(Error::config(format!(
                "{} has no {}: {}",
                dialect.database_name(),
                what.plural(),
                match (dialect, what) {
                    #[cfg(feature = "mysql")]
                    (Dialect::Mysql, Namespaces::Schemas) => {
                        "on MySQL/MariaDB a schema is a database; use --databases"
                    }
                    _ => "name the targets in a file (--targets) instead",
                }
            )));
        };
        let rows = (self.driver.fetch_text(&sql).await).map_err(|e| self.history_error(e))?;
        Ok(rows
            .into_iter()
            .filter_map(|mut row| row.first_mut()?.take())
            .collect())
    }

    async fn query_text(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>> {
        self.driver.fetch_text(sql).await.map_err(|e| {
            Error::config(format!(
                "--targets-sql `{sql}` failed on `{}`: {}; it must return text columns (name, \
                 url) or (url)",
                self.connection,
                database_message(&e)
            ))
        })
    }

    async fn reopen(&mut self, request: &ConnectRequest) -> Result<bool> {
        let reopened = self.driver.reopen(request).await;
        if !reopened.map_err(|e| self.history_error(e))? {
            return Ok(false);
        }
        self.names = HistoryNames::new(
            self.driver.dialect(),
            self.driver.schema(),
            &request.history_table,
        );
        self.connection = request.name.clone();
        self.known = Known::default();
        Ok(true)
    }

    async fn close(self: Box<Self>) {
        let this = *self;
        if let Some(observer) = this.observer {
            observer.close().await;
        }
        Box::new(this.driver).close().await
    }
}

impl<D: SqlDriver> SqlBackend<D> {
    /// One step, as `run` was asked.
    async fn run_step(&mut self, step: Step<'_>) -> Result<(), StepFailure> {
        let transactional = step.transactional || step.record.is_some();
        match step.body {
            StepBody::Code(code, direction) => {
                self.run_code(code, direction, transactional, step.record)
                    .await
            }
            StepBody::Text(text, parsed) => match step.record {
                Some(change) => {
                    let atomic = Atomic {
                        checks_lock: step.checks_lock,
                        lock_timeout: step.lock_timeout,
                    };
                    self.run_in_transaction(text, Some(change), atomic).await
                }
                None => {
                    let sending = Sending {
                        lock_timeout: step.lock_timeout,
                        resume_at: step.resume_at,
                    };
                    self.run_text(text, parsed, transactional, sending).await
                }
            },
        }
    }
}

/// What a step sent whole in one transaction also carries.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Atomic {
    /// The session-lock check ([`Step::checks_lock`]), which only a driver's
    /// [`SqlDriver::execute_atomically`] can make (PostgreSQL's).
    pub checks_lock: bool,
    /// [`Step::lock_timeout`], for the transaction only (`SET LOCAL`).
    pub lock_timeout: Option<std::time::Duration>,
}

/// The statement that makes `change`, given the step's measured duration (`None`: the
/// database measures it, or there is nothing to measure).
fn change_sql(
    dialect: Dialect,
    names: &HistoryNames,
    change: &HistoryChange,
    elapsed: Option<std::time::Duration>,
) -> String {
    match elapsed {
        Some(elapsed) => dialect.change_sql(names, &change.measured(elapsed)),
        None => dialect.change_sql(names, change),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_escaped_per_dialect() {
        assert_eq!(Dialect::Postgres.literal("it's"), "'it''s'");
        assert_eq!(Dialect::Mysql.literal("a\\'b"), "'a\\\\''b'");
        assert_eq!(Dialect::Mysql.ident("we`ird"), "`we``ird`");
        assert_eq!(Dialect::Sqlite.ident("t"), "\"t\"");
    }

    #[test]
    fn another_tools_table_is_read_quoted_and_as_text() {
        assert_eq!(
            Dialect::Postgres.read_table_sql(
                "goose_db_version",
                &["version_id", "is_applied"],
                "id"
            ),
            "SELECT (\"version_id\")::text, (\"is_applied\")::text FROM \"goose_db_version\" ORDER BY \"id\""
        );
        assert_eq!(
            Dialect::Mysql.read_table_sql("_sqlx_migrations", &["version", "success"], "version"),
            "SELECT CAST(`version` AS CHAR), CAST(`success` AS CHAR) FROM `_sqlx_migrations` ORDER BY `version`"
        );
        // Names are quoted with their quotes doubled, whatever reaches here.
        assert_eq!(
            Dialect::Sqlite.read_table_sql("a\"b", &["v"], "v"),
            "SELECT CAST(\"v\" AS TEXT) FROM \"a\"\"b\" ORDER BY \"v\""
        );
    }

    #[test]
    fn fresh_drops_views_before_tables() {
        let objects = vec![
            DbObject {
                kind: "table".into(),
                name: "a".into(),
            },
            DbObject {
                kind: "view".into(),
                name: "v".into(),
            },
        ];
        let sql = Dialect::Postgres.drop_sql(None, &objects);
        assert_eq!(
            sql,
            "DROP VIEW IF EXISTS \"v\" CASCADE;\nDROP TABLE IF EXISTS \"a\" CASCADE"
        );
    }

    /// A step asked to check the session lock inside its own transaction, on a database
    /// whose driver cannot (SQLite, which has no session lock), is refused before anything
    /// of it runs: never run as if the check had passed.
    #[tokio::test]
    async fn a_step_asking_for_an_in_step_lock_check_the_driver_cannot_make_is_refused() {
        use crate::backend::{Step, StepBody};
        use crate::history::{HistoryChange, NewRecord, RecordState};
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("guard.db").display());
        let request = crate::backend::ConnectRequest {
            name: "default".into(),
            kind: crate::backend::BackendKind::Sqlite,
            url: url.clone(),
            operation: "migrate".into(),
            connect_timeout: std::time::Duration::from_secs(5),
            read_only: false,
            init_sql: None,
            history_table: "dirthara_migrations".into(),
            schema: None,
        };
        let Ok(mut backend) = crate::backend::sqlite::connect(&request).await else {
            panic!("cannot open {url}");
        };
        backend.prepare_history().await.unwrap();
        let record = HistoryChange::Insert(NewRecord {
            version: 1,
            name: "t".into(),
            checksum: "0".into(),
            batch: 1,
            state: RecordState::Applied,
            duration_ms: None,
            applied_by: "test".into(),
        });
        let step = Step {
            body: StepBody::Text("CREATE TABLE t (id INT)", &Default::default()),
            transactional: true,
            record: Some(&record),
            checks_lock: true,
            lock_timeout: None,
            resume_at: 0,
        };
        let failure = backend.run(step).await.unwrap_err();
        assert!(failure.nothing_changed, "{failure:?}");
        assert!(
            failure
                .error
                .message
                .contains("cannot check the session lock"),
            "{failure:?}"
        );
        assert_eq!(backend.read_history().await.unwrap(), Some(vec![]));
        let tables = backend.read_table("t", &["id"], "id").await.unwrap();
        assert_eq!(tables, None, "the step ran");
        backend.close().await;
    }
}
