//! Loading migrations from directories: every refusal of bad input, all reported at once.
//!
//! Everything here happens before any database is touched, so a typo in a file name costs
//! nothing but an error message; and one run names every bad file, not only the first.
//!
//! A run has two stages: each directory is listed and its entries recognised as steps of a
//! layout (`files/scan.rs`), then the steps of all directories are paired into migrations
//! (`files/assemble.rs`), reading each step's text (`files/read.rs`).

mod assemble;
pub(crate) mod found;
pub(crate) mod read;
mod scan;

use std::path::PathBuf;

pub use crate::commands::{is_blank_commands, parse_commands, Commands};
pub use crate::directives::{parse_directives, valid_connection_name, Header};
pub use crate::names::check_name;

pub use crate::layout::{declare_flyway, empty_up, DirectoryLayout, Layout};
use crate::migration::{DownSteps, Migration};
use crate::SourceError;
use found::Findings;

use assemble::assemble;
pub use found::Skipped;
pub use read::refuse_nul;
use scan::scan_directory;

type Result<T, E = SourceError> = std::result::Result<T, E>;

/// The migrations of a set of directories, and what was skipped there (for warnings).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Loaded {
    pub migrations: Vec<Migration>,
    pub skipped: Vec<Skipped>,
}

/// Loads every migration in `directories`, in order, and validates the set as a whole.
///
/// Files whose extension is not `.sql` or `.json` are ignored (a `README.md` may live beside
/// the migrations); such a file whose name does not parse is an error, never silently skipped.
pub fn load_directories(directories: &[PathBuf]) -> Result<Vec<Migration>> {
    load_directories_reporting(directories).map(|loaded| loaded.migrations)
}

/// [`load_directories`], also returning what looks like a migration but was not loaded.
/// `Err` lists every bad file at once.
pub fn load_directories_reporting(directories: &[PathBuf]) -> Result<Loaded> {
    let sources: Vec<(PathBuf, Option<Layout>)> =
        directories.iter().map(|d| (d.clone(), None)).collect();
    load_sources(&sources)
}

/// [`load_directories_reporting`] with each directory's layout: `None` detects it from the
/// files (a directory mixing layouts is refused, naming the files), `Some` requires it.
pub fn load_sources(sources: &[(PathBuf, Option<Layout>)]) -> Result<Loaded> {
    load_sources_with(sources, DownSteps::Read)
}

/// The layout of the migrations in `dir`, told from their names and section markers alone:
/// no step is validated, so a directory of `dirthara new` templates not yet filled in still
/// has its layout. `None` when it holds no migration; `Err` when its entries do not read as
/// one layout (a name that does not parse, layouts mixed), with every such problem.
pub fn detect_layout(dir: &std::path::Path) -> Result<Option<Layout>> {
    let mut findings = Findings::default();
    let parts = scan_directory(dir, None, &mut findings)?;
    if !findings.problems.is_empty() {
        return Err(SourceError::Invalid(findings.problems));
    }
    Ok(parts.first().and_then(|p| p.layout).map(|l| l.layout))
}

/// [`load_sources`], reading the down steps or not. With [`DownSteps::Skip`] a down file is
/// still listed and paired with its up step (a down without an up, or beside an up-only
/// file, is refused), but never opened.
pub fn load_sources_with(
    sources: &[(PathBuf, Option<Layout>)],
    downs: DownSteps,
) -> Result<Loaded> {
    let mut findings = Findings::default();
    let mut parts = Vec::new();
    for (dir, layout) in sources {
        parts.extend(scan_directory(dir, *layout, &mut findings)?);
    }
    let migrations = assemble(parts, downs, &mut findings);
    if findings.problems.is_empty() {
        Ok(Loaded {
            migrations,
            skipped: findings.skipped,
        })
    } else {
        Err(SourceError::Invalid(findings.problems))
    }
}
