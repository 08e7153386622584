//! `baseline --from <tool>`: reading another migration tool's own history table, so a
//! project switching to dirthara keeps what that tool applied. Each tool's table layout (as
//! the tool itself creates it on PostgreSQL, MySQL/MariaDB and SQLite) is read here; what to
//! record is decided by [`crate::plan::plan_adoption`], and the engine writes it.
//!
//! The other tool's table is only ever read: it stays as it was, so that tool can still be
//! pointed at the database while the switch is tried.

use serde::Serialize;

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::migration::Migration;
use crate::plan::{AdoptionPlan, ForeignHistory};
use crate::vocabulary::LockStrategy;

mod rows;
use rows::parse;

/// A migration tool whose history `baseline --from` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Tool {
    /// sqlx (`_sqlx_migrations`); a row with `success = false` refuses the adoption.
    Sqlx,
    /// golang-migrate (`schema_migrations`): one row with the newest version, so every
    /// file up to it is adopted; a dirty row refuses the adoption.
    GolangMigrate,
    /// dbmate (`schema_migrations`): one row per applied version.
    Dbmate,
    /// goose (`goose_db_version`): the latest row of each version says whether it is applied.
    Goose,
    /// refinery (`refinery_schema_history`): one row per applied version.
    Refinery,
    /// Diesel (`__diesel_schema_migrations`): one row per applied version, read without
    /// the dashes of its timestamp.
    Diesel,
    /// Flyway (`flyway_schema_history`), read as Flyway reads it (baselines, undos, `repair`
    /// deletions); a failed row or a dotted version refuses the adoption.
    Flyway,
}

fn serialize_tool<S: serde::Serializer>(tool: &Tool, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(tool.name())
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Tool {
    /// Every tool, as `--from` names it.
    pub const NAMES: [&'static str; 7] = [
        "sqlx",
        "golang-migrate",
        "dbmate",
        "goose",
        "refinery",
        "diesel",
        "flyway",
    ];

    /// The tool `--from` names (one of [`Tool::NAMES`]); `None` for any other name.
    pub fn parse(name: &str) -> Option<Tool> {
        Some(match name {
            "sqlx" => Tool::Sqlx,
            "golang-migrate" => Tool::GolangMigrate,
            "dbmate" => Tool::Dbmate,
            "goose" => Tool::Goose,
            "refinery" => Tool::Refinery,
            "diesel" => Tool::Diesel,
            "flyway" => Tool::Flyway,
            _ => return None,
        })
    }

    /// The tool's name as `--from` takes it and reports show it.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Sqlx => "sqlx",
            Tool::GolangMigrate => "golang-migrate",
            Tool::Dbmate => "dbmate",
            Tool::Goose => "goose",
            Tool::Refinery => "refinery",
            Tool::Diesel => "diesel",
            Tool::Flyway => "flyway",
        }
    }

    /// The table the tool creates unless told otherwise.
    pub fn default_table(self) -> &'static str {
        match self {
            Tool::Sqlx => "_sqlx_migrations",
            Tool::GolangMigrate | Tool::Dbmate => "schema_migrations",
            Tool::Goose => "goose_db_version",
            Tool::Refinery => "refinery_schema_history",
            Tool::Diesel => "__diesel_schema_migrations",
            Tool::Flyway => "flyway_schema_history",
        }
    }

    /// The columns read, every one as text, in the order the tool wrote its rows.
    fn columns(self) -> (&'static [&'static str], &'static str) {
        match self {
            Tool::Sqlx => (&["version", "success"], "version"),
            Tool::GolangMigrate => (&["version", "dirty"], "version"),
            Tool::Dbmate | Tool::Refinery | Tool::Diesel => (&["version"], "version"),
            Tool::Goose => (&["version_id", "is_applied"], "id"),
            Tool::Flyway => (
                &["version", "type", "success", "script", "checksum"],
                "installed_rank",
            ),
        }
    }
}

/// Where `baseline --from` reads: a tool, and its table when not the tool's default.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AdoptSource {
    /// The tool that wrote the table.
    pub tool: Tool,
    /// `--from-table`; `None`: [`Tool::default_table`].
    pub table: Option<String>,
}

impl AdoptSource {
    /// Reads `tool`'s history from its default table.
    pub fn new(tool: Tool) -> Self {
        AdoptSource { tool, table: None }
    }

    /// Reads `tool`'s history from `table` (`--from-table`).
    pub fn with_table(mut self, table: impl Into<String>) -> Self {
        self.table = Some(table.into());
        self
    }

    /// The table read: the one given, else the tool's default.
    pub fn table(&self) -> &str {
        self.table.as_deref().unwrap_or(self.tool.default_table())
    }

