//! Everything the SQL backends share: the SQL text of the history (per dialect) and one
//! implementation of [`Backend`] over a minimal driver.
//!
//! Values spliced into history statements are integers, hex checksums and names restricted
//! to a safe alphabet at load time; they are still quoted with [`Dialect::literal`].

use async_trait::async_trait;

use super::{database_error, database_message, Backend, BackendKind, SessionLock, StepFailure};
use crate::code::{Connection, RustMigration};
use crate::lock::lease::LeaseStore;
use crate::migration::Direction;
use crate::source::sql;

mod dialect;
mod lease;
use crate::error::{DatabaseError, Error, Result};
use crate::history::{check_layout, foreign_history, AppliedMigration, HistoryChange, RecordState};

pub(crate) use dialect::{DbObject, Dialect, HistoryNames};

/// Rows whose columns are all text (or NULL), as the history queries select them.
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
                .map(|i| row.try_get::<Option<String>, _>(i))
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

    /// A second connection to the same database with the same settings (the lease store's).
    async fn open_sibling(&self) -> Result<Box<dyn SqlDriver>, sqlx::Error>;

    /// Runs a query whose columns are all text (or NULL).
    async fn fetch_text(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, sqlx::Error>;

    /// Runs `step` and then the statement `record` builds (given the step's measured
    /// duration, or `None` when the database measures it) so that both commit or neither
    /// does. Without `record`, just runs the step in a transaction. On failure the
    /// transaction is rolled back before this returns.
    async fn execute_atomically(
        &mut self,
        step: &str,
        record: Option<&RecordFn<'_>>,
    ) -> Result<(), StepFailure> {
        let begun = self.execute(self.dialect().begin()).await;
        begun.map_err(|e| StepFailure::new(database_error(&e, None)))?;
        let started = std::time::Instant::now();
        let mut result = self
            .execute(step)
            .await
            .map_err(|e| database_error(&e, Some((step, 0))));
        if let (Ok(()), Some(record)) = (&result, record) {
            result = self
                .execute(&record(Some(started.elapsed())))
                .await
                .map_err(|e| database_error(&e, None));
        }
        match result {
            Ok(()) => self
                .execute("COMMIT")
                .await
                .map_err(|e| StepFailure::new(database_error(&e, None))),
            Err(error) => {
                // The step's own error is what matters; a failed rollback ends with the session.
                let _ = self.execute("ROLLBACK").await;
                Err(StepFailure::new(error))
            }
        }
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

    /// Whether DDL can be rolled back (false on MySQL, where it commits implicitly).
    fn transactional_ddl(&self) -> bool {
        true
    }

    fn session_lock(&mut self) -> Option<&mut dyn SessionLock> {
        None
    }

    /// The connection a Rust migration receives.
    fn connection(&mut self) -> Connection<'_>;

    async fn close(self: Box<Self>);
}

/// A [`Backend`] for any SQL database, given its driver.
pub(crate) struct SqlBackend<D> {
    pub driver: D,
    pub kind: BackendKind,
    pub connection: String,
    /// The history tables this connection has already found present with a layout this
    /// build understands. Only dirthara creates or drops them, and only under the lock this
    /// session holds, so asking again on the same connection would only cost round trips.
    pub ready: Vec<String>,
}

impl<D: SqlDriver> SqlBackend<D> {
    /// A MySQL script written for the mysql client (`DELIMITER $$ ... $$`), split as that
    /// client splits it; `None` for text the server takes whole. (The loader already refused
    /// a script that does not split.)
    fn client_script<'t>(&self, text: &'t str) -> Option<Vec<sql::Statement<'t>>> {
        if self.driver.dialect() != Dialect::Mysql || !sql::has_client_delimiter(text) {
            return None;
        }
        sql::mysql_client_statements(text).ok()
    }

    /// Runs a client script statement by statement, as the mysql client would.
    async fn run_client_script(
        &mut self,
        statements: &[sql::Statement<'_>],
        transactional: bool,
    ) -> Result<(), StepFailure> {
        let failed = |e: &sqlx::Error| StepFailure::new(database_error(e, None));
        self.driver.before_step().await.map_err(|e| failed(&e))?;
        if transactional {
            let begun = self.driver.execute(self.driver.dialect().begin()).await;
            begun.map_err(|e| failed(&e))?;
        }
        for statement in statements {
            if let Err(error) = self.driver.execute(statement.text).await {
                let failure =
                    self.locate_mysql_error(failed(&error), statement.text, statement.line);
                self.driver.clean_up_after_failure().await;
                return Err(failure);
            }
        }
        if transactional {
            self.driver
                .execute("COMMIT")
                .await
                .map_err(|e| failed(&e))?;
        }
        Ok(())
    }

    /// MySQL says where a syntax error is as `... at line N` of the statement that failed;
    /// that statement is known when the text is one statement (starting at `first_line` of
    /// the file) or was split by the client-script reader.
    fn locate_mysql_error(
        &self,
        mut failure: StepFailure,
        text: &str,
        first_line: usize,
    ) -> StepFailure {
        if self.driver.dialect() != Dialect::Mysql || failure.error.line.is_some() {
            return failure;
        }
        let Some(line) = failure
            .error
            .message
            .rsplit_once(" at line ")
            .and_then(|(_, n)| n.trim().parse::<usize>().ok())
        else {
            return failure;
        };
        // Lines count from the start of the text sent, comments included.
        if sql::split_statements(text, sql::SqlDialect::MySql).len() == 1 {
            failure.error.line = Some(first_line + line - 1);
        }
        failure
    }

    fn history_error(&self, error: sqlx::Error) -> Error {
        Error::history(&self.connection, database_message(&error))
    }

    fn names(&self, table: &str) -> HistoryNames {
        HistoryNames::new(self.driver.dialect(), self.driver.schema(), table)
    }

    /// Which of the history table and its meta table exist.
    async fn existing(&mut self, table: &str) -> Result<(bool, bool)> {
        let meta = Dialect::meta_table(table);
        let sql = self
            .driver
            .dialect()
            .existing_history_sql(&self.names(table));
        let rows = self
            .driver
            .fetch_text(&sql)
            .await
            .map_err(|e| self.history_error(e))?;
        let has = |name: &str| {
            rows.iter()
                .any(|r| r.first().and_then(|c| c.as_deref()) == Some(name))
        };
        Ok((has(table), has(&meta)))
    }

    /// The layout of a history that is already there, asked in one round trip: the meta
    /// table's layout row, and an empty read of the history table that fails if it is missing.
    /// `None` when either is missing or unreadable; the caller then looks step by step, which
    /// also says precisely what is wrong.
    async fn probe_layout(&mut self, table: &str) -> Option<i64> {
        let names = self.names(table);
        let sql = format!(
            "{}; SELECT 1 FROM {} WHERE 1 = 0",
            self.driver.dialect().layout_sql(&names),
            names.history
        );
        let rows = self.driver.fetch_text(&sql).await.ok()?;
        match rows.as_slice() {
            [row] => row.first()?.as_deref()?.parse().ok(),
            _ => None,
        }
    }

    async fn layout_version(&mut self, table: &str) -> Result<i64> {
        let sql = self.driver.dialect().layout_sql(&self.names(table));
        let rows = self
            .driver
            .fetch_text(&sql)
            .await
            .map_err(|e| self.history_error(e))?;
        let value = rows.first().and_then(|r| r.first().cloned().flatten());
        value.and_then(|v| v.parse().ok()).ok_or_else(|| {
            Error::history(
                &self.connection,
                format!(
                    "`{table}_meta` has no readable layout_version; it was not written by dirthara"
                ),
            )
        })
    }

    async fn select_history(&mut self, table: &str) -> Result<Vec<AppliedMigration>> {
        let sql = self.driver.dialect().select_history_sql(&self.names(table));
        let rows = self
            .driver
            .fetch_text(&sql)
            .await
            .map_err(|e| self.history_error(e))?;
        rows.into_iter()
            .map(|row| {
                parse_history_row(&row).ok_or_else(|| {
                    Error::history(
                        &self.connection,
                        format!("`{table}` has a malformed row: {row:?}"),
                    )
                })
            })
            .collect()
    }
}

