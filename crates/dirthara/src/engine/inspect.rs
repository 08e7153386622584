//! The read-only commands: `status`, and inspecting or breaking the lock (`unlock`,
//! `unlock --force`). None of them takes the lock or creates anything.

use super::Migrator;
use crate::backend::Backend;
use crate::error::{ErrorKind, Result};
use crate::lock::{self, resolve_strategy, Strategy, LOCK_NAME};
use crate::migration::DownSteps;
use crate::plan;
use crate::report::{ForceUnlockReport, LockReport, LockState, StatusReport};

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
        let available = self.load_steps(DownSteps::Skip)?;
        self.checked()?;
        let mut history = self.connect_history("status").await?;
        let result = async {
            let applied = history.read_history().await?.unwrap_or_default();
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
        self.checked()?;
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
        self.checked()?;
        let mut history = self.connect_history("unlock").await?;
        let result = async {
            let (strategy, lock) = self.inspect_lock(history.as_mut()).await?;
            let released = match (&lock.state, strategy) {
                (LockState::Held { .. }, Some(Strategy::Session)) => match history.session_lock() {
                    Some(session_lock) => session_lock.force_unlock().await?,
                    None => Vec::new(),
                },
                (
                    LockState::Held { holder, .. } | LockState::Stale { holder },
                    Some(Strategy::Lease),
                ) => {
                    let mut store = history.open_lease_store().await?;
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

    /// The lock as `status` and `unlock` show it: a failed inspection is reported as the
    /// state `unknown` with its reason, so the rest of the command still answers.
    pub(super) async fn lock_report(&self, history: &mut dyn Backend) -> LockReport {
        match self.inspect_lock(history).await {
            Ok((_, report)) => report,
            Err(error) => {
                let connection = self.config.history_connection.clone();
                let strategy = resolve_strategy(self.config.locking, history.kind().lock_support())
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
    pub(super) async fn inspect_lock(
        &self,
        history: &mut dyn Backend,
    ) -> Result<(Option<Strategy>, LockReport)> {
        let connection = self.config.history_connection.clone();
        let strategy = match resolve_strategy(self.config.locking, history.kind().lock_support()) {
            Ok(strategy) => strategy,
            Err(unsupported) => {
                let report = LockReport {
                    name: LOCK_NAME.to_string(),
                    connection,
                    strategy: "none".to_string(),
                    state: LockState::Unsupported {
                        reason: unsupported.nothing_to_inspect(),
                    },
                };
                return Ok((None, report));
            }
        };
        let primitive = self.lock_primitive(history, strategy).await?;
        let state = lock::inspect(primitive).await?;
        let report = LockReport {
            name: LOCK_NAME.to_string(),
            connection,
            strategy: strategy.name().to_string(),
            state,
        };
        Ok((Some(strategy), report))
    }
}
