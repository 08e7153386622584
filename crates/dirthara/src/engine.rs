//! The engine: the one place that decides *when* things happen. Every command — from the
//! library or the CLI — runs through [`Migrator`], so there is exactly one apply loop.
//!
//! A locked command goes: load and validate migrations (no I/O on the database) → resolve
//! the lock strategy (refusing SQLite-with-locking before connecting) → connect the history
//! connection → take the lock → read the history → plan → run each step, confirming the lock
//! before each → release the lock on every path, attaching a release failure to the primary
//! error instead of replacing it.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::watch;

use crate::adopt::{AdoptSource, AdoptionReport};
use crate::backend::{Backend, BackendKind, ConnectRequest, Connector, UrlConnector};
use crate::code::RustMigration;
use crate::config::{validate_table_name, Config, LockWait};
use crate::error::{Error, ErrorKind, Result};
use crate::events::{Event, EventSink};
use crate::history::AppliedMigration;
use crate::lock::lease::{acquire_lease, LeaseGuard, LeaseRequest};
use crate::lock::{
    acquire_session_lock, lease_table, resolve_strategy, LockTarget, Strategy, LOCK_NAME,
};
use crate::migration::{Direction, Migration};
use crate::plan::{self, Command, PlanOptions};
use crate::report::{Operation, Preview, PreviewStep, RunReport};

/// What `resolve` records after an operator fixed a migration by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// The dirty migration's changes are in place: mark it applied.
    Applied,
    /// The dirty migration's changes are not in place: forget it.
    RolledBack,
    /// The applied migration's file was edited on purpose: record its new checksum.
    AcceptChecksum,
}

/// Runs migrations. Cheap to build; every operation opens and closes its own connections.
///
/// # Examples
///
/// ```no_run
/// # async fn run() -> Result<(), dirthara::Error> {
/// use dirthara::{Config, Migrator};
///
/// let mut config = Config::with_url("postgres://app@db/app");
/// config.directories = vec!["migrations".into()];
/// let report = Migrator::new(config).migrate().await?;
/// println!("applied {} migration(s)", report.applied.len());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Migrator {
    config: Config,
    events: EventSink,
    connector: Arc<dyn Connector>,
    extra: Vec<Migration>,
    /// Rust migrations by version; `extra` holds their planner records.
    code: BTreeMap<i64, Arc<dyn RustMigration>>,
    shutdown: Option<watch::Receiver<bool>>,
}

impl Migrator {
    pub fn new(config: Config) -> Self {
        Migrator {
            config,
            events: EventSink::discard(),
            connector: Arc::new(UrlConnector),
            extra: Vec::new(),
            code: BTreeMap::new(),
            shutdown: None,
        }
    }

    /// Adds a migration written in Rust (see [`RustMigration`]), ordered by version among
    /// the file migrations.
    pub fn with_rust_migration(mut self, migration: impl RustMigration + 'static) -> Self {
        self.extra.push(crate::code::describe(&migration));
        self.code.insert(migration.version(), Arc::new(migration));
        self
    }

    /// Receives every [`Event`] as it happens.
    ///
    /// # Examples
    ///
    /// ```
    /// use dirthara::{Event, EventSink};
    ///
    /// let sink = EventSink::new(|event| {
    ///     if let Event::MigrationFinished { version, duration, .. } = event {
    ///         eprintln!("migrated {version} in {duration:?}");
    ///     }
    /// });
    /// let migrator = dirthara::Migrator::new(dirthara::Config::with_url("sqlite:app.db"))
    ///     .with_events(sink);
    /// ```
    pub fn with_events(mut self, events: EventSink) -> Self {
        self.events = events;
        self
    }

    /// Adds migrations defined in code (or embedded with `embed_migrations!`), merged with
    /// those of the configured directories.
    ///
    /// # Examples
    ///
    /// ```
    /// use dirthara::Migration;
    ///
    /// let mut config = dirthara::Config::with_url("sqlite:app.db");
    /// config.directories.clear();
    /// let migrator = dirthara::Migrator::new(config).with_migrations([
    ///     Migration::new(1, "create_users", "CREATE TABLE users (id INT)")
    ///         .with_down("DROP TABLE users"),
    /// ]);
    /// assert_eq!(migrator.load().unwrap().len(), 1);
    /// ```
    pub fn with_migrations(mut self, migrations: impl IntoIterator<Item = Migration>) -> Self {
        self.extra.extend(migrations);
        self
    }