fn parse_history_row(row: &[Option<String>]) -> Option<AppliedMigration> {
    let text = |i: usize| row.get(i).cloned().flatten();
    Some(AppliedMigration {
        version: text(0)?.parse().ok()?,
        name: text(1)?,
        checksum: text(2)?,
        batch: text(3)?.parse().ok()?,
        state: RecordState::parse(&text(4)?)?,
        applied_at: text(5).unwrap_or_default(),
        duration_ms: text(6)?.parse().ok()?,
        applied_by: text(7).unwrap_or_default(),
    })
}

#[async_trait]
impl<D: SqlDriver> Backend for SqlBackend<D> {
    fn kind(&self) -> BackendKind {
        self.kind
    }

    fn connection(&self) -> &str {
        &self.connection
    }

    async fn read_history(&mut self, table: &str) -> Result<Option<Vec<AppliedMigration>>> {
        if self.ready.iter().any(|t| t == table) {
            return self.select_history(table).await.map(Some);
        }
        let (history, meta) = self.existing(table).await?;
        if meta {
            let layout = self.layout_version(table).await?;
            check_layout(&self.connection, table, layout)?;
        }
        if !history {
            return Ok(None);
        }
        if !meta {
            return Err(foreign_history(&self.connection, table));
        }
        self.ready.push(table.to_string());
        self.select_history(table).await.map(Some)
    }

