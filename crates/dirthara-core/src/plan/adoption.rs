//! Adopting another tool's history (`baseline --from`): which files here that tool applied,
//! decided purely from what its history says, so every rule is tested without a database.

use std::collections::BTreeSet;
use std::fmt;

use crate::error::{Error, ErrorKind};
use crate::history::AppliedMigration;
use crate::migration::Migration;

/// What another tool's history says, reduced to what adoption needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ForeignHistory {
    /// The tool, as `--from` names it.
    pub tool: String,
    /// The table it was read from.
    pub table: String,
    /// Versions the tool recorded as applied.
    pub applied: BTreeSet<i64>,
    /// Every version up to this one counts as applied too (golang-migrate keeps only its
    /// newest version; a Flyway baseline stands for everything at or below it).
    pub through: Option<Through>,
    /// An entry the tool itself considers failed or dirty.
    pub failed: Option<ForeignFailure>,
    /// Repeatable migrations the tool applied (Flyway's `R__<name>.sql`): the tool's
    /// checksum of the text it last applied, by name.
    pub repeatables: std::collections::BTreeMap<String, i32>,
}

/// "Everything up to `version`", and why the history says only that much.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Through {
    pub version: i64,
    /// Whether `version` itself is a migration that must have a file here (golang-migrate's
    /// newest version) or only a marker (a Flyway baseline version).
    pub needs_file: bool,
    /// Said in the output: why every file up to `version` is recorded.
    pub reason: String,
}

/// An entry the other tool left failed or dirty, with that tool's own way out.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForeignFailure {
    pub version: i64,
    /// `dirty` (golang-migrate) or `failed` (sqlx, Flyway).
    pub state: String,
    /// How to clear it, in that tool's terms.
    pub fix: String,
}

impl ForeignFailure {
    /// Migration `version`, left `state` by the other tool, cleared as `fix` says.
    pub fn new(version: i64, state: impl Into<String>, fix: impl Into<String>) -> Self {
        ForeignFailure {
            version,
            state: state.into(),
            fix: fix.into(),
        }
    }
}

/// What `baseline --from` records: every adopted migration, as one batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdoptionPlan<'a> {
    /// In version order.
    pub records: Vec<&'a Migration>,
    /// Always 1: adoption is refused unless dirthara's history is empty.
    pub batch: i64,
    /// Facts the operator should read: the golang-migrate rule, files left pending below
    /// the newest adopted version.
    pub notes: Vec<String>,
}

/// Why adoption was refused, before anything was written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AdoptionRefusal {
    /// dirthara's history already has records (a second `baseline --from`).
    HistoryNotEmpty { records: usize, newest: i64 },
    /// The other tool's history has a failed or dirty entry.
    ForeignFailed {
        tool: String,
        table: String,
        failure: ForeignFailure,
    },
    /// Versions the other tool applied have no migration file here.
    NoFile {
        tool: String,
        table: String,
        versions: Vec<i64>,
    },
}

impl fmt::Display for AdoptionRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdoptionRefusal::HistoryNotEmpty { records, newest } => write!(
                f,
                "dirthara's history already has {records} record(s) (newest: version {newest}), so \
                 there is nothing to adopt: `baseline --from` only starts an empty history. \
                 `dirthara status` shows what is recorded"
            ),
            AdoptionRefusal::ForeignFailed {
                tool,
                table,
                failure,
            } => write!(
                f,
                "{tool}'s history `{table}` has version {} marked {}: adopting it would record a \
                 migration whose changes may be half-made. {}; then run `baseline --from {tool}` again",
                failure.version, failure.state, failure.fix
            ),
            AdoptionRefusal::NoFile {
                tool,
                table,
                versions,
            } => {
                let list: Vec<String> = versions.iter().map(i64::to_string).collect();
                write!(
                    f,
                    "{tool}'s history `{table}` has version(s) {} applied, but no migration file \
                     here has that version; add the file(s) to the migration directories (or point \
                     --dir at the directory {tool} used), then run `baseline --from {tool}` again",
                    list.join(", ")
                )
            }
        }
    }
}

impl From<AdoptionRefusal> for Error {
    fn from(refusal: AdoptionRefusal) -> Self {
        Error::new(ErrorKind::Config {
            message: refusal.to_string(),
        })
    }
}

