//! The words the rest of the crate describes migrations in: a step's format and a
//! directory's layout. Nothing here reads a file, so every module may use them.

use std::fmt;

/// What a migration's steps are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepFormat {
    /// SQL text, sent to the database as it is.
    Sql,
    /// A JSON array of MongoDB database commands (Extended JSON v2), run in order.
    MongoCommands,
    /// Rust code (a `dirthara::RustMigration`); the step text only describes it.
    Rust,
}

impl StepFormat {
    /// The format's name in messages: `SQL`, `MongoDB (JSON)`, `Rust`.
    pub fn name(self) -> &'static str {
        match self {
            StepFormat::Sql => "SQL",
            StepFormat::MongoCommands => "MongoDB (JSON)",
            StepFormat::Rust => "Rust",
        }
    }

    /// The extension of its files (`sql`, `json`); `None` for migrations that are no file.
    pub fn file_extension(self) -> Option<&'static str> {
        match self {
            StepFormat::Sql => Some("sql"),
            StepFormat::MongoCommands => Some("json"),
            StepFormat::Rust => None,
        }
    }
}

/// A directory's file layout.
///
/// Non-exhaustive: another tool's layout may be added. Name one with [`Layout::parse`] (the
/// names `format` takes in `dirthara.toml`) or a variant, and match with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// `<version>_<name>.up.sql` + `.down.sql`, or `<version>_<name>.sql`: dirthara, sqlx,
    /// golang-migrate.
    Plain,
    /// Folders `<version>_<name>/up.sql` + `down.sql`.
    Diesel,
    /// `<version>_<name>.sql` with `-- migrate:up` / `-- migrate:down` sections.
    Dbmate,
    /// `<version>_<name>.sql` with `-- +goose Up` / `-- +goose Down` sections.
    Goose,
    /// `V<version>__<name>.sql`, undo files `U<version>__<name>.sql` as downs.
    Flyway,
}

impl Layout {
    /// The names accepted for `format` in `dirthara.toml`.
    pub fn parse(name: &str) -> Option<Layout> {
        Some(match name {
            "dirthara" | "sqlx" | "golang-migrate" => Layout::Plain,
            "diesel" => Layout::Diesel,
            "dbmate" => Layout::Dbmate,
            "goose" => Layout::Goose,
            "flyway" => Layout::Flyway,
            _ => return None,
        })
    }

    pub const NAMES: &'static str = "`dirthara` (also `sqlx`, `golang-migrate`), `diesel`, \
                                     `dbmate`, `goose` or `flyway`";
}

/// The layout a migration's files were read in, and whether `dirthara.toml` declared it
/// for their directory (`format`) or it was detected from the files. Advice about the
/// files (which file reverses a migration, where its statements go) is given in it.
///
/// Declaring matters for `V<n>__` files: Flyway and refinery both write them, and only
/// Flyway has `U<n>__` undo files (refinery runs a `U` file as a migration of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DirectoryLayout {
    pub layout: Layout,
    /// Named with `format` in `dirthara.toml`, not detected.
    pub declared: bool,
}

impl DirectoryLayout {
    /// Whether `U<n>__` files are undo steps here: only where the directory is declared
    /// Flyway's.
    pub fn has_flyway_undo(self) -> bool {
        self.layout == Layout::Flyway && self.declared
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layout::Plain => "dirthara/sqlx/golang-migrate",
            Layout::Diesel => "diesel",
            Layout::Dbmate => "dbmate",
            Layout::Goose => "goose",
            Layout::Flyway => "flyway",
        })
    }
}