    async fn prepare_history(&mut self, table: &str) -> Result<()> {
        if self.ready.iter().any(|t| t == table) {
            return Ok(());
        }
        // The usual case, every run after the first: both tables are there.
        if let Some(layout) = self.probe_layout(table).await {
            check_layout(&self.connection, table, layout)?;
            self.ready.push(table.to_string());
            return Ok(());
        }
        let (history, meta) = self.existing(table).await?;
        let dialect = self.driver.dialect();
        let names = self.names(table);
        match (history, meta) {
            (true, false) => return Err(foreign_history(&self.connection, table)),
            (_, true) => {
                let layout = self.layout_version(table).await?;
                check_layout(&self.connection, table, layout)?;
                // Layout 1 is the first; later layouts add their in-place upgrades here.
            }
            (false, false) => {
                let sql = dialect.create_meta_sql(&names);
                self.driver
                    .execute(&sql)
                    .await
                    .map_err(|e| self.history_error(e))?;
            }
        }
        if !history {
            let sql = dialect.create_history_sql(&names);
            self.driver
                .execute(&sql)
                .await
                .map_err(|e| self.history_error(e))?;
        }
        self.ready.push(table.to_string());
        Ok(())
    }

    fn transactional_ddl(&self) -> bool {
        self.driver.transactional_ddl()
    }

    async fn run_step(&mut self, text: &str, transactional: bool) -> Result<(), StepFailure> {
        if let Some(statements) = self.client_script(text) {
            return self.run_client_script(&statements, transactional).await;
        }
        if transactional {
            return self
                .driver
                .execute_atomically(text, None)
                .await
                .map_err(|failure| self.locate_mysql_error(failure, text, 1));
        }
        let prepared = self.driver.before_step().await;
        prepared.map_err(|e| StepFailure::new(database_error(&e, None)))?;
        match self.driver.execute(text).await {
            Ok(()) => Ok(()),
            Err(error) => {
                let failure = StepFailure::new(database_error(&error, Some((text, 0))));
                self.driver.clean_up_after_failure().await;
                Err(self.locate_mysql_error(failure, text, 1))
            }
        }
    }

    async fn run_step_recorded(
        &mut self,
        text: &str,
        table: &str,
        change: &HistoryChange,
    ) -> Result<(), StepFailure> {
        let dialect = self.driver.dialect();
        let names = self.names(table);
        let record = |elapsed: Option<std::time::Duration>| match elapsed {
            Some(elapsed) => dialect.change_sql(&names, &change.measured(elapsed)),
            None => dialect.change_sql(&names, change),
        };
        self.driver.execute_atomically(text, Some(&record)).await
    }

