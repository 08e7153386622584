//! Loading migrations from directories. The rules (file names, directives, JSON command
//! documents, every refusal of bad input) live in [`dirthara_source::files`]; this module
//! turns their errors into dirthara's.

use std::path::PathBuf;

pub use dirthara_source::files::{
    check_name, is_blank_commands, parse_commands, Commands, Layout, Loaded, Skipped,
};
pub use dirthara_source::sql;
use dirthara_source::SourceError;

use crate::error::{Error, ErrorKind, Result};
use crate::migration::Migration;

/// Loads every migration in `directories`, in order, and validates the set as a whole;
/// nothing touches a database.
///
/// # Examples
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::write(dir.path().join("1_users.up.sql"), "CREATE TABLE users (id INT)").unwrap();
/// std::fs::write(dir.path().join("README.md"), "ignored").unwrap();
/// let migrations = dirthara::source::load_directories(&[dir.path().to_path_buf()])?;
/// assert_eq!((migrations[0].version, migrations[0].name.as_str()), (1, "users"));
///
/// std::fs::write(dir.path().join("users.sql"), "SELECT 1").unwrap();
/// let err = dirthara::source::load_directories(&[dir.path().to_path_buf()]).unwrap_err();
/// assert_eq!(err.code(), dirthara::Code::InvalidMigration);
/// assert!(err.to_string().contains("users.sql"));
/// # Ok::<(), dirthara::Error>(())
/// ```
pub fn load_directories(directories: &[PathBuf]) -> Result<Vec<Migration>> {
    dirthara_source::files::load_directories(directories).map_err(Error::from)
}

/// Loads directories with their layouts (`None`: detected from the files).
pub fn load_sources(sources: &[(PathBuf, Option<Layout>)]) -> Result<Loaded> {
    dirthara_source::files::load_sources(sources).map_err(Error::from)
}

/// [`load_directories`], also naming what looks like a migration but was not loaded
/// (`Migrator::load` turns each into a `SKIPPED_FILE` warning).
pub fn load_directories_reporting(directories: &[PathBuf]) -> Result<Loaded> {
    dirthara_source::files::load_directories_reporting(directories).map_err(Error::from)
}

impl From<SourceError> for Error {
    fn from(error: SourceError) -> Self {
        match error {
            SourceError::Invalid(problems) => Error::new(ErrorKind::InvalidMigration { problems }),
            SourceError::Directory { message, .. } => Error::config(message),
        }
    }
}
