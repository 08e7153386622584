//! The stable codes every error and warning is printed with (`Error [CODE]: ...`), as the
//! specification lists them.

use std::fmt;

/// The stable, documented code of an error or warning (`Error [CODE]: ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// `MIGRATION_LOCK_HELD`: another runner holds the lock, and the wait was zero or ran out.
    MigrationLockHeld,
    /// `MIGRATION_LOCK_FAILED`: taking or releasing the lock failed, or the backend cannot
    /// lock (SQLite with `locking = true`).
    MigrationLockFailed,
    /// `LOCK_LEASE_LOST`: the lease or session lock was lost during the run, which stopped
    /// before the next migration.
    LockLeaseLost,
    /// Warning `LOCK_LEASE_EXPIRED`: at release the lease was no longer ours; the run itself
    /// succeeded.
    LockLeaseExpired,
    /// `INTERRUPTED`: a shutdown signal arrived; the running migration was finished and
    /// recorded, the rest left undone.
    Interrupted,
    /// `OUT_OF_ORDER`: a pending migration is older than the newest applied one. A warning,
    /// or an error with [`Config::strict`](crate::Config::strict).
    OutOfOrder,
    /// `MIGRATION_FAILED`: a migration's step failed on the database.
    MigrationFailed,
    /// `DIRTY_MIGRATION`: an earlier run died inside a migration that could not run in a
    /// transaction, so it may be half-applied; fix it by hand, then `resolve` it.
    DirtyMigration,
    /// `CHECKSUM_MISMATCH`: an applied migration's file changed after it was applied.
    ChecksumMismatch,
    /// `MISSING_MIGRATION`: the history records a migration that has no file any more.
    MissingMigration,
    /// `IRREVERSIBLE_MIGRATION`: a migration that must be reversed has no down step.
    IrreversibleMigration,
    /// `UNKNOWN_VERSION`: a target version names no known migration.
    UnknownVersion,
    /// `INVALID_MIGRATION`: migration files (or embedded migrations) are malformed; nothing
    /// was touched.
    InvalidMigration,
    /// `CONFIG_ERROR`: the configuration is unusable.
    ConfigError,
    /// `CONNECTION_ERROR`: a database could not be reached, even after retrying for
    /// [`Config::connect_timeout`](crate::Config::connect_timeout).
    ConnectionError,
    /// `HISTORY_ERROR`: the history is unreadable, not dirthara's, or written by a newer
    /// dirthara.
    HistoryError,
    /// Warning: something in a migration directory looks like a migration but was not loaded.
    SkippedFile,
    /// `TABLE_LOCK_TIMEOUT`: a statement could not get its table (or metadata) lock within
    /// `table_lock_timeout`. A warning for each attempt that gave way and is retried; an error
    /// when `table_lock_retry_for` ran out (nothing applied, nothing recorded).
    TableLockTimeout,
    /// `WAIT_TIMEOUT`: `wait` gave up before the history held every migration waited for.
    WaitTimeout,
}

impl Code {
    /// The code as printed: `MIGRATION_LOCK_HELD`, `CHECKSUM_MISMATCH`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            Code::MigrationLockHeld => "MIGRATION_LOCK_HELD",
            Code::MigrationLockFailed => "MIGRATION_LOCK_FAILED",
            Code::LockLeaseLost => "LOCK_LEASE_LOST",
            Code::LockLeaseExpired => "LOCK_LEASE_EXPIRED",
            Code::Interrupted => "INTERRUPTED",
            Code::OutOfOrder => "OUT_OF_ORDER",
            Code::MigrationFailed => "MIGRATION_FAILED",
            Code::DirtyMigration => "DIRTY_MIGRATION",
            Code::ChecksumMismatch => "CHECKSUM_MISMATCH",
            Code::MissingMigration => "MISSING_MIGRATION",
            Code::IrreversibleMigration => "IRREVERSIBLE_MIGRATION",
            Code::UnknownVersion => "UNKNOWN_VERSION",
            Code::InvalidMigration => "INVALID_MIGRATION",
            Code::ConfigError => "CONFIG_ERROR",
            Code::ConnectionError => "CONNECTION_ERROR",
            Code::HistoryError => "HISTORY_ERROR",
            Code::SkippedFile => "SKIPPED_FILE",
            Code::TableLockTimeout => "TABLE_LOCK_TIMEOUT",
            Code::WaitTimeout => "WAIT_TIMEOUT",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
