//! The engine: the one place that decides *when* things happen. Every command — from the
//! library or the CLI — runs through [`Migrator`], so there is exactly one apply loop.
//!
//! A locked command goes: load and validate migrations (no I/O on the database) → resolve
//! the lock strategy (refusing SQLite-with-locking before connecting) → connect the history
//! connection → take the lock → read the history → plan → run each step, confirming the lock
//! before each → release the lock on every path, attaching a release failure to the primary
//! error instead of replacing it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;

use crate::backend::{Backend, BackendKind, ConnectRequest, Connector, UrlConnector};
use crate::code::RustMigration;
use crate::config::{validate_table_name, Config, LockWait};
use crate::error::{Error, ErrorKind, Result};
use crate::events::{Event, EventSink};
use crate::history::{runner_identity, AppliedMigration, HistoryChange, RecordState};
use crate::lock::lease::{acquire_lease, LeaseGuard, LeaseObservation, LeaseRequest};
use crate::lock::{
    acquire_session_lock, lease_table, resolve_strategy, LockTarget, Strategy, LOCK_NAME,
};
use crate::migration::{Direction, Migration, StepFormat};
use crate::plan::{self, Command, Plan, PlanOptions, PlannedStep};
use crate::report::{
    ForceUnlockReport, LockReport, LockState, Preview, PreviewStep, RunReport, StatusReport,
    StepReport,
};
use crate::source::load_directories;

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

    /// Loads and validates every migration, touching no database.
    pub fn load(&self) -> Result<Vec<Migration>> {
        let mut migrations = load_directories(&self.config.directories)?;
        for extra in &self.extra {
            if let Some(existing) = migrations.iter().find(|m| m.version == extra.version) {
                return Err(Error::invalid(
                    PathBuf::from(&extra.origin),
                    format!(
                        "two migrations have version {}: `{}` and `{}`; give one of them a new version",
                        extra.version, existing.origin, extra.origin
                    ),
                ));
            }
            migrations.push(extra.clone());
        }
        migrations.sort_by_key(|m| m.version);
        self.check_formats(&migrations)?;
        Ok(migrations)
    }

    /// A JSON command migration cannot run on a SQL database, nor SQL on MongoDB: refuse
    /// before any database is touched.
    fn check_formats(&self, migrations: &[Migration]) -> Result<()> {
        for migration in migrations {
            let Ok(url) = self.config.connection_url(&migration.connection) else {
                continue; // reported when the connection is needed
            };
            let Ok(kind) = BackendKind::from_url(url) else {
                continue;
            };
            if kind != BackendKind::Memory
                && migration.format != StepFormat::Rust
                && kind.step_format() != migration.format
            {
                return Err(Error::invalid(
                    PathBuf::from(&migration.origin),
                    format!(
                        "is a {} migration but connection `{}` is {}; MongoDB migrations are \
                         `.json` command files, SQL databases take `.sql` files",
                        match migration.format {
                            StepFormat::Sql => "SQL",
                            StepFormat::MongoCommands => "MongoDB (JSON)",
                            StepFormat::Rust => "Rust",
                        },
                        migration.connection,
                        kind.name()
                    ),
                ));
            }
        }
        Ok(())
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
        let mut session = self.open_session(command.name()).await?;
        let mut report = RunReport {
            operation: command.name().to_string(),
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
            operation: "baseline".to_string(),
            lock: session.strategy.name().to_string(),
            ..RunReport::default()
        };
        let result = session.baseline(&available, version, &mut report).await;
        session.finish(result.map(|()| report)).await
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
            operation: "resolve".to_string(),
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
        Ok(Preview {
            operation: command.name().to_string(),
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
                    out_of_order: s.out_of_order,
                    sql: s.text().to_string(),
                })
                .collect(),
            warnings: planned.warnings,
        })
    }

    /// Every migration's state, and the lock's. Takes no lock and creates nothing.
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
    /// let status = migrator.status().await?;
    /// assert_eq!(status.migrations[0].state, dirthara::plan::MigrationState::Pending);
    /// assert!(matches!(status.lock.state, dirthara::LockState::Off));
    /// # Ok(()) }
    /// ```
    pub async fn status(&self) -> Result<StatusReport> {
        let available = self.load()?;
        let mut history = self.connect_history("status").await?;
        let result = async {
            let applied = history
                .read_history(&self.config.history_table)
                .await?
                .unwrap_or_default();
            let lock = self.lock_report(history.as_mut()).await?;
            Ok(StatusReport {
                migrations: plan::status(&available, &applied),
                lock,
            })
        }
        .await;
        history.close().await;
        result
    }

    /// The lock's state and holder; never changes it.
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
    /// let lock = migrator.lock_status().await?;
    /// assert_eq!(lock.name, "dirthara:migrations");
    /// # Ok(()) }
    /// ```
    pub async fn lock_status(&self) -> Result<LockReport> {
        self.config.validate()?;
        let mut history = self.connect_history("unlock").await?;
        let result = self.lock_report(history.as_mut()).await;
        history.close().await;
        result
    }

    /// Releases the lock unconditionally, ending the holder's session(s); a no-op that
    /// succeeds when the lock is free.
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
    /// // On a free lock (or, as here, with locking off) it is a successful no-op.
    /// assert!(migrator.force_unlock().await?.released.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn force_unlock(&self) -> Result<ForceUnlockReport> {
        self.config.validate()?;
        let mut history = self.connect_history("unlock").await?;
        let result = async {
            let lock = self.lock_report(history.as_mut()).await?;
            let released = match (&lock.state, lock.strategy.as_str()) {
                (LockState::Held { .. }, "session") => match history.session_lock() {
                    Some(session_lock) => {
                        session_lock
                            .force_unlock(&self.config.history_table)
                            .await?
                    }
                    None => Vec::new(),
                },
                (LockState::Held { holder, .. } | LockState::Stale { holder }, "lease") => {
                    let mut store = history.open_lease_store(&self.lease_table()).await?;
                    let deleted = store.force_release().await;
                    store.close().await;
                    if deleted? {
                        vec![format!("deleted the lease held by {holder}")]
                    } else {
                        Vec::new()
                    }
                }
                _ => Vec::new(),
            };
            Ok(ForceUnlockReport { lock, released })
        }
        .await;
        history.close().await;
        result
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

    async fn lock_report(&self, history: &mut dyn Backend) -> Result<LockReport> {
        let connection = self.config.history_connection.clone();
        let strategy = match resolve_strategy(self.config.locking, history.kind(), &connection) {
            Ok(strategy) => strategy,
            Err(error) if error.code() == crate::Code::MigrationLockFailed => {
                return Ok(LockReport {
                    name: LOCK_NAME.to_string(),
                    connection,
                    strategy: "none".to_string(),
                    state: LockState::Unsupported {
                        reason: format!(
                            "{} has no lock to inspect; runs need --no-lock (`locking = false`) or \
                             --locking lease",
                            history.kind().name()
                        ),
                    },
                });
            }
            Err(error) => return Err(error),
        };
        let state = match strategy {
            Strategy::Off => LockState::Off,
            Strategy::Session => {
                let holder = match history.session_lock() {
                    Some(lock) => lock.holder(&self.config.history_table).await?,
                    None => None,
                };
                match holder {
                    Some(holder) => LockState::Held {
                        holder,
                        malformed: false,
                    },
                    None => LockState::Free,
                }
            }
            Strategy::Lease => {
                let mut store = history.open_lease_store(&self.lease_table()).await?;
                let observed = store.observe().await;
                store.close().await;
                lease_state(observed?)
            }
        };
        Ok(LockReport {
            name: LOCK_NAME.to_string(),
            connection,
            strategy: strategy.name().to_string(),
            state,
        })
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

/// One locked command's connections and progress.
struct Session<'m> {
    migrator: &'m Migrator,
    operation: String,
    history: Box<dyn Backend>,
    /// Connections other than the history connection, opened when a step needs them.
    others: BTreeMap<String, Box<dyn Backend>>,
    strategy: Strategy,
    /// The held lease, with `Strategy::Lease`.
    lease: Option<LeaseGuard>,
    completed: Vec<StepReport>,
}

