//! What loading finds on disk: the parts of migrations before they are paired, what is
//! wrong with them, and what was skipped.

use std::path::PathBuf;

use crate::names::Role;
use crate::vocabulary::{DirectoryLayout, StepFormat};
use crate::Problem;

/// Something in a migration directory that looks like a migration but was not loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub path: PathBuf,
    pub reason: String,
}

/// One step of a migration as found on disk, before its pair is known.
#[derive(Debug)]
pub(crate) struct Part {
    pub version: i64,
    pub name: String,
    pub role: Role,
    pub format: StepFormat,
    pub path: PathBuf,
    /// The step's text when the layout already read it (a section of a file).
    pub text: Option<String>,
    /// The layout turned the transaction off (goose `NO TRANSACTION`, dbmate
    /// `transaction:false`, Diesel `run_in_transaction = false`).
    pub no_transaction: bool,
    /// The layout of its directory, once the directory's layout is settled.
    pub layout: Option<DirectoryLayout>,
    /// Where its text starts in the file, and the file lines its text leaves out (a section
    /// of a dbmate or goose file); `(1, [])` for a whole file.
    pub lines: (usize, Vec<usize>),
    /// The byte ranges of its text under goose's `-- +goose ENVSUB ON`.
    pub envsub: Vec<std::ops::Range<usize>>,
    /// A repeatable migration (`R__<name>.sql`, `.json`): `version` is 0 and means nothing.
    pub repeatable: bool,
    /// A baseline migration (`B<V>__<name>.sql`, `.json`), which `dirthara squash` writes.
    pub baseline: bool,
}

/// What one loading run found wrong, and what it skipped.
#[derive(Default)]
pub(crate) struct Findings {
    pub problems: Vec<Problem>,
    pub skipped: Vec<Skipped>,
}

impl Findings {
    pub(crate) fn problem(&mut self, file: impl Into<PathBuf>, reason: impl Into<String>) {
        self.problems.push(Problem {
            file: file.into(),
            reason: reason.into(),
        });
    }

    pub(crate) fn skip(&mut self, path: impl Into<PathBuf>, reason: impl Into<String>) {
        self.skipped.push(Skipped {
            path: path.into(),
            reason: reason.into(),
        });
    }
}
