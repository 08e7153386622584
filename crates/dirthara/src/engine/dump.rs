//! `dump`: the schema of the history connection's database, read from its catalog, and the
//! versions its history holds as applied. Like `status`, it takes no lock and creates
//! nothing; it needs no migration files.

use super::Migrator;
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::history::RecordState;
use crate::schema::{AppliedVersion, SchemaDump};

impl Migrator {
    /// The schema of the history connection's database (on PostgreSQL, of its schema),
    /// dirthara's own tables left out, in an order and form that two databases built by the
    /// same migrations share, with the applied versions of its history. Render it with
    /// [`SchemaDump::render`]; compare two with [`crate::compare_schemas`].
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
    /// let migrator = dirthara::Migrator::new(config);
    /// migrator.migrate().await?;
    /// let dump = migrator.dump().await?;
    /// assert_eq!(dump.objects()[0].key, "users");
    /// assert!(dump.render().ends_with("-- applied versions\n-- 1 users\n"));
    /// # Ok(()) }
    /// ```
    pub async fn dump(&self) -> Result<SchemaDump> {
        let connections = self.connections();
        self.checked(&connections)?;
        let mut history = self.connect_history(&connections, "dump").await?;
        let result = read_dump(history.as_mut(), &self.config.history_connection).await;
        self.release_history(history, result.is_ok()).await;
        result
    }
}

/// The schema of `history`'s database and the applied versions of its history: what `dump`
/// prints, a snapshot keeps and `drift` compares.
pub(super) async fn read_dump(history: &mut dyn Backend, connection: &str) -> Result<SchemaDump> {
    let records = history.read_history().await?.unwrap_or_default();
    let objects = history.read_schema().await?;
    let applied = (records.into_iter())
        .filter(|record| record.state == RecordState::Applied)
        .map(|record| AppliedVersion {
            version: record.version,
            description: record.name,
        })
        .collect();
    SchemaDump::new(objects, applied).map_err(|e| Error::history(connection, e))
}
