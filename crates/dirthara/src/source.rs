//! Loading migrations from directories. The rules (file names, layouts, directives, JSON
//! command documents, every refusal of bad input) live in the `dirthara-source` crate,
//! shared with `embed_migrations!`; this module turns its errors into dirthara's.

use std::path::PathBuf;

pub use dirthara_source::files::DirectoryLayout;
pub(crate) use dirthara_source::files::{
    check_name, empty_up, is_blank_commands, refuse_nul, Layout, Loaded,
};
pub(crate) use dirthara_source::sql;

use crate::error::{Error, Result};
use crate::migration::DownSteps;

/// Loads directories with their layouts (`None`: detected from the files), reading their
/// down steps or not.
pub(crate) fn load_sources(
    sources: &[(PathBuf, Option<Layout>)],
    downs: DownSteps,
) -> Result<Loaded> {
    dirthara_source::files::load_sources_with(sources, downs).map_err(Error::from)
}
