//! The SQL text of dirthara's own statements. One dialect type, the tokenizer's
//! [`SqlDialect`] from `dirthara-source`, is the SQL flavour everywhere; this module and its
//! children add what dirthara's own statements need of it, each concern a trait: the syntax
//! shared by every statement ([`SqlSyntax`]: quoting, time, casts), the history and meta tables
//! ([`HistorySql`], always named with the schema resolved at connect), and the catalog
//! ([`CatalogSql`]: what `fresh` drops, what a fleet lists). Values spliced in are integers,
//! hex checksums and names from a safe alphabet, and are still quoted with
//! [`SqlSyntax::literal`].

mod catalog;
mod history;

pub(crate) use crate::source::sql::SqlDialect;
pub(crate) use catalog::{CatalogSql, DbObject};
pub(crate) use history::{HistoryNames, HistorySql};

/// What every statement of dirthara's needs of its dialect.
pub(crate) trait SqlSyntax {
    fn ident(self, name: &str) -> String;

    fn literal(self, value: &str) -> String;

    fn now(self) -> &'static str;

    /// Milliseconds since the current statement (the whole multi-statement string) began;
    /// only PostgreSQL can tell, and only its atomic path leaves the duration unmeasured.
    fn elapsed_ms(self) -> &'static str;

    fn timestamp_type(self) -> &'static str;

    /// `expr` as text in every dialect, so rows decode the same way everywhere.
    fn text(self, expr: &str) -> String;

    fn timestamp_text(self, column: &str) -> String;

    fn begin(self) -> &'static str;

    /// The database's name in messages.
    fn database_name(self) -> &'static str;
}

impl SqlSyntax for SqlDialect {
    fn ident(self, name: &str) -> String {
        if self == SqlDialect::MySql {
            format!("`{}`", name.replace('`', "``"))
        } else {
            format!("\"{}\"", name.replace('"', "\"\""))
        }
    }

    fn literal(self, value: &str) -> String {
        let mut escaped = value.replace('\'', "''");
        if self == SqlDialect::MySql {
            // MySQL treats backslash as an escape inside literals unless NO_BACKSLASH_ESCAPES.
            escaped = escaped.replace('\\', "\\\\");
        }
        format!("'{escaped}'")
    }

    fn now(self) -> &'static str {
        match self {
            SqlDialect::Sqlite => "strftime('%Y-%m-%dT%H:%M:%SZ', 'now')",
            SqlDialect::Postgres => "now()",
            SqlDialect::MySql => "UTC_TIMESTAMP()",
        }
    }

    fn elapsed_ms(self) -> &'static str {
        match self {
            SqlDialect::Postgres => {
                "(EXTRACT(EPOCH FROM clock_timestamp() - statement_timestamp()) * 1000)::bigint"
            }
            SqlDialect::Sqlite => "0",
            SqlDialect::MySql => "0",
        }
    }

    fn timestamp_type(self) -> &'static str {
        match self {
            SqlDialect::Sqlite => "TEXT",
            SqlDialect::Postgres => "TIMESTAMPTZ",
            SqlDialect::MySql => "DATETIME",
        }
    }

    fn text(self, expr: &str) -> String {
        match self {
            SqlDialect::Sqlite => format!("CAST({expr} AS TEXT)"),
            SqlDialect::Postgres => format!("({expr})::text"),
            SqlDialect::MySql => format!("CAST({expr} AS CHAR)"),
        }
    }

    fn timestamp_text(self, column: &str) -> String {
        match self {
            SqlDialect::Sqlite => column.to_string(),
            SqlDialect::Postgres => {
                format!("to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')")
            }
            SqlDialect::MySql => format!("DATE_FORMAT({column}, '%Y-%m-%dT%H:%i:%sZ')"),
        }
    }

    fn begin(self) -> &'static str {
        match self {
            // IMMEDIATE takes SQLite's write lock up front, so a concurrent writer cannot make
            // the transaction fail half-way when it upgrades from reading to writing.
            SqlDialect::Sqlite => "BEGIN IMMEDIATE",
            SqlDialect::Postgres => "BEGIN",
            SqlDialect::MySql => "BEGIN",
        }
    }

    fn database_name(self) -> &'static str {
        match self {
            SqlDialect::Sqlite => "SQLite",
            SqlDialect::Postgres => "PostgreSQL",
            SqlDialect::MySql => "MySQL/MariaDB",
        }
    }
}

/// The meta table beside a history table: `<history>_meta`.
pub(crate) fn meta_table(table: &str) -> String {
    format!("{table}_meta")
}
