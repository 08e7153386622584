//! What a script's statements do to the transaction they run in, read from their text alone:
//! which of them commit on their own (MySQL DDL), and — as they run one by one — whether
//! anything has committed yet. That is what tells a failed step that changed nothing (its
//! `running` marker is taken back) from one that may be half done (left dirty).
//!
//! Pure: no I/O. Where the text cannot tell, it answers "may have changed something".

use crate::source::sql::{has_keyword, transaction_control, SqlDialect, Statement};

/// The words that start a MySQL statement which never commits on its own: data changes and
/// queries. Every other statement (DDL, `GRANT`, `LOCK TABLES`, `SET autocommit`, `CALL` of a
/// procedure that may do anything...) is taken to commit implicitly.
const MYSQL_TRANSACTIONAL: [&str; 8] = [
    "INSERT", "UPDATE", "DELETE", "REPLACE", "SELECT", "WITH", "VALUES", "DO",
];

/// The first word of a statement, upper-cased (after leading comments and spaces).
fn first_word(statement: &str) -> String {
    let mut rest = statement;
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("--") {
            rest = after.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(after) = rest.strip_prefix('#') {
            rest = after.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, r)| r);
        } else {
            break;
        }
    }
    rest.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase()
}

/// Whether `statement` commits by itself, whatever transaction it runs in (MySQL's implicit
/// commit: DDL and the like). Never on PostgreSQL or SQLite.
pub(crate) fn commits_implicitly(dialect: SqlDialect, statement: &str) -> bool {
    dialect == SqlDialect::MySql && !MYSQL_TRANSACTIONAL.contains(&first_word(statement).as_str())
}

/// Whether `statement`, when it fails on its own, is known to have changed nothing. Not so
/// for an index built or dropped `CONCURRENTLY` on PostgreSQL (a failure can leave an
/// `INVALID` index behind), nor for a MySQL `DROP TABLE` of several tables (the ones before
/// the failing one stay dropped).
pub(crate) fn undone_when_it_fails(dialect: SqlDialect, statement: &str) -> bool {
    match dialect {
        SqlDialect::Postgres => !has_keyword(statement, dialect, "CONCURRENTLY"),
        SqlDialect::MySql => !(first_word(statement) == "DROP" && statement.contains(',')),
        SqlDialect::Sqlite => true,
    }
}

/// Whether `statement` sets (or resets) the setting `name` for the session: `SET [SESSION |
/// LOCAL] name ...`, `SET @@SESSION.name = ...`, `RESET name`, `RESET ALL`, or a call of
/// PostgreSQL's `set_config('name', ...)`. A migration that does so means its own value to
/// govern what follows.
pub(crate) fn sets_setting(statement: &str, name: &str) -> bool {
    let lower = statement.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .collect();
    let first = first_word(statement);
    let names_it = words.contains(&name);
    match first.as_str() {
        "SET" => names_it,
        "RESET" => names_it || words.get(1) == Some(&"all"),
        _ => names_it && words.contains(&"set_config"),
    }
}

/// As a script's statements run one by one: has anything committed yet?
#[derive(Debug, Clone)]
pub(crate) struct Progress {
    dialect: SqlDialect,
    /// Inside a transaction block: the script's own `BEGIN`, or ours around the whole step.
    in_block: bool,
    /// Something has committed (or may have): a failure now leaves the step half done.
    committed: bool,
}

impl Progress {
    /// `wrapped`: the step runs inside a transaction we opened (and roll back on failure).
    pub(crate) fn new(dialect: SqlDialect, wrapped: bool) -> Self {
        Progress {
            dialect,
            in_block: wrapped,
            committed: false,
        }
    }

    /// `statement` succeeded.
    pub(crate) fn ran(&mut self, statement: &str) {
        let control = transaction_control(statement, self.dialect).map(|c| c.keyword);
        let second = statement
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_ascii_uppercase();
        match control.as_deref() {
            Some("BEGIN" | "START TRANSACTION") => self.in_block = true,
            Some("COMMIT" | "END") => {
                self.committed |= self.in_block;
                self.in_block = false;
            }
            // `ROLLBACK TO [SAVEPOINT] x` stays in the block; a plain one ends it, undone.
            Some("ROLLBACK" | "ABORT") if second != "TO" => self.in_block = false,
            Some("ROLLBACK" | "ABORT" | "SAVEPOINT" | "RELEASE") => {}
            // Two-phase commit, or anything else that ends a transaction: taken as committed.
            Some(_) => {
                self.committed = true;
                self.in_block = false;
            }
            None if commits_implicitly(self.dialect, statement) => {
                // MySQL commits the open transaction, then the statement itself.
                self.committed = true;
                self.in_block = false;
            }
            None if !self.in_block => self.committed = true,
            None => {}
        }
    }

    /// Whether a failure of `statement` now leaves the database as it was before the step:
    /// nothing committed before it, and it undoes itself (or is rolled back with the block
    /// it is in).
    pub(crate) fn nothing_changed_if_fails(&self, statement: &str) -> bool {
        !self.committed && (self.in_block || undone_when_it_fails(self.dialect, statement))
    }
}

