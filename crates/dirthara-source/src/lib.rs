//! The migration file formats of [dirthara](https://docs.rs/dirthara), with no database
//! and no async: what a migration is ([`migration`]) and how files become migrations
//! ([`files`]) — names, header directives, JSON command documents, checksums, and every
//! refusal of bad input.
//!
//! It is its own crate so that `dirthara` (at run time) and `embed_migrations!` (at compile
//! time) apply exactly the same rules.

pub mod files;
pub mod migration;
pub mod sql;

use std::fmt;
use std::path::PathBuf;

/// Why migrations could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceError {
    /// A migration file is malformed; `reason` says why and how to fix it.
    Invalid { file: PathBuf, reason: String },
    /// A migration directory cannot be read.
    Directory { dir: PathBuf, message: String },
}

impl SourceError {
    pub(crate) fn invalid(file: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        SourceError::Invalid {
            file: file.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::Invalid { file, reason } => write!(f, "{}: {reason}", file.display()),
            SourceError::Directory { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for SourceError {}
