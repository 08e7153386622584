//! What a database said when a step failed, kept whole: the message alone is rarely enough to
//! fix a migration (PostgreSQL puts the dependent objects of a failed `DROP` in DETAIL, and the
//! place of a syntax error in a position that only means something mapped back to the file).

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

/// Everything the database reported about a failed step.
///
/// Fields the database did not send are `None`. `line` and `column` are 1-based and point
/// into the step's own file text (not into whatever dirthara wrapped around it).
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct DatabaseError {
    /// The primary message, in the database's own words.
    pub message: String,
    /// SQLSTATE (PostgreSQL, MySQL/MariaDB), or the error code name where there is no SQLSTATE.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The numeric error (MySQL/MariaDB error number, MongoDB error code).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<i64>,
    /// PostgreSQL's DETAIL, e.g. the objects that depend on what a failed `DROP` named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// PostgreSQL's HINT: the database's own suggestion of a fix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Where inside a routine the error arose (PostgreSQL's CONTEXT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The constraint that was violated (PostgreSQL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    /// The table the error concerns (PostgreSQL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// The file the failing step is in (a migration file, or a section of one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The line of [`file`](DatabaseError::file) where the failing statement is: where the
    /// database put the error when it gave a position, else where the statement starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The column on [`line`](DatabaseError::line) (PostgreSQL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
    /// The connection died under the step (server restart, network cut, terminated session).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub connection_lost: bool,
    /// Who held the lock the statement waited for, asked while it waited (a statement that
    /// gave up waiting for a table lock).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocker: Option<crate::events::Blocker>,
    /// The statement gave up waiting for a lock another session holds, and was undone
    /// (PostgreSQL SQLSTATE `55P03` `lock_not_available`, as after `lock_timeout`;
    /// MySQL/MariaDB error 1205 "Lock wait timeout exceeded", or MySQL's 3572 `NOWAIT`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lock_not_available: bool,
    /// The database broke a deadlock by undoing this statement's transaction (PostgreSQL
    /// SQLSTATE `40P01`; MySQL/MariaDB error 1213): it was waiting for a lock another
    /// session holds, and gave way as after a lock timeout, so it is retried the same way.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deadlock_victim: bool,
    /// The driver's own error (sqlx, the MongoDB driver), as [`source`](std::error::Error::source).
    #[serde(skip)]
    pub(crate) driver: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

/// Equal when the database said the same; the driver's error value is not compared.
impl PartialEq for DatabaseError {
    fn eq(&self, other: &Self) -> bool {
        let facts = |e: &DatabaseError| {
            (
                e.message.clone(),
                e.code.clone(),
                e.number,
                e.detail.clone(),
                e.hint.clone(),
                e.context.clone(),
                e.constraint.clone(),
                e.table.clone(),
                (e.file.clone(), e.line, e.column, e.blocker.clone()),
                (e.connection_lost, e.lock_not_available, e.deadlock_victim),
            )
        };
        facts(self) == facts(other)
    }
}

impl Eq for DatabaseError {}

impl DatabaseError {
    /// Applies `map` to every text the database gave: the message, detail, hint and context.
    pub fn map_text(&mut self, map: impl Fn(&str) -> String) {
        self.message = map(&self.message);
        for text in [&mut self.detail, &mut self.hint, &mut self.context]
            .into_iter()
            .flatten()
        {
            *text = map(text);
        }
    }

    /// What the history keeps of this error in a `running` record: the first line of the
    /// message (cut short: the record stays small, and the failing run printed it whole),
    /// its code and number, and the file's line.
    pub fn recorded(&self) -> crate::history::RecordedFailure {
        let first_line = self.message.lines().next().unwrap_or_default();
        crate::history::RecordedFailure {
            message: crate::text::cut_at_char_boundary(
                first_line,
                crate::history::RecordedFailure::MAX_MESSAGE,
            )
            .to_string(),
            code: self.code.clone(),
            number: self.number,
            line: self.line,
        }
    }

    /// An error known only by its message.
    pub fn from_message(message: impl Into<String>) -> Self {
        DatabaseError {
            message: message.into(),
            ..DatabaseError::default()
        }
    }

    /// A Rust migration's own error: its text is the message, and the error itself is kept
    /// as `source()` (a caller can downcast it to what the migration returned).
    pub fn from_rust_migration(error: Box<dyn std::error::Error + Send + Sync>) -> Self {
        DatabaseError {
            message: error.to_string(),
            driver: Some(Arc::from(error)),
            ..DatabaseError::default()
        }
    }

    /// Keeps the driver's error this was read from, as its `source()`.
    pub fn caused_by(mut self, driver: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.driver = Some(Arc::new(driver));
        self
    }
}

impl fmt::Display for DatabaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A server's text may span lines (a PL/pgSQL `RAISE`, a DETAIL listing each dependent
        // object): every line after the first is indented like the block's lines, so the
        // error stays one block under its headline.
        f.write_str(&indented(&self.message))?;
        match (&self.code, self.number) {
            (Some(code), Some(number)) => write!(f, " (error {number}, SQLSTATE {code})")?,
            (Some(code), None) => write!(f, " (SQLSTATE {code})")?,
            (None, Some(number)) => write!(f, " (code {number})")?,
            (None, None) => {}
        }
        let file = self.file.as_deref().map(|file| format!(" of {file}"));
        let file = file.as_deref().unwrap_or_default();
        match (self.line, self.column) {
            (Some(line), Some(column)) => write!(f, "\n  at line {line}, column {column}{file}")?,
            (Some(line), None) => write!(f, "\n  at line {line}{file}")?,
            _ => {}
        }
        if let Some(detail) = &self.detail {
            write!(f, "\n  DETAIL: {}", indented(detail))?;
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n  HINT: {}", indented(hint))?;
        }
        if let Some(context) = &self.context {
            write!(f, "\n  CONTEXT: {}", indented(context))?;
        }
        if let Some(blocker) = &self.blocker {
            write!(f, "\n  the lock was held by {blocker}")?;
        }
        match (&self.constraint, &self.table) {
            (Some(constraint), Some(table)) => {
                write!(f, "\n  constraint `{constraint}` on table `{table}`")?
            }
            (Some(constraint), None) => write!(f, "\n  constraint `{constraint}`")?,
            (None, Some(table)) => write!(f, "\n  table `{table}`")?,
            (None, None) => {}
        }
        Ok(())
    }
}

