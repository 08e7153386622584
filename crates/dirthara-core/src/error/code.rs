//! Each kind of error's stable code.

use super::{Code, Error, ErrorKind};

impl Error {
    /// The stable code, as printed in `Error [CODE]: ...`.
    pub fn code(&self) -> Code {
        match *self.kind {
            ErrorKind::LockHeld { .. } => Code::MigrationLockHeld,
            ErrorKind::LockFailed { .. } => Code::MigrationLockFailed,
            ErrorKind::LockLost { .. } => Code::LockLeaseLost,
            ErrorKind::Interrupted { .. } => Code::Interrupted,
            ErrorKind::OutOfOrder { .. } => Code::OutOfOrder,
            ErrorKind::MigrationFailed { .. } => Code::MigrationFailed,
            ErrorKind::TableLockTimeout { .. } => Code::TableLockTimeout,
            ErrorKind::Dirty { .. } => Code::DirtyMigration,
            ErrorKind::ChecksumMismatch { .. } => Code::ChecksumMismatch,
            ErrorKind::MissingMigration { .. } | ErrorKind::SquashedAway { .. } => {
                Code::MissingMigration
            }
            ErrorKind::Irreversible { .. } => Code::IrreversibleMigration,
            ErrorKind::UnknownVersion { .. } => Code::UnknownVersion,
            ErrorKind::InvalidMigration { .. } => Code::InvalidMigration,
            ErrorKind::PlaceholderUnset { .. } => Code::PlaceholderUnset,
            ErrorKind::Config { .. } | ErrorKind::NotDirty { .. } => Code::ConfigError,
            ErrorKind::Connection { .. } => Code::ConnectionError,
            ErrorKind::History { .. } => Code::HistoryError,
            ErrorKind::NewerDatabase { .. } => Code::MissingMigration,
            ErrorKind::WaitTimedOut { .. } => Code::WaitTimeout,
            ErrorKind::BlockingDdl { .. } => Code::BlockingDdl,
            ErrorKind::FleetEmpty { .. } => Code::FleetEmpty,
            ErrorKind::NoMigrations { .. } => Code::NoMigrations,
            ErrorKind::PermissionDenied { .. } => Code::PermissionDenied,
            ErrorKind::SchemaMismatch { .. } => Code::SchemaMismatch,
            ErrorKind::SchemaDrift { .. } => Code::SchemaDrift,
            ErrorKind::SchemaSnapshotMissing { .. } => Code::SchemaSnapshotMissing,
        }
    }
}
