//! The typed error every operation returns, with a stable code per failure kind.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use dirthara_source::Problem;

use crate::migration::{Direction, Migration};
use crate::step_report::StepReport;
use dirthara_source::SourceError;

mod database;
pub use crate::vocabulary::Code;
pub use database::DatabaseError;

/// What went wrong, with the facts a caller needs to act on it.
// `MIGRATION_FAILED` carries everything the database said and is far larger than the other
// kinds; an `ErrorKind` only ever lives boxed inside an `Error`, so that costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Another runner holds the lock and we may not (or no longer) wait.
    LockHeld {
        /// The lock's name, `dirthara:migrations`.
        lock: String,
        /// The connection the lock is taken on: the history connection.
        connection: String,
        /// Who holds it; `None` when the database could not tell.
        holder: Option<crate::events::LockHolder>,
    },
    /// Taking or releasing the lock failed, or the backend cannot lock.
    LockFailed {
        /// The lock's name, `dirthara:migrations`.
        lock: String,
        /// The connection the lock is taken on: the history connection.
        connection: String,
        /// What went wrong, with the fix where there is one.
        reason: String,
    },
    /// The lock was taken away during the run; we stopped before `next`.
    LockLost {
        /// The lock's name, `dirthara:migrations`.
        lock: String,
        /// The connection the lock was taken on: the history connection.
        connection: String,
        /// Version and name of the migration that was not started; `None` when the loss was
        /// found before a change that is not a migration (`fresh` dropping the tables, or
        /// `baseline` and `resolve` writing their records).
        next: Option<(i64, String)>,
    },
    /// A shutdown signal arrived; the running step finished, `remaining` steps were left undone.
    /// When it arrived while waiting for the lock, nothing had started ([`Error::waited`]).
    Interrupted {
        /// Version and name of each step left undone, in the order they would have run.
        remaining: Vec<(i64, String)>,
    },
    /// A pending migration is older than the newest applied one and `strict` is on.
    OutOfOrder {
        /// The pending versions older than `newest_applied`.
        versions: Vec<i64>,
        /// The newest version the history records as applied.
        newest_applied: i64,
    },
    /// A migration step failed on the database.
    MigrationFailed {
        /// The failed migration's version.
        version: i64,
        /// The failed migration's name.
        name: String,
        /// Whether its up or its down step failed.
        direction: Direction,
        /// The named connection the step ran on.
        connection: String,
        /// Everything the database said.
        error: DatabaseError,
        /// True when the history keeps a `running` record for it (the step could not be rolled back).
        left_dirty: bool,
        /// Whether the step ran inside a transaction (rolled back at the failure). On a
        /// database that commits schema changes at once (MySQL/MariaDB) such a step can
        /// still leave part of itself behind, and be `left_dirty`.
        transactional: bool,
        /// A repeatable migration (`R__<name>`; `version` means nothing): the next `migrate`
        /// applies it again, and it is never left dirty.
        repeatable: bool,
    },
    /// A migration's statement could not get its table (or metadata) lock within
    /// `table_lock_timeout`, attempt after attempt, until `table_lock_retry_for` ran out.
    TableLockTimeout {
        /// The migration's version.
        version: i64,
        /// The migration's name.
        name: String,
        /// Whether its up or its down step could not run.
        direction: Direction,
        /// The named connection the step ran on.
        connection: String,
        /// What the database said to the last attempt: the file and line of the statement
        /// that waited, the table it waited for and who held it, where the database said.
        error: DatabaseError,
        /// How many attempts were made.
        attempts: u32,
        /// How long the attempts and the pauses between them took.
        spent: Duration,
        /// True when statements before the one that waited had committed (MySQL runs DDL
        /// one statement at a time): the history marks the migration as running.
        left_dirty: bool,
    },
    /// A previous run failed or died inside a migration step that a rollback could not undo.
    Dirty {
        /// The version the history marks as `running`.
        version: i64,
        /// Its name, as recorded.
        name: String,
        /// The error that left it so, when the failing run could record it (a run that was
        /// killed could not).
        failure: Option<crate::history::RecordedFailure>,
    },
    /// An applied migration's file changed since it was applied.
    ChecksumMismatch {
        /// The changed migration's version.
        version: i64,
        /// Its name, as recorded.
        name: String,
        /// Where the migration comes from now: its file, or a Rust migration's description.
        file: String,
        /// The checksum the history recorded when it was applied (hex SHA-256).
        recorded: String,
        /// The checksum of the migration as it is now (hex SHA-256).
        actual: String,
    },
    /// An applied migration has no file any more.
    MissingMigration {
        /// The recorded version without a file.
        version: i64,
        /// Its name, as recorded.
        name: String,
    },
    /// Migrations a baseline stands for are neither applied to a database that goes on from
    /// its own history, nor on disk (archived after `squash`).
    SquashedAway {
        /// The versions not applied and without a file.
        versions: Vec<i64>,
        /// The baseline that stands for them (its file).
        baseline: String,
    },
    /// A migration that must be reversed has no down step.
    Irreversible {
        /// The version without a down step.
        version: i64,
        /// Its name.
        name: String,
    },
    /// A target version names no known migration.
    UnknownVersion {
        /// The requested target version.
        version: i64,
    },
    /// Migration files (or embedded migrations) are malformed: every bad file found in one
    /// run with its reason, never empty.
    InvalidMigration {
        /// Each bad file and what is wrong with it.
        problems: Vec<Problem>,
    },
    /// Steps that say `-- dirthara:placeholders` use placeholders that have no value: every
    /// one found, each with its file and line; refused before the lock, nothing was run.
    PlaceholderUnset {
        /// Each file, with the line and name of a placeholder that has no value there.
        problems: Vec<Problem>,
    },
    /// `resolve --applied/--rolled-back` of a migration that is not dirty: there is nothing to
    /// resolve. Over a fleet, such a target is reported "nothing to resolve", not failed.
    NotDirty {
        /// The migration asked for.
        version: i64,
        /// Its recorded name.
        name: String,
    },
    /// The configuration is unusable.
    Config {
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A database could not be reached.
    Connection {
        /// The named connection that failed.
        connection: String,
        /// What went wrong, in the driver's words; a URL in it is shown without its password.
        message: String,
    },
    /// Reading or writing the history failed, or its layout is not one we understand.
    History {
        /// The history connection.
        connection: String,
        /// What went wrong with the history.
        message: String,
    },
    /// `wait` with `strict`: the history applied a migration these files do not have — the
    /// database is newer than this build (without `strict`, a warning).
    NewerDatabase {
        /// The recorded version without a file here.
        version: i64,
        /// Its name, as recorded.
        name: String,
    },
    /// `wait`: the migrations waited for were not all applied in time.
    WaitTimedOut {
        /// How long it waited.
        waited: Duration,
        /// How many of the migrations waited for were applied when it gave up.
        applied: usize,
        /// How many it waited for.
        wanted: usize,
        /// What it saw last (a database not reachable, a runner holding the lock, ...).
        last_seen: String,
    },
    /// Pending statements would block the application while they rewrite, scan or index a
    /// table larger than `blocking_table_size`, or fail wherever they run; refused at
    /// planning, before anything ran.
    BlockingDdl {
        /// Each statement, with its table's size and the safe recipe.
        findings: Vec<crate::blocking::StepFinding>,
    },
    /// A fleet's source named no target (or this runner's shard of it holds none).
    FleetEmpty {
        /// The source, as the flag or `[fleet]` key says it: `--schemas tenant_*`.
        source: String,
        /// What it found instead, to tell a typo from an empty list: `12 schemas, none
        /// matching (nearest: Tenant_1)`, or `an empty file`.
        found: String,
    },
    /// The configured directories hold no migration, and none was given in code.
    NoMigrations {
        /// Each directory looked in, as configured.
        directories: Vec<PathBuf>,
    },
    /// The database refused a read or write of dirthara's own tables, or the use of a
    /// schema: a missing grant, never "nothing applied".
    PermissionDenied {
        /// The named connection (or fleet target) refused.
        connection: String,
        /// What the database said, in its words: `permission denied for table
        /// dirthara_history (code 42501)`.
        message: String,
        /// The grant that fixes it, as SQL to run as an owner or administrator.
        grant: String,
    },
    /// `dump --check`: the database's schema is not the one in the file.
    SchemaMismatch {
        /// The named connection that was read.
        connection: String,
        /// The dump file it was compared with, as given.
        file: PathBuf,
        /// How many objects differ (added, missing or changed).
        objects: usize,
        /// The applied versions differ too.
        versions: bool,
    },
    /// `drift`: the live schema is not the one its reference (the snapshot kept with the
    /// history, or a dump given with `--against`) says it should be.
    SchemaDrift {
        /// The named connection that was read.
        connection: String,
        /// What it was compared with: `the snapshot taken at version 3`, `schema.sql`.
        reference: String,
        /// The reference is a dump file (`--against`), not the snapshot.
        file: bool,
        /// How many objects differ (added, missing or changed).
        objects: usize,
        /// The applied versions differ too.
        versions: bool,
    },
    /// `drift`: the history has no schema snapshot to compare with (written by a dirthara
    /// before snapshots, or no command changed the schema since).
    SchemaSnapshotMissing {
        /// The named connection whose history has none.
        connection: String,
    },
}