/// `text` with each line after the first indented as the lines of an error block are.
fn indented(text: &str) -> std::borrow::Cow<'_, str> {
    match text.contains('\n') {
        true => text.trim_end_matches('\n').replace('\n', "\n  ").into(),
        false => text.into(),
    }
}

impl std::error::Error for DatabaseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let driver = self.driver.as_deref()?;
        Some(driver)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_the_database_sent_is_shown() {
        let error = DatabaseError {
            message: "cannot drop table users because other objects depend on it".into(),
            code: Some("2BP01".into()),
            detail: Some("view active_users depends on table users".into()),
            hint: Some("Use DROP ... CASCADE to drop the dependent objects too.".into()),
            line: Some(3),
            column: Some(1),
            ..DatabaseError::default()
        };
        assert_eq!(
            error.to_string(),
            "cannot drop table users because other objects depend on it (SQLSTATE 2BP01)\n  \
             at line 3, column 1\n  DETAIL: view active_users depends on table users\n  \
             HINT: Use DROP ... CASCADE to drop the dependent objects too."
        );
        let lines = DatabaseError {
            message: "first line\nsecond line".into(),
            code: Some("P0001".into()),
            detail: Some("view a depends on table t\nview b depends on table t\n".into()),
            hint: Some("one\ntwo".into()),
            context: Some("PL/pgSQL function f() line 3 at RAISE\nSQL statement \"x\"".into()),
            ..DatabaseError::default()
        };
        assert_eq!(
            lines.to_string(),
            "first line\n  second line (SQLSTATE P0001)\n  DETAIL: view a depends on table t\n  \
             view b depends on table t\n  HINT: one\n  two\n  CONTEXT: PL/pgSQL function f() line 3 \
             at RAISE\n  SQL statement \"x\""
        );
        assert_eq!(
            DatabaseError::from_message("plain").to_string(),
            "plain",
            "nothing is invented"
        );
    }
}
