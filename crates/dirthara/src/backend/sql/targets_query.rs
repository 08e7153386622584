//! `--targets-sql`: the query that lists a fleet's targets only reads. It must be one
//! statement that is a query (`SELECT`, `WITH`, `VALUES`, `TABLE`, `SHOW`), and it runs in a
//! read-only transaction that is then rolled back: a write hidden in a query (PostgreSQL's
//! `WITH d AS (DELETE ... RETURNING ...)`, a function that writes) is refused by the server.
//! The statement check matters on MySQL/MariaDB, where DDL commits the transaction it is in
//! and so runs even inside `START TRANSACTION READ ONLY`.

use super::SqlDialect;
use crate::source::sql::split_statements;

/// How the query is named in errors: the flag and the key of `dirthara.toml`.
const NAMED: &str = "--targets-sql (or `targets_sql` in [fleet])";

/// The first words a statement that only reads starts with.
const QUERIES: [&str; 5] = ["SELECT", "WITH", "VALUES", "TABLE", "SHOW"];

/// The one statement of `sql`, without its `;`, if it is a query; else why it is refused.
pub(super) fn one_query(sql: &str, dialect: SqlDialect) -> Result<&str, String> {
    let statements = split_statements(sql, dialect);
    let statement = match statements.as_slice() {
        [one] => one.text,
        [] => {
            return Err(format!(
                "{NAMED} holds no statement; write one SELECT that returns (name, url) or (url)"
            ))
        }
        many => {
            return Err(format!(
                "{NAMED} must be one statement, and `{sql}` has {}: it is refused and nothing \
                 ran; keep the one SELECT that returns (name, url) or (url)",
                many.len()
            ))
        }
    };
    let word = first_word(statement);
    if QUERIES.iter().any(|q| q.eq_ignore_ascii_case(word)) {
        return Ok(statement);
    }
    Err(format!(
        "{NAMED} must only read, and `{sql}` is a {} statement: it is refused and nothing \
         ran; write a SELECT that returns (name, url) or (url)",
        word.to_ascii_uppercase()
    ))
}

/// The statements a query runs between: a read-only transaction, rolled back (SQLite has
/// none: its connection is made read-only for the query instead).
pub(super) fn read_only(dialect: SqlDialect) -> (&'static str, &'static str) {
    match dialect {
        SqlDialect::Sqlite => ("PRAGMA query_only = ON", "PRAGMA query_only = OFF"),
        _ => ("START TRANSACTION READ ONLY", "ROLLBACK"),
    }
}

/// The error for a query the server refused or could not run.
pub(super) fn failed(sql: &str, connection: &str, message: &str) -> String {
    format!(
        "{NAMED} `{sql}` failed on `{connection}`: {message}; it runs as one statement in a \
         read-only transaction (nothing it tries to change is kept) and must return text \
         columns (name, url) or (url)"
    )
}

/// The statement's first word, after comments, white space and opening parentheses.
fn first_word(statement: &str) -> &str {
    let mut rest = statement;
    loop {
        let trimmed = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '(');
        if let Some(comment) = trimmed
            .strip_prefix("--")
            .or_else(|| trimmed.strip_prefix('#'))
        {
            rest = comment.split_once('\n').map_or("", |(_, after)| after);
        } else if let Some(comment) = trimmed.strip_prefix("/*") {
            rest = comment.split_once("*/").map_or("", |(_, after)| after);
        } else {
            rest = trimmed;
            break;
        }
    }
    let end = rest
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(rest.len());
    &rest[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_query_is_let_through() {
        for sql in [
            "SELECT name, url FROM tenants",
            "  -- the tenants\n/* live */ (SELECT url FROM t);  ",
            "with t as (select 1) select * from t",
            "VALUES ('a', 'sqlite:a.db')",
        ] {
            assert!(one_query(sql, SqlDialect::Postgres).is_ok(), "{sql}");
        }
        assert_eq!(
            one_query("SELECT 1;\n", SqlDialect::MySql).unwrap(),
            "SELECT 1"
        );
        for (sql, needle) in [
            (
                "SELECT 1; SELECT 2",
                "must be one statement, and `SELECT 1; SELECT 2` has 2",
            ),
            ("DELETE FROM t RETURNING name, url", "is a DELETE statement"),
            ("/* x */ drop table t", "is a DROP statement"),
            ("-- nothing", "holds no statement"),
        ] {
            let error = one_query(sql, SqlDialect::MySql).unwrap_err();
            assert!(
                error.contains(needle) && error.contains("--targets-sql"),
                "{sql}: {error}"
            );
        }
    }
}