/// The error returned by every dirthara operation.
///
/// [`Error::code`] gives the stable code; [`Error::kind`] the facts. A failure to release the
/// lock after another failure is attached as [`Error::secondary`] instead of replacing it, and
/// the steps that completed before the failure are in [`Error::completed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: Box<ErrorKind>,
    /// Everything else, boxed too: an error is rare, and a small one keeps every
    /// `Result<_, Error>` small.
    rest: Box<Rest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Rest {
    secondary: Option<Box<Error>>,
    completed: Vec<StepReport>,
    context: Context,
    cause: Option<Cause>,
}

/// What an error was caused by (the driver's error, an I/O error, a Rust migration's own
/// error), kept whole as [`std::error::Error::source`]. Shared, so that [`Error`] stays
/// `Clone`; two causes are equal when they say the same.
#[derive(Clone)]
struct Cause(Arc<dyn std::error::Error + Send + Sync>);

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for Cause {}

impl fmt::Debug for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// Facts the kind does not carry but the advice depends on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Context {
    /// How long we waited for the lock before giving up or being interrupted.
    waited: Option<Duration>,
    /// `Interrupted`: the signal came before the lock was taken (connecting, loading).
    before_lock: bool,
    /// `Irreversible`: what would make the migration reversible, in its layout's words.
    reversal: Option<String>,
}