    /// `--from-table` must be a plain identifier: it is spliced into SQL (quoted).
    pub fn check(&self) -> Result<()> {
        let name = self.table();
        if dirthara_core::config::is_plain_identifier(name, 63) {
            Ok(())
        } else {
            Err(Error::config(format!(
                "--from-table `{name}` is not a plain table name: use at most 63 letters, digits \
                 and `_`, starting with a letter or `_` (the table is looked for in the history \
                 connection's current schema)"
            )))
        }
    }
}

/// One migration `baseline --from` records (or would record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AdoptedRecord {
    /// The adopted version.
    pub version: i64,
    /// The name of its file here.
    pub name: String,
    /// The checksum of the file here, which `migrate` later verifies.
    pub checksum: String,
    /// The file here that the record stands for.
    pub file: String,
}

/// What `baseline --from` did, or (`preview`) would do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AdoptionReport {
    /// Always [`Operation::Baseline`](crate::Operation::Baseline).
    pub operation: crate::vocabulary::Operation,
    /// The tool adopted from (in JSON, as [`Tool::name`] gives it).
    #[serde(serialize_with = "serialize_tool")]
    pub from: Tool,
    /// The tool's table that was read (and left untouched).
    pub table: String,
    /// True for `preview baseline --from`: nothing was written.
    pub preview: bool,
    /// For a preview, the notice every preview carries: it took no lock, so the result may
    /// be stale as soon as it is shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// The batch the records are written under (none when nothing is recorded).
    pub batch: Option<i64>,
    /// The migrations recorded as applied, in version order.
    pub recorded: Vec<AdoptedRecord>,
    /// Facts to read before trusting the result: golang-migrate's newest-version rule, files
    /// left pending below the newest adopted version, an empty history.
    pub notes: Vec<String>,
    /// How the command was protected; `None` (`null` in JSON) for a preview, which takes no
    /// lock.
    pub lock: Option<LockStrategy>,
    /// The repeatable migrations (`R__<name>`) recorded as applied: the tool applied each
    /// with the text its file has now, so `migrate` does not apply it again. A changed one
    /// is left for `migrate` to apply, as the tool would.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repeatables: Vec<String>,
}

impl AdoptionReport {
    /// The report of a run under `held` (`None`: a preview, which takes no lock).
    pub(crate) fn new(
        source: &AdoptSource,
        planned: &AdoptionPlan<'_>,
        held: Option<LockStrategy>,
    ) -> Self {
        AdoptionReport {
            operation: crate::vocabulary::Operation::Baseline,
            from: source.tool,
            table: source.table().into(),
            preview: held.is_none(),
            notice: held
                .is_none()
                .then(|| crate::report::PREVIEW_NOTICE.to_string()),
            batch: (!planned.records.is_empty()).then_some(planned.batch),
            recorded: (planned.records.iter())
                .map(|m| AdoptedRecord {
                    version: m.version,
                    name: m.name.clone(),
                    checksum: m.checksum().to_string(),
                    file: m.origin.clone(),
                })
                .collect(),
            notes: planned.notes.clone(),
            lock: held,
            repeatables: Vec::new(),
        }
    }

    /// With the repeatable migrations adopted too.
    pub(crate) fn with_repeatables(mut self, adopted: &[&Migration]) -> Self {
        self.repeatables = adopted.iter().map(|m| m.name.clone()).collect();
        self
    }
}

/// The repeatable migrations here that `foreign` applied with their present text (Flyway's
/// checksum of the file as written, or as it runs with its placeholders filled in).
pub(crate) fn repeatables<'a>(
    files: &'a [Migration],
    foreign: &crate::plan::ForeignHistory,
) -> Vec<&'a Migration> {
    crate::plan::adoptable_repeatables(files, foreign, |file| {
        let running = file
            .step(crate::migration::Direction::Up)
            .unwrap_or_default();
        let written = std::fs::read_to_string(&file.up_source.file).ok();
        std::iter::once(running.to_string())
            .chain(written)
            .collect()
    })
}

/// Reads `source`'s history on `history` (the history connection). Refuses a table that
/// does not exist, naming it and `--from-table`.
pub(crate) async fn read(
    history: &mut dyn Backend,
    connection: &str,
    source: &AdoptSource,
) -> Result<ForeignHistory> {
    source.check()?;
    let tool = source.tool;
    let table = source.table();
    let (columns, order_by) = tool.columns();
    let Some(rows) = history.read_table(table, columns, order_by).await? else {
        return Err(Error::config(format!(
            "{}'s history table `{table}` does not exist in the current schema of connection `{}`; \
             if {} was configured with another table name, pass it with --from-table NAME",
            tool.name(),
            connection,
            tool.name()
        )));
    };
    parse(tool, table, &rows)
}

#[cfg(test)]
mod tests;
