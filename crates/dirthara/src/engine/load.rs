//! Loading a command's migrations, touching no database: the configured directories and the
//! migrations given in code, each read as the database it runs on would read it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{Connections, Migrator};
use crate::backend::BackendKind;
use crate::error::{Code, Error, ErrorKind, Result};
use crate::events::{EventKind, Warning};
use crate::migration::{Direction, DownSteps, Migration, StepFormat};
use crate::source::load_sources;

#[cfg(test)]
mod tests;

impl Migrator {
    /// Loads and validates every migration, both steps, touching no database. Finding none
    /// is `NO_MIGRATIONS`.
    pub fn load(&self) -> Result<Vec<Migration>> {
        self.load_steps(DownSteps::Read, &self.connections())
    }

    /// [`Migrator::load`] for a command: one that never reverses leaves down files unread.
    pub(super) fn load_steps(
        &self,
        downs: DownSteps,
        connections: &Connections,
    ) -> Result<Vec<Migration>> {
        let sources: Vec<_> = (self.config.directories.iter())
            .map(|dir| (dir.clone(), self.config.layouts.get(dir).copied()))
            .collect();
        let loaded = load_sources(&sources, downs)?;
        for skipped in loaded.skipped {
            self.events.emit(EventKind::Warning(Warning::new(
                Code::SkippedFile,
                format!(
                    "{} was not loaded: {}",
                    skipped.path.display(),
                    skipped.reason
                ),
            )));
        }
        let mut migrations = loaded.migrations;
        refuse_nul_in_code(&self.extra)?;
        for extra in self.extra.iter() {
            // Migrations given in code follow the rules of files: a version of 0 ..= 2^63-1
            // (0 as sqlx and Diesel allow), a name of letters, digits, `.`, `_` and `-`.
            let named = crate::source::check_name(&extra.name);
            if let Err(reason) = (extra.version >= 0)
                .then_some(())
                .ok_or_else(|| {
                    format!(
                        "the version {} is negative; use 0 ..= 2^63-1",
                        extra.version
                    )
                })
                .and(named)
            {
                return Err(Error::invalid(PathBuf::from(&extra.origin), reason));
            }
            // A Rust migration is its code: without the code registered it cannot run, which
            // is better said now than half-way through a run.
            if extra.format == StepFormat::Rust && !self.code.contains_key(&extra.version) {
                return Err(Error::invalid(
                    PathBuf::from(&extra.origin),
                    "is a Rust migration whose code was not registered with this Migrator; \
                     add it with `Migrator::with_rust_migration`",
                ));
            }
            let clash = |m: &&Migration| {
                !m.repeatable
                    && m.is_baseline() == extra.is_baseline()
                    && m.version == extra.version
            };
            if let Some(existing) = migrations.iter().find(clash) {
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
        // Nothing to run is a wrong --dir far more often than a project without migrations:
        // said before any database is touched, so nothing is created either.
        if migrations.is_empty() {
            return Err(Error::new(ErrorKind::NoMigrations {
                directories: self.config.directories.clone(),
            }));
        }
        // Baselines after every versioned migration, repeatable ones after them, in name order
        // (a stable sort).
        migrations.sort_by_key(|m| (m.repeatable, m.is_baseline(), m.version));
        let kinds: BTreeMap<&str, BackendKind> = connections.known().collect();
        self.check_formats(&migrations, &kinds)?;
        self.read_as_their_database_would(&mut migrations, &kinds)?;
        Ok(migrations)
    }

    /// Reads each step as the database it runs on would ([`crate::backend::read_steps`]: a SQL
    /// file that controls its own transaction is run as written, an up step with nothing to
    /// run is refused, a MySQL `DELIMITER` script must split cleanly, a JSON command file
    /// convert to the documents MongoDB runs), and each step's table-lock timeout directive.
    /// Every problem is reported at once, before anything runs.
    fn read_as_their_database_would(
        &self,
        migrations: &mut [Migration],
        kinds: &BTreeMap<&str, BackendKind>,
    ) -> Result<()> {
        let mut problems = Vec::new();
        let history = self.config.history_connection.as_str();
        for migration in migrations.iter_mut() {
            problems.extend(check_table_lock_timeouts(migration));
            if migration.is_baseline() && migration.connection != history {
                problems.push(crate::error::Problem::new(
                    PathBuf::from(&migration.origin),
                    "a baseline migration runs on the history connection, where `dirthara \
                     squash` read its schema; remove its `-- dirthara:connection` line",
                ));
            }
            if migration.repeatable && migration.connection != history {
                problems.push(crate::error::Problem::new(
                    PathBuf::from(&migration.origin),
                    format!(
                        "a repeatable migration runs on the history connection `{history}`, \
                         beside its record; remove `-- dirthara:connection {}`, or make it a \
                         versioned migration",
                        migration.connection
                    ),
                ));
            }
            if let Some(&kind) = kinds.get(migration.connection.as_str()) {
                problems.extend(crate::backend::read_steps(kind, migration));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::InvalidMigration { problems }))
        }
    }

    /// Every connection a migration names must have a URL: refuse before anything runs,
    /// rather than stop half-way.
    pub(super) fn check_connections(&self, migrations: &[Migration]) -> Result<()> {
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
    fn check_formats(
        &self,
        migrations: &[Migration],
        kinds: &BTreeMap<&str, BackendKind>,
    ) -> Result<()> {
        for migration in migrations {
            // A connection without a usable URL is reported when it is needed.
            let Some(&kind) = kinds.get(migration.connection.as_str()) else {
                continue;
            };
            #[cfg(test)]
            if kind == BackendKind::Memory {
                continue;
            }
            if migration.format != StepFormat::Rust
                && kind.capabilities().step_format() != migration.format
            {
                return Err(Error::invalid(
                    PathBuf::from(&migration.origin),
                    format!(
                        "is a {} migration but connection `{}` is {}; MongoDB migrations are \
                         `.json` command files, SQL databases take `.sql` files",
                        migration.format.name(),
                        migration.connection,
                        kind.name()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Each step's `-- dirthara:table-lock-timeout` read by the one parser of
/// `table_lock_timeout`, so `5s`, `off` and every refusal mean what they mean in the file,
/// the environment and the flags.
fn check_table_lock_timeouts(migration: &Migration) -> Vec<crate::error::Problem> {
    [Direction::Up, Direction::Down]
        .into_iter()
        .filter_map(|direction| {
            let text = migration.table_lock_timeout_in(direction)?;
            let origin = dirthara_core::config::Origin::Named("`-- dirthara:table-lock-timeout`");
            let error = dirthara_core::config::TABLE_LOCK_TIMEOUT
                .read(text, origin)
                .err()?;
            Some(crate::error::Problem::new(
                PathBuf::from(&migration.origin),
                format!("{direction} step: {error}"),
            ))
        })
        .collect()
}

/// Migrations given in code (or embedded) face the rule files face as they are read: no NUL
/// byte in a name or a step (see `dirthara_source::files::refuse_nul`). Every such
/// migration is named at once, before anything runs.
fn refuse_nul_in_code(migrations: &[Migration]) -> Result<()> {
    use crate::source::refuse_nul;
    let mut problems = Vec::new();
    for migration in migrations {
        let steps = [
            ("its name", Some(migration.name.as_str())),
            ("its up step", Some(migration.up())),
            ("its down step", migration.step(Direction::Down)),
        ];
        for (what, text) in steps {
            if let Err(reason) = refuse_nul(text.unwrap_or_default()) {
                problems.push(crate::error::Problem::new(
                    PathBuf::from(&migration.origin),
                    format!("{what} {reason}"),
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::new(ErrorKind::InvalidMigration { problems }))
    }
}
