//! The locked commands, each one body run by [`Migrator::locked_on`] (through `locked`, which
//! loads the migrations first, as `squash` does too, or `locked_without_files`, for `drift`): validate the
//! configuration once, open a [`Session`] (connect, then lock), run the body, and let the
//! session release everything whatever happened. A command that went well and changed the
//! schema leaves a snapshot of it for `drift`, under the same lock.

use super::session::Session;
use super::{Connections, Migrator};
use crate::adopt::{AdoptSource, AdoptionReport};
use crate::backend::Backend;
use crate::error::Result;
use crate::migration::{DownSteps, Migration};
use crate::plan::{Command, Resolution, RollbackScope};
use crate::report::RunReport;
use crate::vocabulary::Operation;

impl Migrator {
    /// A locked command that reads the migrations: load and connect, then [`Self::locked_on`].
    /// With `runs_steps`, every connection a migration names must have a URL too.
    pub(super) async fn locked<T>(
        &self,
        operation: &str,
        downs: DownSteps,
        runs_steps: bool,
        body: impl AsyncFnOnce(&mut Session<'_>, &[Migration]) -> Result<T>,
    ) -> Result<T> {
        let connections = self.connections();
        let (available, history) = self
            .load_and_connect(&connections, operation, downs, runs_steps)
            .await?;
        let body = async |session: &mut Session<'_>| body(session, &available).await;
        self.locked_on(&connections, operation, history, body).await
    }

    /// A locked command that needs no migration files (`drift`): connect, then
    /// [`Self::locked_on`].
    pub(super) async fn locked_without_files<T>(
        &self,
        operation: &str,
        body: impl AsyncFnOnce(&mut Session<'_>) -> Result<T>,
    ) -> Result<T> {
        let connections = self.connections();
        self.checked(&connections)?;
        let history = self.connect_history(&connections, operation).await?;
        self.locked_on(&connections, operation, history, body).await
    }

    /// The one skeleton of every locked command: take the lock on `history`, run `body` on
    /// the session, keep a snapshot of the schema if it changed it, and release the lock and
    /// every connection whatever it returned.
    async fn locked_on<T>(
        &self,
        connections: &Connections,
        operation: &str,
        history: Box<dyn Backend>,
        body: impl AsyncFnOnce(&mut Session<'_>) -> Result<T>,
    ) -> Result<T> {
        let mut session = Session::open(self, connections, operation, history).await?;
        let result = body(&mut session);
        #[cfg(feature = "tracing")]
        let result = tracing::Instrument::instrument(
            result,
            tracing::info_span!(target: "dirthara", "dirthara.command", operation),
        );
        let result = result.await;
        if result.is_ok() {
            session.keep_snapshot().await;
        }
        (session.finish(result).await).map_err(|error| self.masked_error(error))
    }

    /// A report of `operation`, under the lock `session` holds.
    fn report(session: &Session<'_>, operation: Operation) -> RunReport {
        RunReport::new(operation, session.strategy())
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

    /// Reverses migrations, newest first (see [`RollbackScope`]).
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
    pub async fn rollback(&self, scope: RollbackScope) -> Result<RunReport> {
        self.run(Command::Rollback(scope)).await
    }

    /// Moves the database to `version` (0: before the first migration, unless a migration 0
    /// exists, which then stays applied).
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
        let body = async |session: &mut Session<'_>, available: &[Migration]| {
            let mut report = Self::report(session, command.into());
            session.run_command(available, command, &mut report).await?;
            Ok(report)
        };
        (self.locked(command.name(), command.down_steps(), true, body)).await
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
        let body = async |session: &mut Session<'_>, available: &[Migration]| {
            let mut report = Self::report(session, Operation::Baseline);
            session.baseline(available, version, &mut report).await?;
            Ok(report)
        };
        self.locked("baseline", DownSteps::Skip, false, body).await
    }

    /// Adopts another tool's history (`baseline --from <tool>`): under the lock, reads that
    /// tool's history table on the history connection and records every migration it applied
    /// as applied here, with the checksums of the files here, in one batch (in one
    /// transaction on SQL databases). The other tool's table is left as it was. Refused with
    /// `CONFIG_ERROR`, before anything is written, when dirthara's history already has
    /// records, the other history has a failed or dirty entry, or an applied version has no
    /// file here.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), dirthara::Error> {
    /// use dirthara::{AdoptSource, Tool};
    ///
    /// let migrator = dirthara::Migrator::new(dirthara::Config::with_url("postgres://app@db/app"));
    /// // sqlx applied migrations 1 and 2 here: record them; `migrate` then applies only 3.
    /// let report = migrator.baseline_from(&AdoptSource::new(Tool::Sqlx)).await?;
    /// assert_eq!(report.recorded.len(), 2);
    /// # Ok(()) }
    /// ```
    pub async fn baseline_from(&self, source: &AdoptSource) -> Result<AdoptionReport> {
        source.check()?;
        let body = async |session: &mut Session<'_>, available: &[Migration]| {
            session.baseline_from(available, source).await
        };
        self.locked("baseline", DownSteps::Skip, false, body).await
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
        let body = async |session: &mut Session<'_>, available: &[Migration]| {
            let mut report = Self::report(session, Operation::Resolve);
            session
                .resolve(available, version, resolution, &mut report)
                .await?;
            Ok(report)
        };
        self.locked("resolve", DownSteps::Skip, false, body).await
    }
}
