//! `dump --check FILE` and `drift --against FILE`: the database's schema against a dump
//! written earlier, object by object, and its applied versions against the file's.

use std::path::Path;

use dirthara::{compare_schema_versions, compare_schemas, Config, Error, ErrorKind, SchemaDump};

use crate::error::CliError;
use crate::render::Renderer;

/// The dump in `file`; an unreadable file or one that is no dump is the user's input at fault.
pub(crate) fn read_dump(file: &Path, flag: &str) -> Result<SchemaDump, CliError> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        Error::config(format!(
            "cannot read the dump {} ({flag}): {e}; write it first with `dirthara dump > {}`",
            file.display(),
            file.display()
        ))
    })?;
    SchemaDump::parse(&text).map_err(|e| {
        Error::config(format!(
            "{} ({flag}) is not a dump dirthara can read: {e}; write it again with \
             `dirthara dump > {}`",
            file.display(),
            file.display()
        ))
        .into()
    })
}

/// Prints whether `live` is `expected`, and fails with `SCHEMA_MISMATCH` when it is not.
pub(crate) fn check(
    renderer: &Renderer,
    expected: &SchemaDump,
    live: &SchemaDump,
    file: &Path,
    config: &Config,
) -> Result<(), CliError> {
    let drift = compare_schemas(expected, live);
    let versions = compare_schema_versions(expected, live);
    renderer.schema_check(file, &drift, versions.as_deref());
    let versions = versions.is_some();
    if drift.is_empty() && !versions {
        return Ok(());
    }
    Err(Error::new(ErrorKind::SchemaMismatch {
        connection: config.history_connection.clone(),
        file: file.to_path_buf(),
        objects: drift.len(),
        versions,
    })
    .into())
}