/// Plans `baseline --from`: the migrations here that the other tool applied, to be recorded
/// as applied (with the checksums of the files here) in one batch.
///
/// Refuses, in this order: a non-empty dirthara history; a failed or dirty entry in the
/// other tool's history; an applied version without a file here.
pub fn plan_adoption<'a>(
    available: &'a [Migration],
    applied: &[AppliedMigration],
    foreign: &ForeignHistory,
) -> Result<AdoptionPlan<'a>, AdoptionRefusal> {
    if let Some(newest) = applied.iter().map(|a| a.version).max() {
        return Err(AdoptionRefusal::HistoryNotEmpty {
            records: applied.len(),
            newest,
        });
    }
    if let Some(failure) = &foreign.failed {
        return Err(AdoptionRefusal::ForeignFailed {
            tool: foreign.tool.clone(),
            table: foreign.table.clone(),
            failure: failure.clone(),
        });
    }
    let here: BTreeSet<i64> = available.iter().map(|m| m.version).collect();
    let mut required: BTreeSet<i64> = foreign.applied.clone();
    if let Some(through) = foreign.through.as_ref().filter(|t| t.needs_file) {
        required.insert(through.version);
    }
    let missing: Vec<i64> = required.difference(&here).copied().collect();
    if !missing.is_empty() {
        return Err(AdoptionRefusal::NoFile {
            tool: foreign.tool.clone(),
            table: foreign.table.clone(),
            versions: missing,
        });
    }

    let through = foreign.through.as_ref().map(|t| t.version);
    let mut records: Vec<&Migration> = available
        .iter()
        .filter(|m| foreign.applied.contains(&m.version) || through.is_some_and(|t| m.version <= t))
        .collect();
    records.sort_by_key(|m| m.version);

    let mut notes = Vec::new();
    if let Some(through) = &foreign.through {
        let count = records
            .iter()
            .filter(|m| m.version <= through.version)
            .count();
        notes.push(format!(
            "{}: every file up to version {} ({count} file(s)) is recorded as applied",
            through.reason, through.version
        ));
    }
    if let Some(newest) = records.last().map(|m| m.version) {
        let skipped: Vec<String> = available
            .iter()
            .filter(|m| m.version < newest && !records.iter().any(|r| r.version == m.version))
            .map(|m| m.version.to_string())
            .collect();
        if !skipped.is_empty() {
            notes.push(format!(
                "{} never applied version(s) {}, older than the newest adopted version {newest}: \
                 they stay pending, and `migrate` applies them out of order (with a warning)",
                foreign.tool,
                skipped.join(", ")
            ));
        }
    }
    if records.is_empty() {
        notes.push(format!(
            "{}'s history `{}` records no applied migration: nothing to adopt, every file stays pending",
            foreign.tool, foreign.table
        ));
    }
    Ok(AdoptionPlan {
        records,
        batch: 1,
        notes,
    })
}

#[cfg(test)]
mod tests;

/// Flyway's checksum of a script: CRC-32 (IEEE) over the UTF-8 bytes of its lines without
/// their line endings (`\n`, `\r\n`, `\r`, as Java's `readLine` splits them) and without a
/// byte-order mark, as a signed 32-bit integer: what `flyway_schema_history.checksum` holds.
pub fn flyway_checksum(text: &str) -> i32 {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut crc = !0u32;
    for byte in text.bytes().filter(|&b| b != b'\n' && b != b'\r') {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc as i32
}

/// The repeatable migrations here that the other tool applied with the text they have now:
/// recorded as applied, so that switching tools does not apply them again. `texts` gives
/// each file's texts to compare with the tool's checksum (as written, and as it runs with
/// its placeholders filled in: a tool may have summed either). A changed one is left to be
/// applied, as the tool itself would apply it.
pub fn adoptable_repeatables<'a>(
    files: &'a [Migration],
    foreign: &ForeignHistory,
    texts: impl Fn(&Migration) -> Vec<String>,
) -> Vec<&'a Migration> {
    (files.iter())
        .filter(|file| {
            foreign.repeatables.get(&file.name).is_some_and(|&applied| {
                texts(file)
                    .iter()
                    .any(|text| flyway_checksum(text) == applied)
            })
        })
        .collect()
}
