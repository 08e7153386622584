//! The small value types every layer names: the stable [`Code`] of an error or warning, the
//! lock a command took ([`LockStrategy`]), the command that ran ([`Operation`]) and how a
//! fleet's target ended ([`Outcome`]). They live at the bottom, importing nothing of the
//! crate, so that events, errors and reports can all name them without importing each other.

use std::fmt;

use serde::Serialize;

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
    /// `MISSING_MIGRATION`: the history records a migration that has no file any more. A
    /// warning from `wait` (a database newer than its files: a rolling deploy), an error
    /// there with [`Config::strict`](crate::Config::strict).
    MissingMigration,
    /// `IRREVERSIBLE_MIGRATION`: a migration that must be reversed has no down step.
    IrreversibleMigration,
    /// `UNKNOWN_VERSION`: a target version names no known migration.
    UnknownVersion,
    /// `INVALID_MIGRATION`: migration files (or embedded migrations) are malformed; nothing
    /// was touched.
    InvalidMigration,
    /// `PLACEHOLDER_UNSET`: a step that says `-- dirthara:placeholders` uses a placeholder
    /// that has no value; refused before the lock, nothing was run.
    PlaceholderUnset,
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
    /// `BLOCKING_DDL`: a pending statement would block the application while it rewrites,
    /// scans or indexes a table larger than `blocking_table_size` (or fails wherever it runs);
    /// nothing was run. A warning for one on a smaller table.
    BlockingDdl,
    /// `FLEET_EMPTY`: a fleet's source (a targets file, a glob of schemas or databases, a
    /// query) named no target, or this runner's shard of it holds none; nothing ran. A run
    /// that passes on nothing is refused unless `allow_empty_fleet` says it may.
    FleetEmpty,
    /// `NO_MIGRATIONS`: the configured directories hold no migration (and none was given in
    /// code); nothing was read or created. Usually a wrong `--dir` or `directories`.
    NoMigrations,
    /// `PERMISSION_DENIED`: the database refused dirthara a read or write of its own tables
    /// (the history, its meta and lease tables) or the use of a target's schema. Never read
    /// as "nothing applied".
    PermissionDenied,
    /// `SCHEMA_MISMATCH`: `dump --check` found the database's schema (or its applied versions)
    /// other than in the dump file; the differences are printed.
    SchemaMismatch,
    /// `SCHEMA_DRIFT`: `drift` found the live schema other than the snapshot taken by the last
    /// command that changed it (or than `--against FILE`); the differences are printed.
    SchemaDrift,
    /// `SCHEMA_SNAPSHOT_MISSING`: `drift` found no snapshot to compare with; `drift --accept`
    /// takes one of the schema as it is.
    SchemaSnapshotMissing,
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
            Code::PlaceholderUnset => "PLACEHOLDER_UNSET",
            Code::ConfigError => "CONFIG_ERROR",
            Code::ConnectionError => "CONNECTION_ERROR",
            Code::HistoryError => "HISTORY_ERROR",
            Code::SkippedFile => "SKIPPED_FILE",
            Code::TableLockTimeout => "TABLE_LOCK_TIMEOUT",
            Code::WaitTimeout => "WAIT_TIMEOUT",
            Code::BlockingDdl => "BLOCKING_DDL",
            Code::FleetEmpty => "FLEET_EMPTY",
            Code::NoMigrations => "NO_MIGRATIONS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::SchemaMismatch => "SCHEMA_MISMATCH",
            Code::SchemaDrift => "SCHEMA_DRIFT",
            Code::SchemaSnapshotMissing => "SCHEMA_SNAPSHOT_MISSING",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which command produced a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Operation {
    /// `migrate`: apply every pending migration.
    #[default]
    Migrate,
    /// `rollback` (and the CLI's `down`): reverse applied migrations, newest first.
    Rollback,
    /// `to V` / `dirthara::Migrator::migrate_to`.
    To,
    /// `refresh`: reverse every applied migration, then apply all, under one lock.
    Refresh,
    /// `fresh`: drop every table or collection of the history connection's database, then
    /// apply all.
    Fresh,
    /// `baseline`: record migrations as applied without running them.
    Baseline,
    /// `resolve`: record what an operator fixed by hand, or accept a changed checksum.
    Resolve,
}

impl Operation {
    /// The name as printed (`migrate`, `to`, ...), the same as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Migrate => "migrate",
            Operation::Rollback => "rollback",
            Operation::To => "to",
            Operation::Refresh => "refresh",
            Operation::Fresh => "fresh",
            Operation::Baseline => "baseline",
            Operation::Resolve => "resolve",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The lock a command takes: the strategy `locking` chose on the database at hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum LockStrategy {
    /// No lock, by configuration (`locking = false`); what a report says before a lock is taken.
    #[default]
    Off,
    /// A named lock held by the history connection's session.
    Session,
    /// A lease row/document with an expiry, renewed while the command runs.
    Lease,
}

impl LockStrategy {
    /// The name as printed and in JSON: `off`, `session` or `lease`.
    pub fn name(self) -> &'static str {
        match self {
            LockStrategy::Off => "off",
            LockStrategy::Session => "session",
            LockStrategy::Lease => "lease",
        }
    }

    /// What the strategy holds, in a sentence: "the session lock", "the lease".
    pub fn noun(self) -> &'static str {
        match self {
            LockStrategy::Off => "absent lock",
            LockStrategy::Session => "session lock",
            LockStrategy::Lease => "lease",
        }
    }
}

impl fmt::Display for LockStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How one target ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Outcome {
    /// The command changed it: migrations applied (or reverted, or recorded).
    Applied,
    /// Nothing to do: it was where the command would take it.
    UpToDate,
    /// `status`, `preview`: something is left to do there.
    Pending,
    /// The command failed there (its `error` says why).
    Failed,
    /// Never started: a canary failed, `max_failures` was reached, or a signal came.
    Skipped,
}

impl Outcome {
    /// As in JSON: `applied`, `up_to_date`, `pending`, `failed`, `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::UpToDate => "up_to_date",
            Outcome::Pending => "pending",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