/// Points `error` (located, if the database gave a position, relative to `statement`'s own
/// text) at the line, and column, of `text` — the step — where it is: where the database
/// put it, else where the statement starts.
pub(crate) fn locate_in_step(
    error: &mut crate::error::DatabaseError,
    text: &str,
    statement: &Statement<'_>,
) {
    match (error.line, error.column) {
        (Some(line), column) => {
            if line == 1 {
                // The statement may start after others on its first line.
                let before = &text[..statement.offset];
                let start_column = before.chars().rev().take_while(|&c| c != '\n').count();
                error.column = column.map(|c| start_column + c);
            }
            error.line = Some(statement.line + line - 1);
        }
        (None, _) => error.line = Some(statement.code_line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(dialect: SqlDialect, wrapped: bool, ran: &[&str]) -> Progress {
        let mut p = Progress::new(dialect, wrapped);
        for statement in ran {
            p.ran(statement);
        }
        p
    }

    #[test]
    fn a_first_statement_that_fails_changed_nothing_unless_it_leaves_something_behind() {
        for dialect in [SqlDialect::Postgres, SqlDialect::MySql, SqlDialect::Sqlite] {
            let fresh = Progress::new(dialect, false);
            assert!(fresh.nothing_changed_if_fails("CREATE TABLE t (id INT)"));
        }
        let pg = Progress::new(SqlDialect::Postgres, false);
        assert!(!pg.nothing_changed_if_fails("CREATE INDEX CONCURRENTLY i ON t (a)"));
        let my = Progress::new(SqlDialect::MySql, false);
        assert!(!my.nothing_changed_if_fails("DROP TABLE a, b"));
        assert!(my.nothing_changed_if_fails("DROP TABLE a"));
    }

    #[test]
    fn a_later_statement_that_fails_leaves_the_step_half_done() {
        let pg = progress(SqlDialect::Postgres, false, &["CREATE TABLE a (id INT)"]);
        assert!(!pg.nothing_changed_if_fails("CREATE TABLE b (id INT)"));
    }

    #[test]
    fn inside_a_transaction_nothing_has_committed_until_it_does() {
        // The script's own block.
        let pg = progress(
            SqlDialect::Postgres,
            false,
            &[
                "BEGIN",
                "CREATE TABLE a (id INT)",
                "SAVEPOINT s",
                "ROLLBACK TO SAVEPOINT s",
            ],
        );
        assert!(pg.nothing_changed_if_fails("CREATE TABLE b (id INT)"));
        let committed = progress(
            SqlDialect::Postgres,
            false,
            &["BEGIN", "CREATE TABLE a (id INT)", "COMMIT"],
        );
        assert!(!committed.nothing_changed_if_fails("CREATE TABLE b (id INT)"));
        let rolled_back = progress(
            SqlDialect::Postgres,
            false,
            &["BEGIN", "CREATE TABLE a (id INT)", "ROLLBACK"],
        );
        assert!(rolled_back.nothing_changed_if_fails("CREATE TABLE b (id INT)"));
        // Ours, around DML on MySQL.
        let wrapped = progress(SqlDialect::MySql, true, &["INSERT INTO a VALUES (1)"]);
        assert!(wrapped.nothing_changed_if_fails("UPDATE a SET id = 2"));
    }

    #[test]
    fn an_error_is_pointed_at_its_statement_in_the_step() {
        use crate::source::sql::split_statements;
        let text = "CREATE TABLE a (id INT);\n-- then\nINSERT INTO a VALUES (1); SELECT nope;\n";
        let statements = split_statements(text, SqlDialect::Postgres);
        // No position: the statement's first line of code.
        let mut error = crate::error::DatabaseError::from_message("boom");
        locate_in_step(&mut error, text, &statements[1]);
        assert_eq!((error.line, error.column), (Some(3), None));
        // A position inside the third statement, which starts at column 27 of line 3.
        let mut error = crate::error::DatabaseError::from_message("no column nope");
        (error.line, error.column) = (Some(1), Some(8));
        locate_in_step(&mut error, text, &statements[2]);
        assert_eq!((error.line, error.column), (Some(3), Some(34)));
    }

    #[test]
    fn a_migration_that_sets_its_own_lock_timeout_is_recognised() {
        for own in [
            "SET lock_timeout = '10s'",
            "-- its own\nset local lock_timeout to 0",
            "SELECT set_config('lock_timeout', '5s', false)",
            "RESET lock_timeout",
            "RESET ALL",
        ] {
            assert!(sets_setting(own, "lock_timeout"), "{own}");
        }
        for own in [
            "SET SESSION lock_wait_timeout = 5",
            "SET @@SESSION.lock_wait_timeout = DEFAULT",
        ] {
            assert!(sets_setting(own, "lock_wait_timeout"), "{own}");
        }
        for other in [
            "SET statement_timeout = '1s'",
            "SET SESSION innodb_lock_wait_timeout = 5",
            "ALTER TABLE lock_timeout ADD c INT",
            "SELECT current_setting('lock_timeout')",
        ] {
            assert!(
                !sets_setting(other, "lock_timeout") && !sets_setting(other, "lock_wait_timeout"),
                "{other}"
            );
        }
    }

    #[test]
    fn mysql_ddl_commits_the_block_it_is_in() {
        let my = progress(
            SqlDialect::MySql,
            false,
            &[
                "START TRANSACTION",
                "INSERT INTO a VALUES (1)",
                "CREATE TABLE b (id INT)",
            ],
        );
        assert!(!my.nothing_changed_if_fails("INSERT INTO a VALUES (2)"));
        assert!(commits_implicitly(
            SqlDialect::MySql,
            "-- make it\nALTER TABLE a ADD c INT"
        ));
        assert!(commits_implicitly(SqlDialect::MySql, "CALL p()"));
        assert!(!commits_implicitly(
            SqlDialect::MySql,
            "/* x */ insert into a values (1)"
        ));
        assert!(!commits_implicitly(
            SqlDialect::Postgres,
            "ALTER TABLE a ADD c INT"
        ));
    }
}