impl Session<'_> {
    fn table(&self) -> &str {
        &self.migrator.config.history_table
    }

    fn history_connection(&self) -> &str {
        &self.migrator.config.history_connection
    }

    async fn run_command(
        &mut self,
        available: &[Migration],
        command: Command,
        report: &mut RunReport,
    ) -> Result<()> {
        let table = self.table().to_string();
        self.history.prepare_history(&table).await?;
        let applied = self.history.read_history(&table).await?.unwrap_or_default();
        let planned = plan::plan(available, &applied, command, self.migrator.plan_options())?;
        for warning in &planned.warnings {
            self.migrator.events.emit(Event::Warning(warning.clone()));
        }
        self.migrator.events.emit(Event::Planned {
            operation: command.name().to_string(),
            steps: planned.steps.len(),
        });
        report.warnings.extend(planned.warnings.iter().cloned());
        if planned.drop_all {
            self.ensure_lock(None).await?;
            // Never the lease table: a lease may be what protects this very run.
            report.dropped = self.history.drop_all(&[lease_table(&table)]).await?;
            self.migrator.events.emit(Event::Dropped {
                connection: self.history_connection().to_string(),
                objects: report.dropped.clone(),
            });
            // The lock lives in the session, not in a table, so it survived the drop.
            self.history.prepare_history(&table).await?;
        }
        self.apply(&planned, report).await
    }

    async fn apply(&mut self, planned: &Plan<'_>, report: &mut RunReport) -> Result<()> {
        for (index, step) in planned.steps.iter().enumerate() {
            if self.interrupted() {
                return Err(Error::new(ErrorKind::Interrupted {
                    remaining: planned.steps[index..]
                        .iter()
                        .map(|s| (s.migration.version, s.migration.name.clone()))
                        .collect(),
                }));
            }
            // Where the database checks the lock inside the step's own transaction (PostgreSQL),
            // a separate check first would only cost a round trip.
            let guarded = self.strategy == Strategy::Session
                && step.migration.format != StepFormat::Rust
                && self.runs_atomically(step.migration)
                && self
                    .history
                    .session_lock()
                    .is_some_and(|lock| lock.verifies_in_step());
            if !guarded {
                self.ensure_lock(Some(step.migration)).await?;
            }
            let running = self.run_step(step, planned.batch);
            #[cfg(feature = "tracing")]
            let running = tracing::Instrument::instrument(
                running,
                tracing::info_span!(
                    target: "dirthara",
                    "dirthara.migration",
                    version = step.migration.version,
                    name = %step.migration.name,
                    direction = %step.direction
                ),
            );
            let done = match running.await {
                Ok(done) => done,
                // The guard rolls the step back when the lock is gone: say that, not "failed".
                Err(error) if guarded && error.code() == crate::Code::MigrationFailed => {
                    self.ensure_lock(Some(step.migration)).await?;
                    return Err(error);
                }
                Err(error) => return Err(error),
            };
            match step.direction {
                Direction::Up => {
                    report.batch = Some(planned.batch);
                    report.applied.push(done.clone());
                }
                Direction::Down => report.reverted.push(done.clone()),
            }
            self.completed.push(done);
        }
        Ok(())
    }

    fn interrupted(&self) -> bool {
        self.migrator
            .shutdown
            .as_ref()
            .is_some_and(|rx| *rx.borrow())
    }

    /// Confirms the session still holds the lock before changing anything more.
    async fn ensure_lock(&mut self, next: Option<&Migration>) -> Result<()> {
        let table = self.table().to_string();
        let held = match self.strategy {
            Strategy::Off => return Ok(()),
            // A query error means the session is in trouble: we cannot confirm, so stop.
            Strategy::Session => match self.history.session_lock() {
                Some(lock) => lock.holds_lock(&table).await.unwrap_or(false),
                None => false,
            },
            Strategy::Lease => match &self.lease {
                Some(lease) => lease.confirm().await.unwrap_or(false),
                None => false,
            },
        };
        if held {
            return Ok(());
        }
        Err(Error::new(ErrorKind::LockLost {
            lock: LOCK_NAME.to_string(),
            connection: self.history_connection().to_string(),
            next: next.map(|m| (m.version, m.name.clone())),
        }))
    }

    /// Whether a migration's step and its history record commit in one transaction.
    fn runs_atomically(&self, migration: &Migration) -> bool {
        migration.transactional
            && migration.connection == self.migrator.config.history_connection
            && self.history.transactional_ddl()
    }

    async fn run_step(&mut self, step: &PlannedStep<'_>, batch: i64) -> Result<StepReport> {
        let migration = step.migration;
        let migrator = self.migrator;
        let events = &migrator.events;
        let table = migrator.config.history_table.as_str();
        let on_history = migration.connection == migrator.config.history_connection;
        events.emit(Event::MigrationStarted {
            version: migration.version,
            name: migration.name.clone(),
            direction: step.direction,
            connection: migration.connection.clone(),
        });
        let started = Instant::now();
        let text = step.text();
        let failed = |message: String, left_dirty: bool| {
            Error::new(ErrorKind::MigrationFailed {
                version: migration.version,
                name: migration.name.clone(),
                direction: step.direction,
                connection: migration.connection.clone(),
                message,
                left_dirty,
            })
        };

        let completion = match step.direction {
            Direction::Up => HistoryChange::Insert {
                version: migration.version,
                name: migration.name.clone(),
                checksum: migration.checksum.clone(),
                batch,
                state: RecordState::Applied,
                duration_ms: None,
                applied_by: runner_identity(),
            },
            Direction::Down => HistoryChange::Delete {
                version: migration.version,
            },
        };

        // A Rust migration runs its code where a file migration would send its text.
        let code = match migration.format {
            StepFormat::Rust => Some(migrator.code.get(&migration.version).cloned().ok_or_else(
                || {
                    Error::invalid(
                        &migration.origin,
                        "its Rust code was not registered with this Migrator",
                    )
                },
            )?),
            _ => None,
        };
        if self.runs_atomically(migration) {
            // The step and its record commit together or not at all.
            let outcome = match &code {
                Some(code) => {
                    self.history
                        .run_code(
                            code.as_ref(),
                            step.direction,
                            true,
                            Some((table, &completion)),
                        )
                        .await
                }
                None => {
                    self.history
                        .run_step_recorded(text, table, &completion)
                        .await
                }
            };
            outcome.map_err(|message| failed(message, false))?;
        } else {
            // The step cannot share a transaction with its record: mark it `running` first,
            // so a crash inside it is seen by the next run instead of being re-run or skipped.
            let marker = match step.direction {
                Direction::Up => completion
                    .measured(std::time::Duration::ZERO)
                    .with_state(RecordState::Running),
                Direction::Down => HistoryChange::SetState {
                    version: migration.version,
                    state: RecordState::Running,
                },
            };
            self.history.record(table, &marker).await?;
            let (outcome, transactional_ddl) = if on_history {
                let outcome = match &code {
                    Some(code) => {
                        self.history
                            .run_code(code.as_ref(), step.direction, migration.transactional, None)
                            .await
                    }
                    None => self.history.run_step(text, migration.transactional).await,
                };
                (outcome, self.history.transactional_ddl())
            } else {
                let target = self.other_connection(&migration.connection).await?;
                let transactional_ddl = target.transactional_ddl();
                let outcome = match &code {
                    Some(code) => {
                        target
                            .run_code(code.as_ref(), step.direction, migration.transactional, None)
                            .await
                    }
                    None => target.run_step(text, migration.transactional).await,
                };
                (outcome, transactional_ddl)
            };
            let atomic_step = migration.transactional && transactional_ddl;
            if let Err(message) = outcome {
                if atomic_step {
                    // The step rolled back cleanly: take the marker back.
                    let undo = match step.direction {
                        Direction::Up => HistoryChange::Delete {
                            version: migration.version,
                        },
                        Direction::Down => HistoryChange::SetState {
                            version: migration.version,
                            state: RecordState::Applied,
                        },
                    };
                    let error = failed(message, false);
                    return match self.history.record(table, &undo).await {
                        Ok(()) => Err(error),
                        Err(undo_error) => Err(error.with_secondary(undo_error)),
                    };
                }
                return Err(failed(message, true));
            }
            let done = match step.direction {
                Direction::Up => HistoryChange::MarkApplied {
                    version: migration.version,
                    duration_ms: started.elapsed().as_millis() as i64,
                },
                Direction::Down => completion,
            };
            self.history.record(table, &done).await?;
        }

        let duration = started.elapsed();
        events.emit(Event::MigrationFinished {
            version: migration.version,
            name: migration.name.clone(),
            direction: step.direction,
            duration,
        });
        Ok(StepReport {
            version: migration.version,
            name: migration.name.clone(),
            direction: step.direction,
            connection: migration.connection.clone(),
            duration_ms: duration.as_millis() as u64,
        })
    }

    async fn other_connection(&mut self, name: &str) -> Result<&mut (dyn Backend + 'static)> {
        if !self.others.contains_key(name) {
            let backend = self.migrator.connect(name, &self.operation, false).await?;
            self.others.insert(name.to_string(), backend);
        }
        Ok(self.others.get_mut(name).expect("inserted above").as_mut())
    }

    async fn baseline(
        &mut self,
        available: &[Migration],
        version: i64,
        report: &mut RunReport,
    ) -> Result<()> {
        if !available.iter().any(|m| m.version == version) {
            return Err(Error::new(ErrorKind::UnknownVersion { version }));
        }
        let table = self.table().to_string();
        self.history.prepare_history(&table).await?;
        let applied = self.history.read_history(&table).await?.unwrap_or_default();
        if let Some(dirty) = applied.iter().find(|a| a.state == RecordState::Running) {
            return Err(Error::new(ErrorKind::Dirty {
                version: dirty.version,
                name: dirty.name.clone(),
            }));
        }
        let batch = applied.iter().map(|a| a.batch).max().unwrap_or(0) + 1;
        for migration in available.iter().filter(|m| m.version <= version) {
            if applied.iter().any(|a| a.version == migration.version) {
                continue;
            }
            self.ensure_lock(Some(migration)).await?;
            let record = HistoryChange::Insert {
                version: migration.version,
                name: migration.name.clone(),
                checksum: migration.checksum.clone(),
                batch,
                state: RecordState::Applied,
                duration_ms: Some(0),
                applied_by: runner_identity(),
            };
            self.history.record(&table, &record).await?;
            report.batch = Some(batch);
            report.recorded.push(StepReport {
                version: migration.version,
                name: migration.name.clone(),
                direction: Direction::Up,
                connection: migration.connection.clone(),
                duration_ms: 0,
            });
        }
        Ok(())
    }

    async fn resolve(
        &mut self,
        available: &[Migration],
        version: i64,
        resolution: Resolution,
        report: &mut RunReport,
    ) -> Result<()> {
        let table = self.table().to_string();
        let applied = self.history.read_history(&table).await?.unwrap_or_default();
        let Some(record) = applied.iter().find(|a| a.version == version) else {
            return Err(Error::config(format!(
                "migration {version} has no history record, so there is nothing to resolve \
                 (`dirthara status` shows the recorded migrations)"
            )));
        };
        let dirty = record.state == RecordState::Running;
        let change = match resolution {
            Resolution::Applied | Resolution::RolledBack if !dirty => {
                return Err(Error::config(format!(
                    "migration {version} ({}) is not dirty (it is recorded as applied); \
                     `resolve --applied/--rolled-back` only clears a migration a failed run left running",
                    record.name
                )))
            }
            Resolution::Applied => HistoryChange::MarkApplied {
                version,
                duration_ms: record.duration_ms,
            },
            Resolution::RolledBack => HistoryChange::Delete { version },
            Resolution::AcceptChecksum => {
                let Some(migration) = available.iter().find(|m| m.version == version) else {
                    return Err(Error::new(ErrorKind::MissingMigration {
                        version,
                        name: record.name.clone(),
                    }));
                };
                if dirty {
                    return Err(Error::new(ErrorKind::Dirty {
                        version,
                        name: record.name.clone(),
                    }));
                }
                HistoryChange::SetChecksum {
                    version,
                    checksum: migration.checksum.clone(),
                }
            }
        };
        self.ensure_lock(None).await?;
        self.history.record(&table, &change).await?;
        report.recorded.push(StepReport {
            version,
            name: record.name.clone(),
            direction: if resolution == Resolution::RolledBack {
                Direction::Down
            } else {
                Direction::Up
            },
            connection: self.history_connection().to_string(),
            duration_ms: 0,
        });
        Ok(())
    }

    /// Releases the lock and closes every connection, whatever `result` is. A release
    /// failure is attached to the command's own error, never substituted for it.
    async fn finish<T>(mut self, result: Result<T>) -> Result<T> {
        let result = result.map_err(|e| e.with_completed(std::mem::take(&mut self.completed)));
        let release = match self.strategy {
            Strategy::Off => Ok(()),
            Strategy::Lease => {
                let warning = match self.lease.take() {
                    Some(lease) => lease.release().await,
                    None => None,
                };
                match warning {
                    // Released, or lapsed (a warning: the run's own result stands).
                    None => {
                        self.migrator.events.emit(Event::LockReleased {
                            lock: LOCK_NAME.to_string(),
                            connection: self.history_connection().to_string(),
                        });
                        Ok(())
                    }
                    Some(warning)
                        if warning.code == crate::Code::LockLeaseExpired || result.is_ok() =>
                    {
                        self.migrator.events.emit(Event::Warning(warning));
                        Ok(())
                    }
                    // A failed release after a failed run: attached to the run's error.
                    Some(warning) => Err(Error::new(ErrorKind::LockFailed {
                        lock: LOCK_NAME.to_string(),
                        connection: self.history_connection().to_string(),
                        reason: warning.message,
                    })),
                }
            }
            Strategy::Session => {
                let table = self.table().to_string();
                let connection = self.history_connection().to_string();
                let released = match self.history.session_lock() {
                    Some(lock) => lock.unlock(&table).await,
                    None => Ok(()),
                };
                match released {
                    Ok(()) => {
                        self.migrator.events.emit(Event::LockReleased {
                            lock: LOCK_NAME.to_string(),
                            connection,
                        });
                        Ok(())
                    }
                    Err(error) => Err(Error::new(ErrorKind::LockFailed {
                        lock: LOCK_NAME.to_string(),
                        connection,
                        reason: format!(
                            "releasing the lock failed ({error}); the database releases it when \
                             this session ends, which happens now"
                        ),
                    })),
                }
            }
        };
        for (_, backend) in std::mem::take(&mut self.others) {
            backend.close().await;
        }
        self.history.close().await;
        match (result, release) {
            (Ok(value), Ok(())) => Ok(value),
            (Ok(_), Err(release_error)) => Err(release_error),
            (Err(error), Ok(())) => Err(error),
            (Err(error), Err(release_error)) => Err(error.with_secondary(release_error)),
        }
    }
}

/// How a lease looks to `status` and `unlock`; a malformed one counts as held.
fn lease_state(observed: LeaseObservation) -> LockState {
    match observed {
        LeaseObservation::Free => LockState::Free,
        LeaseObservation::Held { record, remaining } => LockState::Held {
            holder: record.holder(Some(format!("lease expires in {}s", remaining.as_secs()))),
            malformed: false,
        },
        LeaseObservation::Malformed { record } => LockState::Held {
            holder: record.holder(Some(
                "its expiry is missing or not a date: held until `dirthara unlock --force`".into(),
            )),
            malformed: true,
        },
        LeaseObservation::Stale {
            record,
            expired_for,
        } => LockState::Stale {
            holder: record.holder(Some(format!(
                "lease expired {}s ago; the next runner takes it",
                expired_for.as_secs()
            ))),
        },
    }
}

impl HistoryChange {
    fn with_state(mut self, new_state: RecordState) -> Self {
        if let HistoryChange::Insert { state, .. } = &mut self {
            *state = new_state;
        }
        self
    }
}

#[cfg(test)]
mod tests;
