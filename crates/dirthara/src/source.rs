//! Loading migrations from directories. The rules (file names, directives, JSON command
//! documents, every refusal of bad input) live in [`dirthara_source::files`]; this module
//! turns their errors into dirthara's.

use std::path::PathBuf;

pub use dirthara_source::files::{check_name, parse_commands, Commands};
use dirthara_source::SourceError;

use crate::error::{Error, Result};
use crate::migration::Migration;

/// Loads every migration in `directories`, in order, and validates the set as a whole;
/// nothing touches a database.
pub fn load_directories(directories: &[PathBuf]) -> Result<Vec<Migration>> {
    dirthara_source::files::load_directories(directories).map_err(Error::from)
}

impl From<SourceError> for Error {
    fn from(error: SourceError) -> Self {
        match error {
            SourceError::Invalid { file, reason } => Error::invalid(file, reason),
            SourceError::Directory { message, .. } => Error::config(message),
        }
    }
}