    async fn run_code(
        &mut self,
        code: &dyn RustMigration,
        direction: Direction,
        transactional: bool,
        record: Option<(&str, &HistoryChange)>,
    ) -> Result<(), StepFailure> {
        let dialect = self.driver.dialect();
        let failed = |e: sqlx::Error| StepFailure::new(database_error(&e, None));
        self.driver.before_step().await.map_err(failed)?;
        if transactional {
            self.driver.execute(dialect.begin()).await.map_err(failed)?;
        }
        let started = std::time::Instant::now();
        let ran = match direction {
            Direction::Up => code.up(self.driver.connection()).await,
            Direction::Down => code.down(self.driver.connection()).await,
        };
        let mut result =
            ran.map_err(|e| StepFailure::new(DatabaseError::from_message(e.to_string())));
        if let (Ok(()), Some((table, change))) = (&result, record) {
            let sql = dialect.change_sql(&self.names(table), &change.measured(started.elapsed()));
            result = self.driver.execute(&sql).await.map_err(failed);
        }
        if transactional && result.is_ok() {
            result = self.driver.execute("COMMIT").await.map_err(failed);
        }
        if result.is_err() {
            self.driver.clean_up_after_failure().await;
        }
        result
    }

    async fn record(&mut self, table: &str, change: &HistoryChange) -> Result<()> {
        let sql = self.driver.dialect().change_sql(&self.names(table), change);
        self.driver
            .execute(&sql)
            .await
            .map_err(|e| self.history_error(e))
    }

    async fn record_all(&mut self, table: &str, changes: &[HistoryChange]) -> Result<()> {
        if let [one] = changes {
            return self.record(table, one).await;
        }
        let dialect = self.driver.dialect();
        let names = self.names(table);
        let mut sql = dialect.begin().to_string();
        for change in changes {
            sql.push_str("; ");
            sql.push_str(&dialect.change_sql(&names, change));
        }
        sql.push_str("; COMMIT");
        let sent = self.driver.execute(&sql).await;
        if sent.is_err() {
            // A statement failed inside the transaction: end it, so nothing half-done stays.
            self.driver.clean_up_after_failure().await;
        }
        sent.map_err(|e| self.history_error(e))
    }

    async fn drop_all(&mut self, keep: &[String]) -> Result<Vec<String>> {
        // The history goes too (unless kept): look again before using it.
        self.ready.clear();
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
                    (Some(kind), Some(name)) if !keep.contains(&name) => {
                        Some(DbObject { kind, name })
                    }
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

    fn session_lock(&mut self) -> Option<&mut dyn SessionLock> {
        self.driver.session_lock()
    }

    async fn open_lease_store(&mut self, table: &str) -> Result<Box<dyn LeaseStore>> {
        // Its own connection: the heartbeat renews while a migration runs on ours.
        let driver = self.driver.open_sibling().await.map_err(|e| {
            Error::new(crate::ErrorKind::Connection {
                connection: self.connection.clone(),
                message: database_message(&e),
            })
        })?;
        let store =
            lease::SqlLeaseStore::open(driver, table.to_string(), self.connection.clone()).await?;
        Ok(Box::new(store))
    }

    async fn close(self: Box<Self>) {
        Box::new(self.driver).close().await
    }

    async fn read_rows(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>> {
        self.driver
            .fetch_text(sql)
            .await
            .map_err(|e| self.history_error(e))
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
    fn history_rows_parse_and_malformed_rows_do_not() {
        let row: Vec<Option<String>> = [
            "7",
            "init",
            "ab",
            "2",
            "applied",
            "2024-01-01T00:00:00Z",
            "12",
            "h:1",
        ]
        .iter()
        .map(|s| Some(s.to_string()))
        .collect();
        let parsed = parse_history_row(&row).unwrap();
        assert_eq!(
            (parsed.version, parsed.batch, parsed.state),
            (7, 2, RecordState::Applied)
        );
        let mut bad = row.clone();
        bad[4] = Some("exploded".into());
        assert!(parse_history_row(&bad).is_none());
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
}
