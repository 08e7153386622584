//! The read-only commands: `status`, and inspecting or breaking the lock (`unlock`,
//! `unlock --force`). None of them takes the lock or creates anything.

use super::Migrator;
use crate::error::Result;
use crate::lock;
use crate::migration::DownSteps;
use crate::plan;
use crate::report::{ForceUnlockReport, LockReport, StatusReport};

impl Migrator {
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
    /// assert_eq!(status.migrations[0].state, dirthara::MigrationState::Pending);
    /// assert!(matches!(status.lock.state, dirthara::LockState::Off));
    /// # Ok(()) }
    /// ```
    pub async fn status(&self) -> Result<StatusReport> {
        let connections = self.connections();
        let all = self.migrations(DownSteps::Skip, &connections)?;
        let (available, repeatables) = crate::migration::split_repeatables(&all);
        self.checked(&connections)?;
        let mut history = self.connect_history(&connections, "status").await?;
        let result = async {
            let applied = history.read_history().await?.unwrap_or_default();
            let records = history.read_repeatables().await?;
            let lock = self.lock_report(history.lock_host()).await;
            let status = StatusReport::new(plan::status(available, &applied), lock);
            Ok(status.with_repeatables(plan::repeatable_status(repeatables, &records)))
        }
        .await;
        self.release_history(history, result.is_ok()).await;
        result
    }

    /// The lock's state and holder; never changes it or creates anything. Both primitives
    /// are looked at: the strategy in force is [`LockReport::state`], and the other one is
    /// in [`LockReport::others`] when it is held (a runner configured with another
    /// `locking`). When the lock cannot be inspected, the state is
    /// [`LockState::Unknown`](crate::LockState::Unknown) with the reason, not an error.
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
        let connections = self.connections();
        self.checked(&connections)?;
        let mut history = self.connect_history(&connections, "unlock").await?;
        let report = self.lock_report(history.lock_host()).await;
        history.close().await;
        Ok(report)
    }

    /// Releases the lock unconditionally — the session lock by ending the holder's
    /// session(s), the lease by deleting it; whichever is held, whatever `locking` says, each
    /// named in the report. A no-op that succeeds when nothing is held. Fails when a lock
    /// cannot be inspected: releasing blind could end a live holder's run.
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
        let connections = self.connections();
        self.checked(&connections)?;
        let mut history = self.connect_history(&connections, "unlock").await?;
        let connection = self.config.history_connection.as_str();
        let result = lock::force_unlock(history.lock_host(), self.config.locking, connection).await;
        history.close().await;
        result
    }

    /// The lock as `status` and `unlock` show it: both primitives are looked at, and a
    /// failed inspection is the state `unknown` with its reason.
    pub(super) async fn lock_report(&self, host: &mut dyn lock::LockHost) -> LockReport {
        let connection = self.config.history_connection.as_str();
        lock::inspect(host, self.config.locking, connection).await
    }
}
