//! A role without the rights dirthara needs on its own tables, or on a target's schema, is
//! told so (`PERMISSION_DENIED`, with the `GRANT` that fixes it), never shown an empty
//! history: the catalogs hide a table its reader may not touch, so "not there" and "not
//! yours" look the same until the table is asked for by name.

use super::dialect::HistoryNames;
use super::{DriverError, HistorySql, SqlDialect, SqlDriver, SqlSyntax};
use crate::error::{Error, ErrorKind, Result};

/// `PERMISSION_DENIED` on `connection` for `error`, with the grant a runner needs on the
/// history's tables: `SELECT` for `status` and `wait`, and the writes for the rest.
pub(super) fn history_refused(
    dialect: SqlDialect,
    connection: &str,
    names: &HistoryNames,
    role: &str,
    error: impl DriverError,
) -> Error {
    refusal(
        dialect,
        connection,
        names,
        role,
        super::database_message(&error),
    )
    .caused_by(error)
}

/// `PERMISSION_DENIED` for the history's tables, the database having said `message`.
fn refusal(
    dialect: SqlDialect,
    connection: &str,
    names: &HistoryNames,
    role: &str,
    message: String,
) -> Error {
    let grant = match dialect {
        SqlDialect::MySql => format!(
            "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER ON {}.* TO {} (SELECT alone \
             for status and wait)",
            names
                .schema
                .as_deref()
                .map_or_else(|| "<database>".to_string(), |s| dialect.ident(s)),
            mysql_account(role)
        ),
        _ => {
            let mut grant = String::new();
            if let Some(schema) = &names.schema {
                grant.push_str(&schema_grant(schema, role));
                grant.push_str("; ");
            }
            grant.push_str(&format!(
                "GRANT SELECT, INSERT, UPDATE, DELETE ON {}, {} TO {} (SELECT alone for status \
                 and wait)",
                names.history,
                names.meta,
                dialect.ident(role)
            ));
            grant
        }
    };
    Error::new(ErrorKind::PermissionDenied {
        connection: connection.to_string(),
        message,
        grant,
    })
}

/// PostgreSQL: a target that works in `wanted` (a fleet's schema) must be able to use it.
/// Without `USAGE` the server leaves the schema out of the session's search_path without a
/// word, and every name dirthara looks up there is "missing": so it is asked directly.
pub(super) async fn check_schema<D: SqlDriver>(
    driver: &mut D,
    connection: &str,
    wanted: &str,
    role: &str,
) -> Result<()> {
    if driver.schema() == Some(wanted) {
        return Ok(());
    }
    let dialect = driver.dialect();
    let sql = format!(
        "SELECT has_schema_privilege(oid, 'USAGE')::text FROM pg_namespace WHERE nspname = {}",
        dialect.literal(wanted)
    );
    let rows = (driver.fetch_text(&sql).await)
        .map_err(|e| Error::history(connection, super::database_message(&e)).caused_by(e))?;
    match rows.first().and_then(|row| row.first().cloned().flatten()) {
        Some(usable) if usable == "true" => Ok(()),
        Some(_) => Err(Error::new(ErrorKind::PermissionDenied {
            connection: connection.to_string(),
            message: format!(
                "the role `{role}` has no USAGE on the schema `{wanted}`, so the schema is left \
                 out of its search_path and nothing in it can be read"
            ),
            grant: format!(
                "{} (and CREATE ON SCHEMA to migrate)",
                schema_grant(wanted, role)
            ),
        })),
        None => Err(Error::history(
            connection,
            format!("the schema `{wanted}` does not exist"),
        )),
    }
}

/// PostgreSQL: a session none of whose search_path schemas it may use has no current schema;
/// the history's unqualified names would be "missing" there, whatever exists.
pub(super) fn no_usable_schema(connection: &str, role: &str) -> Error {
    Error::new(ErrorKind::PermissionDenied {
        connection: connection.to_string(),
        message: format!(
            "the session has no current schema: no schema of its search_path exists and is \
             usable by the role `{role}`"
        ),
        grant: format!(
            "{} (the schema the search_path names; and CREATE ON SCHEMA to migrate)",
            schema_grant("public", role)
        ),
    })
}

/// Whether the history table, which the catalog does not list, is there but refused to this
/// role. Asked without a statement that fails where the role has its rights (a server's log
/// and error counters stay clean): PostgreSQL's own catalog lists every table whatever one
/// may do with it; MySQL hides what one may not touch, so a role that may read every table
/// of the database (a global or database grant) sees a missing table as missing, and only
/// a role without such a grant has the table asked for by name, where "denied" and "does
/// not exist" are told apart.
pub(super) async fn history_hidden<D: SqlDriver>(
    driver: &mut D,
    connection: &str,
    names: &HistoryNames,
    role: &str,
) -> Result<bool> {
    let dialect = driver.dialect();
    let failed = |e: D::Error| Error::history(connection, super::database_message(&e)).caused_by(e);
    match dialect {
        SqlDialect::Sqlite => Ok(false),
        SqlDialect::Postgres => {
            let sql = format!(
                "SELECT has_table_privilege(c.oid, 'SELECT')::text FROM pg_catalog.pg_class c \
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = {} AND c.relname = {}",
                dialect.schema_literal(names, "current_schema()"),
                dialect.literal(&names.table)
            );
            let rows = driver.fetch_text(&sql).await.map_err(failed)?;
            match rows.first().and_then(|row| row.first().cloned().flatten()) {
                None => Ok(false),
                Some(readable) if readable == "true" => Ok(true),
                Some(_) => Err(refusal(
                    dialect,
                    connection,
                    names,
                    role,
                    format!("permission denied for table {}", names.table),
                )),
            }
        }
        SqlDialect::MySql => {
            let grantee = "CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', \
                           SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')";
            let sql = format!(
                "SELECT CAST(COUNT(*) AS CHAR) FROM (SELECT 1 AS x FROM \
                 information_schema.USER_PRIVILEGES WHERE GRANTEE = {grantee} AND \
                 PRIVILEGE_TYPE = 'SELECT' UNION ALL SELECT 1 FROM \
                 information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = {grantee} AND \
                 PRIVILEGE_TYPE = 'SELECT' AND {} LIKE TABLE_SCHEMA) AS granted",
                dialect.schema_literal(names, "DATABASE()")
            );
            let rows = driver.fetch_text(&sql).await.map_err(failed)?;
            let reads_every_table = rows
                .first()
                .and_then(|row| row.first().cloned().flatten())
                .is_some_and(|count| count != "0");
            if reads_every_table {
                return Ok(false);
            }
            let probe = format!("SELECT 1 FROM {} WHERE 1 = 0", names.history);
            match driver.fetch_text(&probe).await {
                Ok(_) => Ok(true),
                Err(e) if e.is_permission_denied() => {
                    Err(history_refused(dialect, connection, names, role, e))
                }
                Err(_) => Ok(false),
            }
        }
    }
}

fn schema_grant(schema: &str, role: &str) -> String {
    let dialect = SqlDialect::Postgres;
    format!(
        "GRANT USAGE ON SCHEMA {} TO {}",
        dialect.ident(schema),
        dialect.ident(role)
    )
}

/// A MySQL account as `GRANT` takes it: the user dirthara connects as, from any host.
fn mysql_account(role: &str) -> String {
    format!("'{}'@'%'", role.replace('\'', "''"))
}
