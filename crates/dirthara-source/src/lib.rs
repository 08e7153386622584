//! The migration file formats of [dirthara](https://docs.rs/dirthara), with no database
//! and no async: what a migration is ([`migration`]) and how files become migrations
//! ([`files`]) — names, header directives, JSON command documents, checksums, and every
//! refusal of bad input — plus the SQL tokenizer the engine runs files with ([`sql`]), and
//! the files `dirthara new` writes in each layout ([`scaffold`]).
//!
//! It is its own crate so that `dirthara` (at run time) and `embed_migrations!` (at compile
//! time) apply exactly the same rules.

pub mod commands;
pub mod directives;
pub mod files;
mod layout;
pub mod migration;
mod names;
pub mod placeholders;
pub mod scaffold;
pub mod sql;
mod vocabulary;

use std::fmt;
use std::path::PathBuf;

/// One bad file and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Problem {
    pub file: PathBuf,
    /// Why, and how to fix it.
    pub reason: String,
}

impl Problem {
    /// `file` is refused because of `reason` (which says how to fix it).
    pub fn new(file: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Problem {
            file: file.into(),
            reason: reason.into(),
        }
    }
}

/// Why migrations could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceError {
    /// Migration files are malformed: every one found in the run (never empty).
    Invalid(Vec<Problem>),
    /// A migration directory cannot be read.
    Directory { dir: PathBuf, message: String },
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceError::Invalid(problems) => write_problems(f, problems),
            SourceError::Directory { message, .. } => f.write_str(message),
        }
    }
}

/// One problem as `file: reason`; several as a count, then one `file: reason` per line.
pub fn write_problems(f: &mut impl fmt::Write, problems: &[Problem]) -> fmt::Result {
    if let [one] = problems {
        return write!(f, "{}: {}", one.file.display(), one.reason);
    }
    write!(
        f,
        "{} problems in the migration files (nothing was run):",
        problems.len()
    )?;
    write_problem_lines(f, problems)
}

/// Each problem on a line of its own, `file: reason`, indented under a heading.
pub fn write_problem_lines(f: &mut impl fmt::Write, problems: &[Problem]) -> fmt::Result {
    for p in problems {
        write!(f, "\n  {}: {}", p.file.display(), p.reason)?;
    }
    Ok(())
}

impl std::error::Error for SourceError {}
