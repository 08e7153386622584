//! The tables dirthara keeps beside the history, in its schema (database): the repeatables'
//! records and the schema snapshot. Each is named after the history and created the first
//! time it is written.

use super::{HistoryNames, HistorySql, SqlDialect, SqlSyntax};

/// The table `name`, quoted and qualified as the history is.
pub(super) fn side_table(dialect: SqlDialect, names: &HistoryNames, name: &str) -> String {
    match &names.schema {
        Some(schema) => format!("{}.{}", dialect.ident(schema), dialect.ident(name)),
        None => dialect.ident(name),
    }
}

/// One row when the table `name` exists, in the history's schema: asked of the catalog, so a
/// first run leaves no error in the server's log.
pub(super) fn side_table_exists_sql(
    dialect: SqlDialect,
    names: &HistoryNames,
    name: &str,
) -> String {
    let name = dialect.literal(name);
    match dialect {
        SqlDialect::Sqlite => format!(
            "SELECT name FROM {}.sqlite_master WHERE type = 'table' AND name = {name}",
            (names.schema.as_deref()).map_or_else(|| "main".to_string(), |s| dialect.ident(s))
        ),
        // to_regclass finds it through the catalog's index, where information_schema reads
        // every table of the database (and hides those the role has no right on).
        SqlDialect::Postgres => format!(
            "SELECT 'found' WHERE to_regclass(quote_ident({}) || '.' || quote_ident({name})) \
             IS NOT NULL",
            dialect.schema_literal(names, "current_schema()")
        ),
        SqlDialect::MySql => format!(
            "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
             WHERE table_schema = {} AND table_name = {name}",
            dialect.schema_literal(names, "DATABASE()")
        ),
    }
}
