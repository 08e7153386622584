//! `drift`: whether the live schema is the one its history says it should be. The reference
//! is the snapshot the last command that changed the schema left (`engine/snapshot.rs`), or a
//! dump the caller gives. It is read under the lock, taken as any locked command takes it, so
//! a deploy half-way through its migrations is waited for, not reported as drift; it needs no
//! migration files and no second database.

use serde::Serialize;

use super::dump::read_dump;
use super::session::Session;
use super::snapshot::snapshot_now;
use super::Migrator;
use crate::error::{Error, ErrorKind, Result};
use crate::schema::{compare, compare_versions, server_major, Drift, SchemaDump, SchemaSnapshot};

/// What `drift` compared the live schema with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
#[non_exhaustive]
pub enum DriftReference {
    /// The snapshot kept with the history.
    Snapshot {
        /// The newest applied version when it was taken (`None`: nothing was applied).
        version: Option<i64>,
        /// When it was taken, RFC 3339.
        taken_at: String,
        /// The server's version then, as it reported it.
        server: String,
    },
    /// A dump the caller gave (`drift --against FILE`).
    Dump {
        /// The name the caller gave it (the file's path).
        name: String,
    },
}

impl std::fmt::Display for DriftReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriftReference::Snapshot {
                version: Some(version),
                taken_at,
                ..
            } => write!(f, "the snapshot taken at version {version} ({taken_at})"),
            DriftReference::Snapshot { taken_at, .. } => {
                write!(
                    f,
                    "the snapshot taken with no migration applied ({taken_at})"
                )
            }
            DriftReference::Dump { name } => f.write_str(name),
        }
    }
}

/// What `drift` found on one database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DriftReport {
    /// The named connection that was read.
    pub connection: String,
    /// What the live schema was compared with.
    pub reference: DriftReference,
    /// Each object that is not as in the reference, in the dump's order.
    pub drift: Vec<Drift>,
    /// The lines of the applied versions that differ (`-` the reference's, `+` the history's
    /// now): a command changed the history after the reference was taken and took no
    /// snapshot (it failed part-way, or the history was edited by hand).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub versions: Option<String>,
    /// The server's version now, when its major version is not the one the snapshot was
    /// taken on: a server renders views and defaults in its own way, so what differs may be
    /// the rendering alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_now: Option<String>,
}

impl DriftReport {
    /// Nothing differs.
    pub fn is_clean(&self) -> bool {
        self.drift.is_empty() && self.versions.is_none()
    }

    /// `SCHEMA_DRIFT` when something differs.
    pub fn error(&self) -> Option<Error> {
        (!self.is_clean()).then(|| {
            Error::new(ErrorKind::SchemaDrift {
                connection: self.connection.clone(),
                reference: self.reference.to_string(),
                file: matches!(self.reference, DriftReference::Dump { .. }),
                objects: self.drift.len(),
                versions: self.versions.is_some(),
            })
        })
    }
}

impl Migrator {
    /// Compares the live schema of the history connection's database with the snapshot the
    /// last command that changed it took. Under the lock; changes nothing. Fails with
    /// `SCHEMA_SNAPSHOT_MISSING` when the history has none (see [`Migrator::accept_schema`]).
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), dirthara::Error> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # std::fs::write(dir.path().join("1_users.up.sql"), "CREATE TABLE users (id INT)").unwrap();
    /// # let db = dir.path().join("app.db");
    /// # let mut config = dirthara::Config::with_url(format!("sqlite:{}", db.display()));
    /// # config.directories = vec![dir.path().to_path_buf()];
    /// # config.locking = dirthara::Locking::Off; // SQLite has no session lock
    /// let migrator = dirthara::Migrator::new(config);
    /// migrator.migrate().await?; // takes the snapshot
    /// assert!(migrator.drift().await?.is_clean());
    /// # Ok(()) }
    /// ```
    pub async fn drift(&self) -> Result<DriftReport> {
        self.drift_from(None).await
    }

    /// Compares the live schema with `dump` (read from a file `name`), under the lock.
    pub async fn drift_against(&self, name: &str, dump: &SchemaDump) -> Result<DriftReport> {
        self.drift_from(Some((name, dump))).await
    }

    /// Takes the live schema as the reference `drift` compares with, under the lock: after
    /// checking a database whose history has no snapshot yet, or a change made on purpose
    /// outside the migrations.
    pub async fn accept_schema(&self) -> Result<SchemaSnapshot> {
        self.locked_without_files("drift", async |session: &mut Session<'_>| {
            let connection = session.migrator.config.history_connection.clone();
            let snapshot = snapshot_now(session.history.as_mut(), &connection).await?;
            session.ensure_lock(None).await?;
            session.history.write_snapshot(&snapshot.store()).await?;
            Ok(snapshot)
        })
        .await
    }

    async fn drift_from(&self, against: Option<(&str, &SchemaDump)>) -> Result<DriftReport> {
        self.locked_without_files("drift", async |session: &mut Session<'_>| {
            let connection = session.migrator.config.history_connection.clone();
            let live = read_dump(session.history.as_mut(), &connection).await?;
            let now = session
                .history
                .server_version()
                .unwrap_or_default()
                .to_string();
            let (reference, expected, server_now) = match against {
                Some((name, dump)) => {
                    let name = name.to_string();
                    (DriftReference::Dump { name }, dump.clone(), None)
                }
                None => {
                    let stored = session.history.read_snapshot().await?;
                    let stored = stored.ok_or_else(|| {
                        let connection = connection.clone();
                        Error::new(ErrorKind::SchemaSnapshotMissing { connection })
                    })?;
                    let snapshot = SchemaSnapshot::read(&stored)
                        .map_err(|e| Error::history(&connection, e))?;
                    let moved = server_major(&snapshot.server) != server_major(&now);
                    let reference = DriftReference::Snapshot {
                        version: snapshot.version,
                        taken_at: snapshot.taken_at,
                        server: snapshot.server,
                    };
                    (reference, snapshot.dump, moved.then_some(now))
                }
            };
            Ok(DriftReport {
                connection,
                reference,
                drift: compare(&expected, &live),
                versions: compare_versions(&expected, &live),
                server_now,
            })
        })
        .await
    }
}
