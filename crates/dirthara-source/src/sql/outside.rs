//! Statements the database refuses inside a transaction block (`CREATE INDEX CONCURRENTLY`,
//! `VACUUM`, `CREATE DATABASE`...), found when a step is loaded: a step made only of them runs
//! outside a transaction, as golang-migrate, goose and psql run them; one mixing them with
//! other statements needs its layout's no-transaction marker, or it would fail half-way.

use super::{split_statements, words, SqlDialect};

/// The first statement of a step that cannot run in a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutsideTransaction {
    /// What it is, e.g. `CREATE INDEX CONCURRENTLY`.
    pub statement: &'static str,
    /// The step's line where it starts (its first word).
    pub line: usize,
    /// Every statement of the step is one that cannot run in a transaction.
    pub alone: bool,
}

/// The first statement of `sql` that `dialect` refuses inside a transaction block, if any.
///
/// ```
/// use dirthara_source::sql::{outside_transaction, SqlDialect::{MySql, Postgres}};
/// let found = outside_transaction("CREATE INDEX CONCURRENTLY i ON t (c);", Postgres).unwrap();
/// assert_eq!((found.statement, found.line, found.alone), ("CREATE INDEX CONCURRENTLY", 1, true));
/// let found = outside_transaction("SELECT 1;\n-- x\nVACUUM t;", Postgres).unwrap();
/// assert_eq!((found.statement, found.line, found.alone), ("VACUUM", 3, false));
/// assert_eq!(outside_transaction("SELECT 'VACUUM'; -- VACUUM", Postgres), None);
/// assert_eq!(outside_transaction("CREATE DATABASE d;", MySql), None);
/// ```
pub fn outside_transaction(sql: &str, dialect: SqlDialect) -> Option<OutsideTransaction> {
    let statements = split_statements(sql, dialect);
    let mut first = None;
    let mut alone = true;
    for statement in &statements {
        match cannot_run_in_a_transaction(statement.text, dialect) {
            Some(name) if first.is_none() => {
                first = Some((name, statement.code_line));
            }
            Some(_) => {}
            None => alone = false,
        }
    }
    first.map(|(statement, line)| OutsideTransaction {
        statement,
        line,
        alone,
    })
}

/// What `statement` is, if `dialect` refuses it inside a transaction block.
fn cannot_run_in_a_transaction(statement: &str, dialect: SqlDialect) -> Option<&'static str> {
    let found = words(statement, dialect);
    let word = |i: usize| {
        found
            .get(i)
            .filter(|w| w.bare)
            .map(|w| w.text.to_ascii_uppercase())
    };
    let is = |i: usize, w: &str| word(i).as_deref() == Some(w);
    let has = |w: &str| (0..found.len()).any(|i| is(i, w));
    match dialect {
        SqlDialect::Sqlite => is(0, "VACUUM").then_some("VACUUM"),
        SqlDialect::MySql => None,
        SqlDialect::Postgres => Some(match word(0)?.as_str() {
            "VACUUM" => "VACUUM",
            "CREATE" if is(1, "INDEX") && is(2, "CONCURRENTLY") => "CREATE INDEX CONCURRENTLY",
            "CREATE" if is(1, "UNIQUE") && is(2, "INDEX") && is(3, "CONCURRENTLY") => {
                "CREATE INDEX CONCURRENTLY"
            }
            "CREATE" if is(1, "DATABASE") => "CREATE DATABASE",
            "CREATE" if is(1, "TABLESPACE") => "CREATE TABLESPACE",
            "DROP" if is(1, "INDEX") && is(2, "CONCURRENTLY") => "DROP INDEX CONCURRENTLY",
            "DROP" if is(1, "DATABASE") => "DROP DATABASE",
            "DROP" if is(1, "TABLESPACE") => "DROP TABLESPACE",
            "REINDEX" if has("CONCURRENTLY") => "REINDEX CONCURRENTLY",
            "REINDEX" if is(1, "SYSTEM") || is(1, "DATABASE") => "REINDEX DATABASE",
            "ALTER" if is(1, "SYSTEM") => "ALTER SYSTEM",
            "ALTER" if is(1, "TABLE") && has("DETACH") && has("CONCURRENTLY") => {
                "ALTER TABLE ... DETACH PARTITION ... CONCURRENTLY"
            }
            "ALTER" if is(1, "DATABASE") && has("TABLESPACE") => {
                "ALTER DATABASE ... SET TABLESPACE"
            }
            _ => return None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_statement_refused_in_a_transaction_is_named() {
        for (sql, name) in [
            ("vacuum analyze t", "VACUUM"),
            (
                "CREATE UNIQUE INDEX CONCURRENTLY i ON t (a)",
                "CREATE INDEX CONCURRENTLY",
            ),
            ("create database d", "CREATE DATABASE"),
            ("CREATE TABLESPACE s LOCATION '/x'", "CREATE TABLESPACE"),
            (
                "DROP INDEX CONCURRENTLY IF EXISTS i",
                "DROP INDEX CONCURRENTLY",
            ),
            ("DROP DATABASE IF EXISTS d", "DROP DATABASE"),
            ("DROP TABLESPACE s", "DROP TABLESPACE"),
            (
                "REINDEX (VERBOSE) TABLE CONCURRENTLY t",
                "REINDEX CONCURRENTLY",
            ),
            ("REINDEX DATABASE d", "REINDEX DATABASE"),
            ("ALTER SYSTEM SET work_mem = '1MB'", "ALTER SYSTEM"),
            (
                "ALTER TABLE p DETACH PARTITION p1 CONCURRENTLY",
                "ALTER TABLE ... DETACH PARTITION ... CONCURRENTLY",
            ),
            (
                "ALTER DATABASE d SET TABLESPACE s",
                "ALTER DATABASE ... SET TABLESPACE",
            ),
        ] {
            let found = outside_transaction(sql, SqlDialect::Postgres);
            assert_eq!(found.map(|f| f.statement), Some(name), "{sql}");
        }
        for sql in [
            "CREATE INDEX i ON t (a)",
            "CREATE TABLE concurrently (a int)",
            "REINDEX TABLE t",
            "ALTER DATABASE d SET work_mem = '1MB'",
            "ALTER TABLE p DETACH PARTITION p1",
            "SELECT 'VACUUM'",
            "DO $$ BEGIN VACUUM; END $$",
        ] {
            assert_eq!(
                outside_transaction(sql, SqlDialect::Postgres),
                None,
                "{sql}"
            );
        }
        assert!(outside_transaction("VACUUM", SqlDialect::Sqlite).is_some());
        let mixed = "VACUUM;\nCREATE INDEX CONCURRENTLY i ON t (a);\nSELECT 1;";
        let found = outside_transaction(mixed, SqlDialect::Postgres).unwrap();
        assert_eq!(
            (found.statement, found.line, found.alone),
            ("VACUUM", 1, false)
        );
    }
}
