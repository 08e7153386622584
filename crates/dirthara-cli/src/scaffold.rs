//! `dirthara new`: the next migration's files, written in the layout of the directory they
//! go to (configured with `format`, or detected from the files already there), so a project
//! still shared with its previous tool keeps one layout per directory.

use std::io::Write;
use std::path::{Path, PathBuf};

use dirthara::{DirectoryLayout, Layout};
use dirthara_source::scaffold::{
    new_migration_files, new_repeatable_file, NewFile, NewMigration, Refusal, Template,
};

use crate::error::{CliError, IoAction, NewRefused};

/// What `new` wrote, and what to know about it.
pub(crate) struct Created {
    /// The files written, the up step first.
    pub paths: Vec<PathBuf>,
    /// Notices for stderr: the template is refused until filled in; a `V<n>__` directory
    /// not declared Flyway's got no undo file, and how to declare it.
    pub notes: Vec<String>,
}

/// Writes the next migration `name` into `dir` (created if needed) in `layout` (declared with
/// `format` in dirthara.toml), or in the layout detected from `dir`'s files when `None`.
/// Which files, named how and holding what, is the layout's rule (`dirthara_source::scaffold`);
/// here they are written, never over an existing file.
pub(crate) fn create_migration(
    dir: &Path,
    declared: Option<Layout>,
    name: &str,
    irreversible: bool,
    template: Template,
) -> Result<Created, CliError> {
    let bad_name = |reason| NewRefused::BadName {
        name: name.to_string(),
        reason,
    };
    // A bad name is said first, even in a directory whose layout cannot be told.
    dirthara_source::files::check_name(name).map_err(bad_name)?;
    let layout = DirectoryLayout {
        layout: match declared {
            Some(layout) => layout,
            None => detect_layout(dir)?,
        },
        declared: declared.is_some(),
    };
    let asked = NewMigration {
        name,
        irreversible,
        template,
    };
    let existing = entry_names(dir);
    let existing: Vec<&str> = existing.iter().map(String::as_str).collect();
    let files =
        new_migration_files(dir, layout, &existing, unix_seconds(), asked).map_err(|refusal| {
            match refusal {
                Refusal::BadName(reason) => bad_name(reason),
                Refusal::JsonInSqlLayout(layout) => NewRefused::MongoInSqlLayout {
                    dir: dir.to_path_buf(),
                    layout,
                },
            }
        })?;
    write_new_files(dir, &files)?;
    let mut notes = Vec::new();
    if let Some(up) = files.first() {
        let what = match template {
            Template::Sql => "statements",
            Template::Mongo => "commands",
        };
        notes.push(format!(
            "write the migration's {what} in `{}`: until it has something to run, it is \
             refused (INVALID_MIGRATION, empty up)",
            up.path.display()
        ));
    }
    if layout.layout == Layout::Flyway && !layout.has_flyway_undo() && !irreversible {
        notes.push(format!(
            "no undo file was written: `V<n>__` files are Flyway's or refinery's, and refinery \
             runs a `U` file as a migration of its own. If this directory is Flyway's, {}, and \
             `new` writes a `U<n>__` undo file with each migration",
            dirthara_source::files::declare_flyway(dir)
        ));
    }
    Ok(Created {
        paths: files.into_iter().map(|file| file.path).collect(),
        notes,
    })
}

/// Writes a repeatable migration `R__<name>` into `dir` (created if needed), whatever the
/// directory's layout: every layout runs it.
pub(crate) fn create_repeatable(
    dir: &Path,
    name: &str,
    template: Template,
) -> Result<Created, CliError> {
    let file = new_repeatable_file(dir, name, template).map_err(|refusal| match refusal {
        Refusal::BadName(reason) => NewRefused::BadName {
            name: name.to_string(),
            reason,
        },
        Refusal::JsonInSqlLayout(layout) => NewRefused::MongoInSqlLayout {
            dir: dir.to_path_buf(),
            layout,
        },
    })?;
    write_new_files(dir, std::slice::from_ref(&file))?;
    let note = format!(
        "write its statements in `{}`, written to run again (`CREATE OR REPLACE`): until it has \
         something to run, it is refused (INVALID_MIGRATION, empty up)",
        file.path.display()
    );
    Ok(Created {
        paths: vec![file.path],
        notes: vec![note],
    })
}

/// Writes `files` into `dir` (created if needed), never over an existing file.
fn write_new_files(dir: &Path, files: &[NewFile]) -> Result<(), CliError> {
    std::fs::create_dir_all(dir).map_err(CliError::io(IoAction::CreateMigrationDirectory(
        dir.to_path_buf(),
    )))?;
    for file in files {
        if let Some(parent) = file.path.parent() {
            std::fs::create_dir_all(parent).map_err(CliError::io(IoAction::CreateDirectory(
                parent.to_path_buf(),
            )))?;
        }
        let mut written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&file.path)
            .map_err(CliError::io(IoAction::CreateFile(file.path.clone())))?;
        written
            .write_all(file.text.as_bytes())
            .map_err(CliError::io(IoAction::WriteFile(file.path.clone())))?;
    }
    Ok(())
}

/// The one layout of the files in `dir`; dirthara's own for a new or empty directory. Told
/// from the names and section markers only, so templates not yet filled in do not stop the
/// next `new`.
fn detect_layout(dir: &Path) -> Result<Layout, NewRefused> {
    if !dir.is_dir() {
        return Ok(Layout::Plain);
    }
    match dirthara_source::files::detect_layout(dir) {
        Ok(layout) => Ok(layout.unwrap_or(Layout::Plain)),
        Err(source) => Err(NewRefused::UnknownLayout {
            dir: dir.to_path_buf(),
            source: dirthara::Error::from(source),
        }),
    }
}

/// The names of the entries in `dir` (none when it does not exist yet).
fn entry_names(dir: &Path) -> Vec<String> {
    (std::fs::read_dir(dir).into_iter().flatten().flatten())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

fn unix_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