impl Error {
    /// An error of `kind`, with no secondary failure and no completed steps.
    pub fn new(kind: ErrorKind) -> Self {
        Error {
            kind: Box::new(kind),
            rest: Box::default(),
        }
    }

    /// Keeps `cause` as this error's [`source`](std::error::Error::source). The message
    /// already says what the cause said (the CLI prints the message alone); the source is
    /// there for a program that wants the driver's typed error.
    pub fn caused_by(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.rest.cause = Some(Cause(Arc::new(cause)));
        self
    }

    /// [`Error::caused_by`] with a cause that is already shared.
    pub fn caused_by_shared(mut self, cause: Arc<dyn std::error::Error + Send + Sync>) -> Self {
        self.rest.cause = Some(Cause(cause));
        self
    }

    /// The facts of the failure, to match on.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The error with `map` applied to every text the database gave it (see
    /// [`DatabaseError::map_text`]): how a secret placeholder's value is masked.
    pub fn map_database_text(mut self, map: impl Fn(&str) -> String) -> Self {
        if let ErrorKind::MigrationFailed { error, .. }
        | ErrorKind::TableLockTimeout { error, .. } = &mut *self.kind
        {
            error.map_text(map);
        }
        self
    }

    /// For lock errors: the lock's name and the connection it was taken on.
    pub fn lock_context(&self) -> Option<(&str, &str)> {
        match &*self.kind {
            ErrorKind::LockHeld {
                lock, connection, ..
            }
            | ErrorKind::LockFailed {
                lock, connection, ..
            }
            | ErrorKind::LockLost {
                lock, connection, ..
            } => Some((lock, connection)),
            _ => None,
        }
    }

