//! What the shared SQL layer needs of a driver's error, whatever the driver: the facts the
//! database sent (message, codes, the position of the failure), and the two answers the lease
//! turns on. sqlx's errors implement it (`backend/sqlx_error.rs`); another driver (tiberius,
//! say) implements it for its own error type and reuses the whole SQL layer.

use crate::error::DatabaseError;

/// A SQL driver's error, as the shared SQL layer reads it.
pub(crate) trait DriverError: std::error::Error + Send + Sync + 'static {
    /// Everything the database said (the driver's own words when the database said nothing),
    /// without the error itself as `source()`, and the character position (1-based, in the
    /// text sent) at which the database located it, where it does.
    fn facts(&self) -> (DatabaseError, Option<usize>);

    /// A unique-key violation: another runner inserted the lease row first.
    fn is_unique_violation(&self) -> bool;

    /// The database refused the statement for want of a privilege (PostgreSQL SQLSTATE
    /// `42501`; MySQL/MariaDB 1044, 1142, 1143, 1227, 1370).
    fn is_permission_denied(&self) -> bool;

    /// The database is busy with another writer (SQLite's `SQLITE_BUSY`): for a lease attempt,
    /// someone else is at work.
    fn is_busy(&self) -> bool {
        false
    }
}

/// The database's own message for an error, with its code when it has one.
pub(crate) fn database_message(error: &impl DriverError) -> String {
    let (facts, _) = error.facts();
    match facts.code {
        Some(code) => format!("{} (code {code})", facts.message),
        None => facts.message,
    }
}

/// Everything a SQL database said about a failed step, keeping the driver's error as its
/// `source()`. `step` is the step's text and the character offset at which it started in the
/// text sent, so an error position the database reports (PostgreSQL) can be turned into the
/// file's line and column.
pub(crate) fn database_error(
    error: impl DriverError,
    step: Option<(&str, usize)>,
) -> DatabaseError {
    let (mut facts, position) = error.facts();
    if let (Some(position), Some((text, start))) = (position, step) {
        // 1-based character index into the whole message sent.
        if let Some(index) = position.checked_sub(1 + start) {
            if index <= text.chars().count() {
                let (line, column) = crate::source::sql::line_column(text, index);
                facts.line = Some(line);
                facts.column = Some(column);
            }
        }
    }
    facts.caused_by(error)
}
