//! Everything the SQL backends share: the SQL text of the history (per dialect) and one
//! implementation of [`Backend`] over a minimal driver.
//!
//! Values spliced into history statements are integers, hex checksums and names restricted
//! to a safe alphabet at load time; they are still quoted with [`SqlDialect::literal`].

use async_trait::async_trait;

use super::history_tables::{self, Known, Prepared};
use super::{Backend, Capabilities, ConnectRequest, Namespaces, Step};
use super::{StepBody, StepFailure};
use crate::blocking::TableSize;
use crate::error::{Error, Result};
use crate::history::{
    AppliedMigration, AppliedRepeatable, HistoryChange, HistoryDigest, RepeatableChange,
};
use crate::lock::{lease_table, LeaseStore, LockHost, LockSupport, SessionLock};

mod dialect;
mod driver;
mod dump;
mod error;
mod grants;
mod history;
mod lease;
mod observer;
mod rehearse;
mod repeatables;
mod script;
mod side_tables;
mod snapshot;
mod steps;
mod targets_query;

use steps::Sending;

pub(crate) use dialect::{CatalogSql, DbObject, HistoryNames, HistorySql, SqlDialect, SqlSyntax};
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) use driver::text_rows;
pub(crate) use driver::{RecordFn, Sibling, SqlDriver};
pub(crate) use error::{database_error, database_message, DriverError};

/// A [`Backend`] for any SQL database, given its driver.
pub(crate) struct SqlBackend<D: SqlDriver> {
    driver: D,
    connection: String,
    /// The history and meta tables, qualified with the schema resolved at connect.
    names: HistoryNames,
    known: Known,
    /// A connection of our own that asks who blocks a statement while it waits for its table
    /// lock (afterwards the wait is over and the database can no longer say); opened the
    /// first time a step has a table-lock timeout.
    observer: Option<Box<dyn SqlDriver<Error = D::Error>>>,
    /// The role the URL connects as, for the `GRANT` a refusal advises.
    role: String,
    /// The schema a fleet's target works in, which the role must be able to use.
    target_schema: Option<String>,
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
            role: url::Url::parse(&request.url)
                .ok()
                .map(|url| url.username().to_string())
                .filter(|user| !user.is_empty())
                .unwrap_or_else(|| "<role>".to_string()),
            target_schema: request.schema.clone(),
        }
    }

    fn history_error(&self, error: D::Error) -> Error {
        if error.is_permission_denied() {
            let dialect = self.driver.dialect();
            return grants::history_refused(
                dialect,
                &self.connection,
                &self.names,
                &self.role,
                error,
            );
        }
        // A read-only answer (a primary demoted by a failover) or a dropped session: said as
        // the lost connection it is, with why, as a step's error says it.
        let (facts, _) = error.facts();
        if facts.connection_lost {
            let why = (facts.hint.clone()).unwrap_or_else(|| "the session ended".to_string());
            let message = format!(
                "{}; the connection to the database was lost: {why}",
                database_message(&error)
            );
            return Error::history(&self.connection, message).caused_by(error);
        }
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

    async fn read_repeatables(&mut self) -> Result<Vec<AppliedRepeatable>> {
        self.read_repeatable_records().await
    }

    async fn record_repeatable(&mut self, change: &RepeatableChange) -> Result<()> {
        self.write_repeatable_record(change).await
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
                    (SqlDialect::MySql, Namespaces::Schemas) => {
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

    async fn read_schema(&mut self) -> Result<Vec<crate::schema::SchemaObject>> {
        self.dump_objects().await
    }

    async fn baseline_facts(&mut self) -> Result<crate::schema::BaselineFacts> {
        SqlBackend::baseline_facts(self).await
    }

    fn keeps_snapshots(&self) -> bool {
        true
    }

    async fn read_snapshot(&mut self) -> Result<Option<crate::schema::StoredSnapshot>> {
        self.read_stored_snapshot().await
    }

    async fn write_snapshot(&mut self, snapshot: &crate::schema::StoredSnapshot) -> Result<()> {
        self.write_stored_snapshot(snapshot).await
    }

    async fn forget_snapshot(&mut self) -> Result<()> {
        self.forget_stored_snapshot().await
    }

    async fn query_text(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>> {
        let dialect = self.driver.dialect();
        let query = targets_query::one_query(sql, dialect).map_err(Error::config)?;
        let failed = |e: D::Error, connection: &str| {
            let message = targets_query::failed(sql, connection, &database_message(&e));
            Error::config(message).caused_by(e)
        };
        let (begin, end) = targets_query::read_only(dialect);
        if let Err(e) = self.driver.execute(begin).await {
            return Err(failed(e, &self.connection));
        }
        let rows = self.driver.fetch_text(query).await;
        let ended = self.driver.execute(end).await;
        let rows = rows.map_err(|e| failed(e, &self.connection))?;
        ended.map_err(|e| failed(e, &self.connection))?;
        Ok(rows)
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

    fn server_version(&self) -> Option<&str> {
        self.driver.server_version()
    }

    async fn table_sizes(&mut self, tables: &[String]) -> Result<Vec<Option<TableSize>>> {
        let dialect = self.driver.dialect();
        let mut sizes = Vec::with_capacity(tables.len());
        for table in tables {
            let rows = self
                .driver
                .fetch_text(&dialect.table_size_sql(table))
                .await
                .map_err(|e| self.history_error(e))?;
            let number = |row: &[Option<String>], i: usize| -> Option<u64> {
                row.get(i)?.as_deref()?.parse().ok()
            };
            sizes.push(rows.first().and_then(|row| {
                let size = TableSize::new(number(row, 0), number(row, 1)?);
                let relations = number(row, 2).map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX));
                Some(size.with_relations(relations))
            }));
        }
        Ok(sizes)
    }

    async fn rehearse(&mut self, rehearsal: &dirthara_ddl::Rehearsal) -> Option<bool> {
        rehearse::rehearse(&mut self.driver, rehearsal).await
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
    dialect: SqlDialect,
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
mod tests;
