//! Where a connection is available, the server that will run a statement is the oracle:
//! rules written by hand age with every release (PostgreSQL 11 made a constant default
//! instant, MySQL 8.0.29 made `ADD COLUMN` instant anywhere, MariaDB differs again). A
//! statement a rule says rewrites or copies its table is rehearsed on an empty copy of that
//! table, and the server's answer stands:
//!
//! - PostgreSQL: inside a transaction that is rolled back, on a temporary copy
//!   (`CREATE TEMP TABLE ... (LIKE ... INCLUDING ALL)`), does the statement give the copy a
//!   new `relfilenode`? A rewrite does; a change PostgreSQL makes in the catalog alone (a
//!   binary-compatible type, a constant default) does not.
//! - MySQL/MariaDB: on a copy (`CREATE TABLE ... LIKE`, dropped afterwards), does the server
//!   accept the statement with `ALGORITHM=INSTANT`, or with `ALGORITHM=INPLACE, LOCK=NONE`?
//!   It answers at once, from the operation alone, and refuses what it would have to copy.
//!
//! This module only writes the statements (no I/O); the engine runs them on the step's
//! connection.

use sqlparser::ast::{
    AlterTableAlgorithm, AlterTableLock, AlterTableOperation, Ident, ObjectName, Statement,
};

use crate::rules::{self, Rule};
use crate::SqlDialect;

/// How to ask the server about one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Rehearsal {
    /// PostgreSQL: run `on_copy` on a temporary copy of `table` named `copy`, in a
    /// transaction rolled back afterwards, and compare the copy's `relfilenode` before and
    /// after: a new one is a rewrite.
    Rewrites {
        table: String,
        copy: String,
        on_copy: String,
    },
    /// MySQL/MariaDB: make `copy` like `table`, try `instant`, then `inplace`; the server
    /// accepting either means the statement runs online. The copy is dropped afterwards.
    Online {
        table: String,
        copy: String,
        instant: String,
        inplace: String,
    },
}

/// The rules whose verdict the server can confirm this way: those that say a statement
/// rewrites or copies the table because of what it changes.
fn rehearsable(rule: &Rule) -> bool {
    [
        rules::CHANGING_COLUMN_TYPE.name,
        rules::ADDING_FIELD_WITH_DEFAULT.name,
        rules::ADDING_GENERATED_STORED_COLUMN.name,
        rules::MYSQL_COPYING_ALTER.name,
    ]
    .contains(&rule.name)
}