    /// How long the runner waited for the lock before this error: set for
    /// `MIGRATION_LOCK_HELD` after a non-zero `lock_wait` ran out, and for `INTERRUPTED` when
    /// the signal came while waiting (nothing had started then).
    pub fn waited(&self) -> Option<Duration> {
        self.rest.context.waited
    }

    /// A failure that happened while cleaning up after this one (e.g. releasing the lock).
    pub fn secondary(&self) -> Option<&Error> {
        self.rest.secondary.as_deref()
    }

    /// Steps that completed (and were recorded) before this error stopped the run.
    pub fn completed(&self) -> &[StepReport] {
        &self.rest.completed
    }

    pub fn with_secondary(mut self, secondary: Error) -> Self {
        match self.rest.secondary {
            Some(ref mut existing) => {
                let chained = std::mem::replace(existing, Box::new(secondary));
                // Keep both: the newest cleanup failure first, the earlier one under it.
                existing.rest.secondary = Some(chained);
            }
            None => self.rest.secondary = Some(Box::new(secondary)),
        }
        self
    }

    /// `INTERRUPTED` by a signal that came before the lock was taken (while connecting or
    /// loading): nothing had been read or changed.
    pub fn interrupted_before_lock() -> Self {
        let mut error = Error::new(ErrorKind::Interrupted {
            remaining: Vec::new(),
        });
        error.rest.context.before_lock = true;
        error
    }

    /// Whether an `INTERRUPTED` came before anything was started: before the lock was taken,
    /// or while waiting for it.
    pub fn interrupted_before_start(&self) -> bool {
        matches!(*self.kind, ErrorKind::Interrupted { .. })
            && (self.rest.context.before_lock || self.rest.context.waited.is_some())
    }

    pub fn after_waiting(mut self, waited: Duration) -> Self {
        self.rest.context.waited = Some(waited);
        self
    }

    /// `DIRTY_MIGRATION` for the `running` record `record`, quoting why it is dirty.
    pub fn dirty(record: &crate::history::AppliedMigration) -> Self {
        Error::new(ErrorKind::Dirty {
            version: record.version,
            name: record.name.clone(),
            failure: record.failure.clone(),
        })
    }

    /// `IRREVERSIBLE_MIGRATION` for `migration`, saying what would reverse it in the words
    /// of its files' layout.
    pub fn irreversible(migration: &Migration) -> Self {
        let mut error = Error::new(ErrorKind::Irreversible {
            version: migration.version,
            name: migration.name.clone(),
        });
        error.rest.context.reversal = reversal(migration);
        error
    }

    pub fn with_completed(mut self, completed: Vec<StepReport>) -> Self {
        self.rest.completed = completed;
        self
    }

    pub fn config(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Config {
            message: message.into(),
        })
    }

    pub fn invalid(file: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidMigration {
            problems: vec![Problem::new(file.into(), reason.into())],
        })
    }

    pub fn history(connection: &str, message: impl fmt::Display) -> Self {
        Error::new(ErrorKind::History {
            connection: connection.to_string(),
            message: message.to_string(),
        })
    }
}

mod code;
mod hints;
mod message;
mod serialize;

use hints::reversal;

/// `std::result::Result` with dirthara's [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
