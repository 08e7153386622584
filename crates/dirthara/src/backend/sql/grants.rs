//! A role without the rights dirthara needs on its own tables, or on a target's schema, is
//! told so (`PERMISSION_DENIED`, with the `GRANT` that fixes it), never shown an empty
//! history: the catalogs hide a table its reader may not touch, so "not there" and "not
//! yours" look the same until the table is asked for by name.

use super::dialect::HistoryNames;
use super::{DriverError, SqlDialect, SqlDriver, SqlSyntax};
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
        message: super::database_message(&error),
        grant,
    })
    .caused_by(error)
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
/// role: asked by name, a table one may not read answers "permission denied" where a missing
/// one answers "does not exist".
pub(super) async fn history_hidden<D: SqlDriver>(
    driver: &mut D,
    connection: &str,
    names: &HistoryNames,
    role: &str,
) -> Result<bool> {
    let dialect = driver.dialect();
    if dialect == SqlDialect::Sqlite {
        return Ok(false);
    }
    let sql = format!("SELECT 1 FROM {} WHERE 1 = 0", names.history);
    match driver.fetch_text(&sql).await {
        Ok(_) => Ok(true),
        Err(e) if e.is_permission_denied() => {
            Err(history_refused(dialect, connection, names, role, e))
        }
        Err(_) => {
            driver.clean_up_after_failure().await;
            Ok(false)
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