/// The rehearsal of `statement` (one `ALTER TABLE`, as the migration wrote it), which `rule`
/// flagged, on a copy named `copy` (a plain identifier); `None` when it cannot be rehearsed:
/// another kind of statement or rule, or an `ALTER` that asks for `ALGORITHM=COPY` itself.
///
/// ```
/// use dirthara_ddl::{rehearsal, rules, Rehearsal, SqlDialect};
/// let asked = rehearsal(&rules::CHANGING_COLUMN_TYPE, "ALTER TABLE app.big ALTER COLUMN n TYPE text",
///                       SqlDialect::Postgres, "dirthara_rehearsal");
/// assert_eq!(asked, Some(Rehearsal::Rewrites {
///     table: "app.big".into(),
///     copy: "pg_temp.dirthara_rehearsal".into(),
///     on_copy: "ALTER TABLE pg_temp.dirthara_rehearsal ALTER COLUMN n TYPE TEXT".into(),
/// }));
/// ```
pub fn rehearsal(
    rule: &Rule,
    statement: &str,
    dialect: SqlDialect,
    copy: &str,
) -> Option<Rehearsal> {
    if !rehearsable(rule) {
        return None;
    }
    let parsed = match dialect {
        SqlDialect::MySql => {
            sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::MySqlDialect {}, statement)
        }
        _ => sqlparser::parser::Parser::parse_sql(
            &sqlparser::dialect::PostgreSqlDialect {},
            statement,
        ),
    }
    .ok()?;
    let [Statement::AlterTable(alter)] = parsed.as_slice() else {
        return None;
    };
    let table = alter.name.to_string();
    let mut on_copy = alter.clone();
    match dialect {
        SqlDialect::MySql => {
            let asked_copy = (alter.operations.iter()).any(|op| {
                matches!(
                    op,
                    AlterTableOperation::Algorithm {
                        algorithm: AlterTableAlgorithm::Copy,
                        ..
                    }
                )
            });
            if asked_copy {
                return None;
            }
            // The copy lives beside the table, in its database.
            let mut parts: Vec<Ident> = (alter.name.0.iter())
                .filter_map(|part| part.as_ident().cloned())
                .collect();
            parts.pop();
            parts.push(Ident::with_quote('`', copy));
            on_copy.name = ObjectName::from(parts);
            on_copy.operations.retain(|op| {
                !matches!(
                    op,
                    AlterTableOperation::Algorithm { .. } | AlterTableOperation::Lock { .. }
                )
            });
            let with = |algorithm, lock: Option<AlterTableLock>| {
                let mut asked = on_copy.clone();
                asked.operations.push(AlterTableOperation::Algorithm {
                    equals: true,
                    algorithm,
                });
                if let Some(lock) = lock {
                    (asked.operations).push(AlterTableOperation::Lock { equals: true, lock });
                }
                asked.to_string()
            };
            Some(Rehearsal::Online {
                table,
                copy: on_copy.name.to_string(),
                instant: with(AlterTableAlgorithm::Instant, None),
                inplace: with(AlterTableAlgorithm::Inplace, Some(AlterTableLock::None)),
            })
        }
        _ => {
            on_copy.name = ObjectName::from(vec![Ident::new("pg_temp"), Ident::new(copy)]);
            // A temporary copy has no partitions or children to recurse to.
            on_copy.only = false;
            Some(Rehearsal::Rewrites {
                table,
                copy: on_copy.name.to_string(),
                on_copy: on_copy.to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mysql_alter_is_asked_online_on_a_copy_beside_its_table() {
        let asked = rehearsal(
            &rules::MYSQL_COPYING_ALTER,
            "ALTER TABLE shop.orders MODIFY COLUMN email VARCHAR(320) NOT NULL, LOCK=SHARED",
            SqlDialect::MySql,
            "dirthara_rehearsal_1",
        );
        assert_eq!(
            asked,
            Some(Rehearsal::Online {
                table: "shop.orders".into(),
                copy: "shop.`dirthara_rehearsal_1`".into(),
                instant: "ALTER TABLE shop.`dirthara_rehearsal_1` MODIFY COLUMN email \
                          VARCHAR(320) NOT NULL, ALGORITHM = INSTANT"
                    .into(),
                inplace: "ALTER TABLE shop.`dirthara_rehearsal_1` MODIFY COLUMN email \
                          VARCHAR(320) NOT NULL, ALGORITHM = INPLACE, LOCK = NONE"
                    .into(),
            })
        );
        let asked_copy = "ALTER TABLE orders ADD COLUMN x INT, ALGORITHM=COPY";
        assert_eq!(
            rehearsal(
                &rules::MYSQL_COPYING_ALTER,
                asked_copy,
                SqlDialect::MySql,
                "c"
            ),
            None
        );
    }

    #[test]
    fn only_rewrites_of_one_alter_are_rehearsed() {
        let pg = SqlDialect::Postgres;
        assert_eq!(
            rehearsal(&rules::VACUUM_FULL, "VACUUM FULL big", pg, "c"),
            None
        );
        assert_eq!(
            rehearsal(
                &rules::SETTING_NOT_NULLABLE_FIELD,
                "ALTER TABLE big ALTER n SET NOT NULL",
                pg,
                "c"
            ),
            None
        );
        let only = rehearsal(
            &rules::ADDING_FIELD_WITH_DEFAULT,
            "ALTER TABLE ONLY big ADD COLUMN r float8 DEFAULT random()",
            pg,
            "c",
        );
        let Some(Rehearsal::Rewrites { on_copy, .. }) = only else {
            panic!("{only:?}");
        };
        assert_eq!(
            on_copy,
            "ALTER TABLE pg_temp.c ADD COLUMN r FLOAT8 DEFAULT random()"
        );
    }
}
