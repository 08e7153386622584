//! `squash --to V`: one baseline file, `B<V>__squash.sql` (`.json` on MongoDB), that a new
//! database runs in one step instead of every migration up to V. It is read from a database
//! that has exactly the migrations up to V applied, under the lock, so no runner changes the
//! schema while it is read; what the planner does with it is in `plan/baselines.rs`.

use std::path::PathBuf;

use serde::Serialize;

use super::session::Session;
use super::Migrator;
use crate::error::{Error, ErrorKind, Result};
use crate::migration::{split_repeatables, DownSteps, Migration, StepFormat};
use crate::plan::{self, Command};
use crate::schema::{write_baseline, BaselineDialect, SchemaDump};
use crate::SqlDialect;

/// What `squash` wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct SquashReport {
    /// The baseline file.
    pub file: PathBuf,
    /// Its version: the newest migration it stands for.
    pub version: i64,
    /// The versions it stands for.
    pub squashes: Vec<i64>,
    /// How many schema objects it creates.
    pub objects: usize,
}

impl Migrator {
    /// Writes the baseline of the migrations up to `version` into the first migration
    /// directory, from the schema of the history connection's database, which must have
    /// exactly those migrations applied (none dirty, none after `version`). Under the lock.
    ///
    /// A new database then runs the baseline instead of them, and the migrations after
    /// `version`; a database that applied any of them goes on from its own history.
    pub async fn squash(&self, version: i64) -> Result<SquashReport> {
        let body = async |session: &mut Session<'_>, available: &[Migration]| {
            let (versioned, _) = split_repeatables(available);
            let records = session.history.read_history().await?.unwrap_or_default();
            if records.is_empty() {
                return Err(Error::config(format!(
                    "the database has no migration applied; squash reads the schema at \
                     version {version} from a database that has every migration up to it \
                     applied: build one with `dirthara -d <scratch-url> to {version}` and \
                     squash from it"
                )));
            }
            // Exactly the migrations up to `version`: none after it, and `to` has nothing to
            // apply (nor a changed or missing file, which planning refuses).
            let newer: Vec<String> = (records.iter().filter(|r| r.version > version))
                .map(|r| format!("{} {} is applied", r.version, r.name))
                .collect();
            if !newer.is_empty() {
                return Err(not_at(version, &newer));
            }
            let options = session.migrator.plan_options();
            let planned = plan::plan(versioned, &records, Command::MigrateTo(version), options)?;
            let pending: Vec<String> = (planned.steps.iter())
                .map(|s| format!("{} {} is pending", s.migration.version, s.migration.name))
                .collect();
            if !pending.is_empty() {
                return Err(not_at(version, &pending));
            }
            // The baseline is the history connection's schema: a migration on another
            // connection would never run on a new database.
            let history = session.migrator.config.history_connection.as_str();
            let elsewhere = (versioned.iter())
                .find(|m| m.version <= version && !m.is_baseline() && m.connection != history);
            if let Some(migration) = elsewhere {
                return Err(Error::config(format!(
                    "migration {} ({}) runs on connection `{}`, but a baseline holds only the \
                     schema of the history connection `{history}`; squash to a version before \
                     it",
                    migration.version, migration.name, migration.connection
                )));
            }
            if let Some(existing) =
                (versioned.iter()).find(|m| m.is_baseline() && m.version == version)
            {
                return Err(Error::config(format!(
                    "`{}` is already the baseline at version {version}; delete it to write it \
                     again",
                    existing.origin
                )));
            }
            let built_from = plan::followed(versioned, &records, None).baseline;
            let mut squashes: Vec<i64> = (records.iter().map(|r| r.version))
                .chain(
                    built_from
                        .and_then(|b| b.squashes.clone())
                        .into_iter()
                        .flatten(),
                )
                .collect();
            squashes.sort_unstable();
            squashes.dedup();
            let objects = session.history.read_schema().await?;
            let facts = session.history.baseline_facts().await?;
            let dump = SchemaDump::new(objects, Vec::new())
                .map_err(|e| Error::history(&session.migrator.config.history_connection, e))?;
            let capabilities = session.history.capabilities();
            let (dialect, extension) = match capabilities.sql_dialect {
                Some(SqlDialect::Postgres) => (BaselineDialect::Postgres, "sql"),
                Some(SqlDialect::MySql) => (BaselineDialect::MySql, "sql"),
                Some(SqlDialect::Sqlite) => (BaselineDialect::Sqlite, "sql"),
                None if capabilities.step_format() == StepFormat::MongoCommands => {
                    (BaselineDialect::Mongo, "json")
                }
                None => {
                    return Err(Error::config(format!(
                        "squash writes a baseline for a SQL database or MongoDB, not for {}",
                        capabilities.database
                    )))
                }
            };
            let text = write_baseline(dialect, dump.objects(), &facts, &squashes, version);
            let directory = session.migrator.config.directories.first().cloned();
            let directory = directory.ok_or_else(|| {
                Error::config("squash writes its baseline into the first migration directory; name one with --dir")
            })?;
            let file = directory.join(format!("B{version}__squash.{extension}"));
            write_new(&file, &text)?;
            Ok(SquashReport {
                file,
                version,
                squashes,
                objects: dump.objects().len(),
            })
        };
        self.locked("squash", DownSteps::Skip, false, body).await
    }
}

/// Why the database is not one to squash at `version`: each migration that is applied after
/// it, or pending up to it.
fn not_at(version: i64, why: &[String]) -> Error {
    Error::config(format!(
        "the database is not at version {version} ({}). Squash reads the schema at version \
         {version} from a database that has exactly the migrations up to it applied: build one \
         with `dirthara -d <scratch-url> to {version}` and squash from it",
        why.join(", ")
    ))
}

/// Writes `text` to a new file, refusing to replace one.
fn write_new(file: &std::path::Path, text: &str) -> Result<()> {
    use std::io::Write;
    let opened = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(file);
    let written = opened.and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()));
    written.map_err(|e| {
        let fix = match e.kind() {
            std::io::ErrorKind::AlreadyExists => {
                "it exists already; move it away to write it again"
            }
            _ => "check the directory exists and may be written",
        };
        Error::new(ErrorKind::Config {
            message: format!("cannot write the baseline `{}`: {e}; {fix}", file.display()),
        })
    })
}