    /// When the receiver turns `true`, the running step finishes and is recorded, and the
    /// command stops with `INTERRUPTED` before the next one.
    ///
    /// # Examples
    ///
    /// ```
    /// let (stop, shutdown) = tokio::sync::watch::channel(false);
    /// let migrator = dirthara::Migrator::new(dirthara::Config::with_url("sqlite:app.db"))
    ///     .with_shutdown(shutdown);
    /// // On SIGTERM: `stop.send(true)`.
    /// # drop(stop);
    /// ```
    pub fn with_shutdown(mut self, shutdown: watch::Receiver<bool>) -> Self {
        self.shutdown = Some(shutdown);
        self
    }

    /// Replaces how connections are opened (tests, custom drivers).
    pub fn with_connector(mut self, connector: Arc<dyn Connector>) -> Self {
        self.connector = connector;
        self
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Applies every pending migration, in version order, as one new batch.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), dirthara::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # std::fs::write(dir.path().join("1_users.up.sql"), "CREATE TABLE users (id INT)").unwrap();
    /// # std::fs::write(dir.path().join("1_users.down.sql"), "DROP TABLE users").unwrap();
    /// # let mut config = dirthara::Config::with_url(format!("sqlite:{}", dir.path().join("app.db").display()));
    /// # config.directories = vec![dir.path().to_path_buf()];
    /// # config.locking = dirthara::Locking::Off; // SQLite has no session lock
    /// # let migrator = dirthara::Migrator::new(config);
    /// let report = migrator.migrate().await?;
    /// assert_eq!(report.applied[0].name, "users");
    /// assert_eq!(report.batch, Some(1));
    /// // A second run finds nothing to do.
    /// assert!(migrator.migrate().await?.applied.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn migrate(&self) -> Result<RunReport> {
        self.run(Command::Migrate).await
    }

    /// Reverses migrations, newest first (see [`plan::RollbackScope`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), dirthara::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # std::fs::write(dir.path().join("1_users.up.sql"), "CREATE TABLE users (id INT)").unwrap();
    /// # std::fs::write(dir.path().join("1_users.down.sql"), "DROP TABLE users").unwrap();
    /// # let mut config = dirthara::Config::with_url(format!("sqlite:{}", dir.path().join("app.db").display()));
    /// # config.directories = vec![dir.path().to_path_buf()];
    /// # config.locking = dirthara::Locking::Off; // SQLite has no session lock
    /// # let migrator = dirthara::Migrator::new(config);
    /// migrator.migrate().await?;
    /// let report = migrator.rollback(dirthara::RollbackScope::LastBatch).await?;
    /// assert_eq!(report.reverted.len(), 1);
    /// # Ok(()) }
    /// ```
    pub async fn rollback(&self, scope: plan::RollbackScope) -> Result<RunReport> {
        self.run(Command::Rollback(scope)).await
    }

    /// Moves the database to `version` (0: before the first migration).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), dirthara::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # std::fs::write(dir.path().join("1_users.up.sql"), "CREATE TABLE users (id INT)").unwrap();
    /// # std::fs::write(dir.path().join("1_users.down.sql"), "DROP TABLE users").unwrap();
    /// # let mut config = dirthara::Config::with_url(format!("sqlite:{}", dir.path().join("app.db").display()));
    /// # config.directories = vec![dir.path().to_path_buf()];
    /// # config.locking = dirthara::Locking::Off; // SQLite has no session lock
    /// # let migrator = dirthara::Migrator::new(config);
    /// migrator.migrate_to(1).await?;
    /// let report = migrator.migrate_to(0).await?; // before the first migration
    /// assert_eq!(report.reverted[0].version, 1);
    /// # Ok(()) }
    /// ```
    pub async fn migrate_to(&self, version: i64) -> Result<RunReport> {
        self.run(Command::MigrateTo(version)).await
    }

    /// Reverses every applied migration, then applies all, under one lock.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), dirthara::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # std::fs::write(dir.path().join("1_users.up.sql"), "CREATE TABLE users (id INT)").unwrap();
    /// # std::fs::write(dir.path().join("1_users.down.sql"), "DROP TABLE users").unwrap();
    /// # let mut config = dirthara::Config::with_url(format!("sqlite:{}", dir.path().join("app.db").display()));
    /// # config.directories = vec![dir.path().to_path_buf()];
    /// # config.locking = dirthara::Locking::Off; // SQLite has no session lock
    /// # let migrator = dirthara::Migrator::new(config);
    /// migrator.migrate().await?;
    /// let report = migrator.refresh().await?;
    /// assert_eq!((report.reverted.len(), report.applied.len()), (1, 1));
    /// # Ok(()) }
    /// ```
    pub async fn refresh(&self) -> Result<RunReport> {
        self.run(Command::Refresh).await
    }

    /// Drops every table of the history connection's database, then applies all, under one
    /// lock. Destroys data.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), dirthara::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # std::fs::write(dir.path().join("1_users.up.sql"), "CREATE TABLE users (id INT)").unwrap();
    /// # std::fs::write(dir.path().join("1_users.down.sql"), "DROP TABLE users").unwrap();
    /// # let mut config = dirthara::Config::with_url(format!("sqlite:{}", dir.path().join("app.db").display()));
    /// # config.directories = vec![dir.path().to_path_buf()];
    /// # config.locking = dirthara::Locking::Off; // SQLite has no session lock
    /// # let migrator = dirthara::Migrator::new(config);
    /// let report = migrator.fresh().await?;
    /// assert_eq!(report.applied.len(), 1);
    /// # Ok(()) }
    /// ```
    pub async fn fresh(&self) -> Result<RunReport> {
        self.run(Command::Fresh).await
    }

    /// Runs any planned command under the lock.
    pub async fn run(&self, command: Command) -> Result<RunReport> {
        let available = self.load()?;
        self.config.validate()?;
        self.check_connections(&available)?;
        let mut session = self.open_session(command.name()).await?;
        let mut report = RunReport {
            operation: command.into(),
            lock: session.strategy.name().to_string(),
            ..RunReport::default()
        };
        let result = session.run_command(&available, command, &mut report);
        #[cfg(feature = "tracing")]
        let result = tracing::Instrument::instrument(
            result,
            tracing::info_span!(target: "dirthara", "dirthara.command", operation = command.name()),
        );
        let result = result.await;
        session.finish(result.map(|()| report)).await
    }

    /// Records every migration up to `version` as applied without running it (adopting a
    /// database that already has their effects).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), dirthara::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # std::fs::write(dir.path().join("1_users.up.sql"), "CREATE TABLE users (id INT)").unwrap();
    /// # std::fs::write(dir.path().join("1_users.down.sql"), "DROP TABLE users").unwrap();
    /// # let mut config = dirthara::Config::with_url(format!("sqlite:{}", dir.path().join("app.db").display()));
    /// # config.directories = vec![dir.path().to_path_buf()];
    /// # config.locking = dirthara::Locking::Off; // SQLite has no session lock
    /// # let migrator = dirthara::Migrator::new(config);
    /// // The database already has the `users` table: record migration 1 without running it.
    /// let report = migrator.baseline(1).await?;
    /// assert_eq!(report.recorded[0].version, 1);
    /// assert!(migrator.migrate().await?.applied.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn baseline(&self, version: i64) -> Result<RunReport> {
        let available = self.load()?;
        let mut session = self.open_session("baseline").await?;
        let mut report = RunReport {
            operation: Operation::Baseline,
            lock: session.strategy.name().to_string(),
            ..RunReport::default()
        };
        let result = session.baseline(&available, version, &mut report).await;
        session.finish(result.map(|()| report)).await
    }

    /// Adopts another tool's history (`baseline --from <tool>`): under the lock, reads that
    /// tool's history table on the history connection and records every migration it applied
    /// as applied here, with the checksums of the files here, in one batch (in one
    /// transaction on SQL databases). The other tool's table is left as it was. Refused (see
    /// [`plan::AdoptionRefusal`]) when dirthara's history already has records, the other
    /// history has a failed or dirty entry, or an applied version has no file here.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), dirthara::Error> {
    /// use dirthara::adopt::{AdoptSource, Tool};
    ///
    /// let migrator = dirthara::Migrator::new(dirthara::Config::with_url("postgres://app@db/app"));
    /// // sqlx applied migrations 1 and 2 here: record them; `migrate` then applies only 3.
    /// let report = migrator.baseline_from(&AdoptSource::new(Tool::Sqlx)).await?;
    /// assert_eq!(report.recorded.len(), 2);
    /// # Ok(()) }
    /// ```
    pub async fn baseline_from(&self, source: &AdoptSource) -> Result<AdoptionReport> {
        source.check()?;
        let available = self.load()?;
        let mut session = self.open_session("baseline").await?;
        let result = session.baseline_from(&available, source).await;
        session.finish(result).await
    }

    /// What `baseline --from` would record now, reading both histories without the lock
    /// and changing nothing.
    pub async fn preview_baseline_from(&self, source: &AdoptSource) -> Result<AdoptionReport> {
        source.check()?;
        let available = self.load()?;
        let mut history = self.connect_history("preview").await?;
        let result = async {
            let foreign = crate::adopt::read(history.as_mut(), source).await?;
            let applied = history
                .read_history(&self.config.history_table)
                .await?
                .unwrap_or_default();
            let planned = plan::plan_adoption(&available, &applied, &foreign)?;
            Ok(AdoptionReport::new(source, &planned, "none"))
        }
        .await;
        history.close().await;
        result
    }

    /// Records what an operator fixed by hand (see [`Resolution`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), dirthara::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # std::fs::write(dir.path().join("1_users.up.sql"), "CREATE TABLE users (id INT)").unwrap();
    /// # std::fs::write(dir.path().join("1_users.down.sql"), "DROP TABLE users").unwrap();
    /// # let mut config = dirthara::Config::with_url(format!("sqlite:{}", dir.path().join("app.db").display()));
    /// # config.directories = vec![dir.path().to_path_buf()];
    /// # config.locking = dirthara::Locking::Off; // SQLite has no session lock
    /// # let migrator = dirthara::Migrator::new(config);
    /// migrator.migrate().await?;
    /// std::fs::write(dir.path().join("1_users.up.sql"), "CREATE TABLE users (id BIGINT)").unwrap();
    /// assert_eq!(migrator.migrate().await.unwrap_err().code(), dirthara::Code::ChecksumMismatch);
    /// migrator.resolve(1, dirthara::Resolution::AcceptChecksum).await?;
    /// assert!(migrator.migrate().await?.applied.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn resolve(&self, version: i64, resolution: Resolution) -> Result<RunReport> {
        let available = self.load()?;
        let mut session = self.open_session("resolve").await?;
        let mut report = RunReport {
            operation: Operation::Resolve,
            lock: session.strategy.name().to_string(),
            ..RunReport::default()
        };
        let result = session
            .resolve(&available, version, resolution, &mut report)
            .await;
        session.finish(result.map(|()| report)).await
    }

    /// The plan `command` would run now, with each step's text. Takes no lock and changes
    /// nothing, so it may be stale as soon as it returns.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), dirthara::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # std::fs::write(dir.path().join("1_users.up.sql"), "CREATE TABLE users (id INT)").unwrap();
    /// # std::fs::write(dir.path().join("1_users.down.sql"), "DROP TABLE users").unwrap();
    /// # let mut config = dirthara::Config::with_url(format!("sqlite:{}", dir.path().join("app.db").display()));
    /// # config.directories = vec![dir.path().to_path_buf()];
    /// # config.locking = dirthara::Locking::Off; // SQLite has no session lock
    /// # let migrator = dirthara::Migrator::new(config);
    /// let preview = migrator.preview(dirthara::Command::Migrate).await?;
    /// assert_eq!(preview.steps[0].sql, "CREATE TABLE users (id INT)");
    /// # Ok(()) }
    /// ```
    pub async fn preview(&self, command: Command) -> Result<Preview> {
        let available = self.load()?;
        let applied = self.read_history_unlocked("preview").await?;
        let planned = plan::plan(&available, &applied, command, self.plan_options())?;
        let connections: Vec<&str> = std::iter::once(self.config.history_connection.as_str())
            .chain(
                planned
                    .steps
                    .iter()
                    .map(|s| s.migration.connection.as_str()),
            )
            .collect();
        Ok(Preview {
            operation: command.into(),
            init_sql: (self.config.init_sql.iter())
                .filter(|(name, _)| connections.contains(&name.as_str()))
                .map(|(name, sql)| (name.clone(), sql.clone()))
                .collect(),
            notice: crate::report::PREVIEW_NOTICE.to_string(),
            drop_all: planned.drop_all,
            batch: planned
                .steps
                .iter()
                .any(|s| s.direction == Direction::Up)
                .then_some(planned.batch),
            steps: planned
                .steps
                .iter()
                .map(|s| PreviewStep {
                    version: s.migration.version,
                    name: s.migration.name.clone(),
                    direction: s.direction,
                    connection: s.migration.connection.clone(),
                    transactional: s.migration.transactional,
                    own_transaction: s.migration.own_transaction.clone(),
                    reverses_nothing: s.direction == Direction::Down && s.migration.down_is_blank,
                    out_of_order: s.out_of_order,
                    sql: s.text().to_string(),
                })
                .collect(),
            warnings: planned.warnings,
        })
    }

    fn plan_options(&self) -> PlanOptions {
        PlanOptions {
            strict: self.config.strict,
        }
    }

    fn history_kind(&self) -> Result<BackendKind> {
        self.config.validate()?;
        BackendKind::from_url(
            self.config
                .connection_url(&self.config.history_connection)?,
        )
    }

    async fn connect(
        &self,
        name: &str,
        operation: &str,
        read_only: bool,
    ) -> Result<Box<dyn Backend>> {
        let request = ConnectRequest {
            name: name.to_string(),
            url: self.config.connection_url(name)?.to_string(),
            operation: operation.to_string(),
            connect_timeout: self.config.connect_timeout,
            read_only,
            init_sql: self.config.init_sql.get(name).cloned(),
        };
        self.connector.connect(&request, &self.events).await
    }

    /// The history connection for a command that only reads (status, preview, unlock).
    async fn connect_history(&self, operation: &str) -> Result<Box<dyn Backend>> {
        self.history_kind()?;
        self.connect(&self.config.history_connection, operation, true)
            .await
    }

    fn lease_table(&self) -> String {
        lease_table(&self.config.history_table)
    }

    async fn read_history_unlocked(&self, operation: &str) -> Result<Vec<AppliedMigration>> {
        let mut history = self.connect_history(operation).await?;
        let result = history.read_history(&self.config.history_table).await;
        history.close().await;
        Ok(result?.unwrap_or_default())
    }

    /// Connects the history connection and takes the lock: the first thing done on the database.
    async fn open_session(&self, operation: &str) -> Result<Session<'_>> {
        validate_table_name(&self.config.history_table)?;
        let kind = self.history_kind()?;
        let connection = self.config.history_connection.clone();
        let strategy = resolve_strategy(self.config.locking, kind, &connection)?;
        let mut history = self.connect(&connection, operation, false).await?;
        let wait = self.config.lock_wait.unwrap_or(strategy.default_wait());
        let mut lease = None;
        match strategy {
            Strategy::Off => self.events.emit(Event::Unlocked {
                connection: connection.clone(),
            }),
            Strategy::Session => {
                let acquired = match history.session_lock() {
                    Some(lock) => {
                        let target = LockTarget {
                            connection: &connection,
                            table: &self.config.history_table,
                            wait,
                        };
                        acquire_session_lock(lock, &target, &self.events, self.shutdown.as_ref())
                            .await
                    }
                    None => Err(Error::new(ErrorKind::LockFailed {
                        lock: LOCK_NAME.to_string(),
                        connection: connection.clone(),
                        reason: "this connection offers no session lock".to_string(),
                    })),
                };
                if let Err(error) = acquired {
                    history.close().await;
                    return Err(error);
                }
            }
            Strategy::Lease => match self.acquire_lease(history.as_mut(), operation, wait).await {
                Ok(guard) => lease = Some(guard),
                Err(error) => {
                    history.close().await;
                    return Err(error);
                }
            },
        }
        Ok(Session {
            migrator: self,
            operation: operation.to_string(),
            history,
            others: BTreeMap::new(),
            strategy,
            lease,
            completed: Vec::new(),
            unrecorded: None,
        })
    }

    async fn acquire_lease(
        &self,
        history: &mut dyn Backend,
        operation: &str,
        wait: LockWait,
    ) -> Result<LeaseGuard> {
        let mut store = history.open_lease_store(&self.lease_table()).await?;
        let request = LeaseRequest::new(operation, self.config.lock_ttl);
        let acquired = acquire_lease(
            store.as_mut(),
            &request,
            &self.config.history_connection,
            wait,
            &self.events,
            self.shutdown.as_ref(),
        )
        .await;
        match acquired {
            Ok(()) => Ok(LeaseGuard::start(store, &request)),
            Err(error) => {
                store.close().await;
                Err(error)
            }
        }
    }
}

mod inspect;
mod load;
mod session;

use session::Session;

#[cfg(test)]
mod tests;
