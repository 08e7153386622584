//! The schema snapshot `drift` compares with: taken under the lock at the end of every
//! command that changed the schema or what the history says of it (a step applied or
//! reverted, a `baseline`, a `resolve`), and by `drift --accept`. A command that changed
//! nothing takes none, so a no-op `migrate` costs nothing more; and a command that failed
//! takes none, so what a failed step left is never taken as the reference. The same dump goes
//! to the `dump_schema` file, when one is set.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::dump::read_dump;
use super::session::Session;
use crate::backend::Backend;
use crate::error::Result;
use crate::events::{EventKind, Warning};
use crate::format::format_timestamp;
use crate::schema::{SchemaDump, SchemaSnapshot};
use crate::Code;

/// The schema of `history`'s database now, as a snapshot would keep it.
pub(super) async fn snapshot_now(
    history: &mut dyn Backend,
    connection: &str,
) -> Result<SchemaSnapshot> {
    let dump = read_dump(history, connection).await?;
    let mut server = history.server_version().unwrap_or_default().to_string();
    if let Some((cut, _)) = server.char_indices().nth(255) {
        server.truncate(cut);
    }
    Ok(SchemaSnapshot {
        version: dump.applied().iter().map(|a| a.version).max(),
        server,
        taken_at: format_timestamp(SystemTime::now()),
        dump,
    })
}

impl Session<'_> {
    /// Takes the snapshot, and writes the `dump_schema` file, if this command changed the
    /// schema or its history. A failure is a warning: what the command did is committed and
    /// recorded; `drift` then compares with the snapshot before, and says the versions differ.
    pub(super) async fn keep_snapshot(&mut self) {
        let changed = self.schema_touched || !self.completed.is_empty();
        if !changed || !self.history.keeps_snapshots() {
            return;
        }
        let connection = self.migrator.config.history_connection.clone();
        let file = self.migrator.config.dump_schema.clone();
        if !self.migrator.config.schema_snapshot {
            return self.forget_snapshot(&connection, file).await;
        }
        let snapshot = match snapshot_now(self.history.as_mut(), &connection).await {
            Ok(snapshot) => snapshot,
            Err(error) => return self.warn(Code::HistoryError, not_taken(&error, file.as_deref())),
        };
        // Written only while the lock is still this run's: a lease lost while the schema was
        // read may mean another runner is migrating, and its half-done schema is no reference.
        let written = match self.ensure_lock(None).await {
            Ok(()) => self.history.write_snapshot(&snapshot.store()).await,
            Err(error) => return self.warn(Code::HistoryError, not_taken(&error, file.as_deref())),
        };
        if let Err(error) = written {
            self.warn(Code::HistoryError, not_taken(&error, None));
        }
        if let Some(path) = file {
            self.write_dump_file(&path, &snapshot.dump);
        }
    }

    /// `schema_snapshot = off`: no catalog read for a snapshot, and the one kept removed, so
    /// that `drift` says it has none rather than comparing with a schema older than the
    /// history. The `dump_schema` file is still written, since it was asked for.
    async fn forget_snapshot(&mut self, connection: &str, file: Option<PathBuf>) {
        if let Err(error) = self.history.forget_snapshot().await {
            let message = format!(
                "the schema snapshot `drift` compares with, now older than the history, was \
                 not removed (schema_snapshot = off): {error}. `drift` will report this \
                 command's changes; compare with `dirthara drift --against FILE` instead"
            );
            self.warn(Code::HistoryError, message);
        }
        let Some(path) = file else { return };
        match read_dump(self.history.as_mut(), connection).await {
            Ok(dump) => self.write_dump_file(&path, &dump),
            Err(error) => self.warn(Code::ConfigError, dump_file_not_written(&path, &error)),
        }
    }

    fn write_dump_file(&self, path: &Path, dump: &SchemaDump) {
        if let Err(error) = write_if_changed(path, &dump.render()) {
            self.warn(Code::ConfigError, dump_file_not_written(path, &error));
        }
    }

    fn warn(&self, code: Code, message: String) {
        (self.migrator.events).emit(EventKind::Warning(Warning::new(code, message)));
    }
}

/// The warning for the `dump_schema` file not written.
fn dump_file_not_written(path: &Path, error: &dyn std::fmt::Display) -> String {
    format!(
        "the schema was not written to {} (dump_schema): {error}. What ran is recorded; write \
         it with `dirthara dump > {}`",
        path.display(),
        path.display()
    )
}

/// The warning for a snapshot not written (and, when `file` is given, the `dump_schema` file
/// not written either).
fn not_taken(error: &crate::Error, file: Option<&Path>) -> String {
    let also = file.map_or_else(String::new, |file| {
        format!(" (nor {}, the dump_schema file)", file.display())
    });
    format!(
        "the schema snapshot that `drift` compares with was not written{also}: {error}. What \
         ran is recorded; once the cause is fixed, take the snapshot with `dirthara drift \
         --accept`"
    )
}

/// Writes `text` to `path` unless it holds it already: into a file beside it, then renamed
/// over it, so that a reader never sees half a dump and an unchanged file keeps its time.
fn write_if_changed(path: &Path, text: &str) -> std::io::Result<()> {
    if std::fs::read(path).is_ok_and(|old| old == text.as_bytes()) {
        return Ok(());
    }
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let beside = path.with_file_name(format!(".{name}.dirthara-{}", std::process::id()));
    std::fs::write(&beside, text)?;
    std::fs::rename(&beside, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&beside);
    })
}
