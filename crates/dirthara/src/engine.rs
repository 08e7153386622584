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

use tokio::sync::watch;

use crate::adopt::{AdoptSource, AdoptionReport};
use crate::backend::{Backend, BackendKind, ConnectRequest, Connector, UrlConnector};
use crate::code::RustMigration;
use crate::config::{validate_table_name, Config, LockWait};
use crate::error::{Code, Error, ErrorKind, Result};
use crate::events::{Event, EventSink, Warning};
use crate::history::AppliedMigration;
use crate::lock::lease::{acquire_lease, LeaseGuard, LeaseObservation, LeaseRequest};
use crate::lock::{
    acquire_session_lock, lease_table, resolve_strategy, LockTarget, Strategy, LOCK_NAME,
};
use crate::migration::{Direction, Migration, StepFormat};
use crate::plan::{self, Command, PlanOptions};
use crate::report::{
    ForceUnlockReport, LockReport, LockState, Operation, Preview, PreviewStep, RunReport,
    StatusReport,
};
use crate::source::load_sources;

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
        let sources: Vec<_> = (self.config.directories.iter())
            .map(|dir| (dir.clone(), self.config.layouts.get(dir).copied()))
            .collect();
        let loaded = load_sources(&sources)?;
        for skipped in loaded.skipped {
            self.events.emit(Event::Warning(Warning {
                code: Code::SkippedFile,
                message: format!(
                    "{} was not loaded: {}",
                    skipped.path.display(),
                    skipped.reason
                ),
            }));
        }
        let mut migrations = loaded.migrations;
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
        self.read_as_their_database_would(&mut migrations)?;
        Ok(migrations)
    }

    /// Reads each step as the database it runs on would: a SQL file that controls its own
    /// transaction is run as written (never wrapped) and bracketed by a `running` record; an
    /// empty or comment-only down step reverses nothing; a MySQL `DELIMITER` script must
    /// split cleanly. Every malformed script is reported at once, before anything runs.
    fn read_as_their_database_would(&self, migrations: &mut [Migration]) -> Result<()> {
        use crate::source::sql::{self as tokens, SqlDialect};
        let mut problems = Vec::new();
        for migration in migrations.iter_mut() {
            let kind = self
                .config
                .connection_url(&migration.connection)
                .ok()
                .and_then(|url| BackendKind::from_url(url).ok());
            let dialect = match (migration.format, kind) {
                (StepFormat::Sql, Some(BackendKind::Postgres)) => SqlDialect::Postgres,
                (StepFormat::Sql, Some(BackendKind::Mysql)) => SqlDialect::MySql,
                (StepFormat::Sql, Some(BackendKind::Sqlite)) => SqlDialect::Sqlite,
                (StepFormat::MongoCommands, _) => {
                    migration.down_is_blank =
                        (migration.down.as_deref()).is_some_and(crate::source::is_blank_commands);
                    continue;
                }
                _ => continue,
            };
            for (direction, text) in [
                (Direction::Up, Some(&migration.up)),
                (Direction::Down, migration.down.as_ref()),
            ] {
                let Some(text) = text else { continue };
                if dialect == SqlDialect::MySql && tokens::has_client_delimiter(text) {
                    if let Err(reason) = tokens::mysql_client_statements(text) {
                        problems.push(crate::error::Problem {
                            file: PathBuf::from(&migration.origin),
                            reason: format!(
                                "{direction} step: its DELIMITER script does not split: {reason}"
                            ),
                        });
                    }
                }
                if migration.own_transaction.is_none() {
                    if let Some(control) = tokens::transaction_control(text, dialect) {
                        migration.own_transaction = Some(format!(
                            "`{}` at line {} of the {direction} step",
                            control.keyword, control.line
                        ));
                        migration.transactional = false;
                    }
                }
            }
            migration.down_is_blank =
                (migration.down.as_deref()).is_some_and(|down| tokens::is_blank(down, dialect));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::InvalidMigration { problems }))
        }
    }

    /// Every connection a migration names must have a URL: refuse before anything runs,
    /// rather than stop half-way.
    fn check_connections(&self, migrations: &[Migration]) -> Result<()> {
        for migration in migrations {
            if migration.connection == self.config.history_connection {
                continue; // checked with the rest of the configuration
            }
            self.config
                .connection_url(&migration.connection)
                .map_err(|e| Error::invalid(&migration.origin, e.to_string()))?;
        }
        Ok(())
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
            #[cfg(test)]
            if kind == BackendKind::Memory {
                continue;
            }
            if migration.format != StepFormat::Rust && kind.step_format() != migration.format {
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
            let lock = self.lock_report(history.as_mut()).await;
            Ok(StatusReport {
                migrations: plan::status(&available, &applied),
                lock,
            })
        }
        .await;
        history.close().await;
        result
    }

    /// The lock's state and holder; never changes it. When the lock cannot be inspected,
    /// the state is [`LockState::Unknown`] with the reason, not an error.
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
        let report = self.lock_report(history.as_mut()).await;
        history.close().await;
        Ok(report)
    }

    /// Releases the lock unconditionally, ending the holder's session(s); a no-op that
    /// succeeds when the lock is free. Fails when the lock cannot be inspected: releasing
    /// blind could delete a live holder's lease.
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
            let (strategy, lock) = self.inspect_lock(history.as_mut()).await?;
            let released = match (&lock.state, strategy) {
                (LockState::Held { .. }, Some(Strategy::Session)) => match history.session_lock() {
                    Some(session_lock) => {
                        session_lock
                            .force_unlock(&self.config.history_table)
                            .await?
                    }
                    None => Vec::new(),
                },
                (
                    LockState::Held { holder, .. } | LockState::Stale { holder },
                    Some(Strategy::Lease),
                ) => {
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

    /// The lock as `status` and `unlock` show it: a failed inspection is reported as the
    /// state `unknown` with its reason, so the rest of the command still answers.
    async fn lock_report(&self, history: &mut dyn Backend) -> LockReport {
        match self.inspect_lock(history).await {
            Ok((_, report)) => report,
            Err(error) => {
                let connection = self.config.history_connection.clone();
                let strategy = resolve_strategy(self.config.locking, history.kind(), &connection)
                    .map_or("none", Strategy::name);
                let reason = match error.kind() {
                    // The head of the report already names the lock and the connection.
                    ErrorKind::LockFailed { reason, .. } => reason.clone(),
                    _ => error.to_string(),
                };
                LockReport {
                    name: LOCK_NAME.to_string(),
                    connection,
                    strategy: strategy.to_string(),
                    state: LockState::Unknown {
                        reason: format!("[{}] {reason}", error.code()),
                    },
                }
            }
        }
    }

    /// The lock's state, and the strategy that governs it (`None`: the backend cannot lock).
    async fn inspect_lock(
        &self,
        history: &mut dyn Backend,
    ) -> Result<(Option<Strategy>, LockReport)> {
        let connection = self.config.history_connection.clone();
        let strategy = match resolve_strategy(self.config.locking, history.kind(), &connection) {
            Ok(strategy) => strategy,
            Err(error) if error.code() == crate::Code::MigrationLockFailed => {
                let report = LockReport {
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
                };
                return Ok((None, report));
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
        let report = LockReport {
            name: LOCK_NAME.to_string(),
            connection,
            strategy: strategy.name().to_string(),
            state,
        };
        Ok((Some(strategy), report))
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

mod session;

use session::Session;

#[cfg(test)]
mod tests;
