//! What a command did, returned to the caller (and rendered by the CLI).

use serde::Serialize;

use crate::events::{LockHolder, Warning};
use crate::migration::Direction;
use crate::plan::MigrationStatus;
use crate::vocabulary::{LockStrategy, Operation};

pub use crate::step_report::StepReport;

/// The result of a command that changes the database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[non_exhaustive]
pub struct RunReport {
    /// The command that ran.
    pub operation: Operation,
    /// The batch the applied migrations were recorded under (none when nothing was applied).
    pub batch: Option<i64>,
    /// Tables dropped by `fresh`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    /// Steps reversed, in the order they ran (newest migration first).
    pub reverted: Vec<StepReport>,
    /// Steps applied, in the order they ran; empty when there was nothing to do.
    pub applied: Vec<StepReport>,
    /// Records written without running a step (`baseline`, `resolve`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recorded: Vec<StepReport>,
    /// Warnings found while planning (e.g. `OUT_OF_ORDER`); each was also sent as an
    /// [`EventKind::Warning`](crate::events::EventKind::Warning).
    pub warnings: Vec<Warning>,
    /// How the command was protected.
    pub lock: LockStrategy,
}

impl RunReport {
    /// The report of `operation` run under `lock`, with nothing done yet: the engine fills it
    /// in as steps run.
    pub fn new(operation: Operation, lock: LockStrategy) -> Self {
        RunReport {
            operation,
            lock,
            ..RunReport::default()
        }
    }
}

/// A step as `preview` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PreviewStep {
    /// The migration's version.
    pub version: i64,
    /// The migration's name.
    pub name: String,
    /// Whether its up or its down step would run.
    pub direction: Direction,
    /// The named connection the step would run on.
    pub connection: String,
    /// Whether the migration may share a transaction with its history record; `false` for a
    /// `-- dirthara:no-transaction` file, which is bracketed by a `running` record instead.
    pub transactional: bool,
    /// The file controls its own transaction (e.g. "`COMMIT` at line 3 of the up step"): it
    /// runs as written, bracketed by a `running` record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_transaction: Option<String>,
    /// A down step that is empty or only comments: nothing will be sent.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reverses_nothing: bool,
    /// An up step for a migration older than the newest applied one (warned as
    /// `OUT_OF_ORDER`, refused with `strict`).
    pub out_of_order: bool,
    /// The longest one of its statements waits for a table lock before giving way to the
    /// application (`table_lock_timeout_ms` in JSON); `None`: as long as it takes.
    #[serde(
        rename = "table_lock_timeout_ms",
        serialize_with = "serialize_opt_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub table_lock_timeout: Option<std::time::Duration>,
    /// The timeout asked for, where the database bounds lock waits in coarser units and
    /// `table_lock_timeout` is it rounded up (MySQL counts whole seconds);
    /// `table_lock_timeout_rounded_from_ms` in JSON.
    #[serde(
        rename = "table_lock_timeout_rounded_from_ms",
        serialize_with = "serialize_opt_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub table_lock_timeout_rounded_from: Option<std::time::Duration>,
    /// How an attempt that gave way is tried again (`whole step`, `from the statement that
    /// gave way`), for how long at most (`table_lock_retry_for`); or why it never is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retried: Option<String>,
    /// The table locks it takes that the application can queue behind, where more than one
    /// (its partitions and children counted): `table_lock_timeout` is shared between them,
    /// so that their waits add up to at most it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table_locks: Option<u32>,
    /// The exact text that would run.
    pub sql: String,
    /// What its statements would do to the tables they touch, with each table's size and
    /// the time the application would wait: blocking DDL, statements that fail in a
    /// transaction, rolling-deploy hazards.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<crate::blocking::StepFinding>,
    /// A repeatable migration (`R__<name>`; `version` means nothing), applied after the
    /// versioned steps because its text is not the one last applied.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub repeatable: bool,
}

fn serialize_opt_ms<S: serde::Serializer>(
    d: &Option<std::time::Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_u64(d.as_millis().try_into().unwrap_or(u64::MAX)),
        None => s.serialize_none(),
    }
}

impl PreviewStep {
    /// The step that would run `sql`, with no transaction of its own, no table-lock timeout
    /// and no retry until said otherwise.
    pub fn new(
        version: i64,
        name: impl Into<String>,
        direction: Direction,
        connection: impl Into<String>,
        sql: impl Into<String>,
    ) -> Self {
        PreviewStep {
            version,
            name: name.into(),
            direction,
            connection: connection.into(),
            transactional: false,
            own_transaction: None,
            reverses_nothing: false,
            out_of_order: false,
            table_lock_timeout: None,
            table_lock_timeout_rounded_from: None,
            retried: None,
            table_locks: None,
            sql: sql.into(),
            findings: Vec::new(),
            repeatable: false,
        }
    }
}

/// Said with every preview, in every output format.
pub const PREVIEW_NOTICE: &str =
    "this preview took no lock; another runner may change the database before you act on it";

/// What a command would do, computed without a lock: it may be stale as soon as it returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Preview {
    /// The command previewed.
    pub operation: Operation,
    /// Says that the preview took no lock, so the plan may be stale as soon as it is shown.
    pub notice: String,
    /// The `init_sql` each connection the plan touches runs on every session, by connection.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub init_sql: std::collections::BTreeMap<String, String>,
    /// True for `fresh`: every table or collection of the history connection's database
    /// would be dropped before the steps run.
    pub drop_all: bool,
    /// The batch the applied migrations would be recorded under; `None` when nothing would
    /// be applied.
    pub batch: Option<i64>,
    /// The steps, in the order they would run; empty when there is nothing to do.
    pub steps: Vec<PreviewStep>,
    /// Warnings the command would give (e.g. `OUT_OF_ORDER`).
    pub warnings: Vec<Warning>,
}

impl Preview {
    /// The preview of `operation`, with nothing to do until steps are added.
    pub fn new(operation: Operation) -> Self {
        Preview {
            operation,
            notice: PREVIEW_NOTICE.to_string(),
            init_sql: Default::default(),
            drop_all: false,
            batch: None,
            steps: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// The lock's state, as `status` and `unlock` report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
#[non_exhaustive]
pub enum LockState {
    /// Nobody holds the lock.
    Free,
    /// Held by a session, or by a lease that has not lapsed.
    Held {
        /// Who holds it, as far as the database can tell.
        holder: LockHolder,
        /// A lease whose expiry is missing or not a date: held until `unlock --force`.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        malformed: bool,
    },
    /// A lease whose time ran out: the next runner takes it.
    Stale {
        /// Who held it last.
        holder: LockHolder,
    },
    /// The backend has no lock of the configured kind (SQLite with `locking = true`).
    Unsupported {
        /// Why, and which `locking` values work instead.
        reason: String,
    },
    /// Locking is turned off in the configuration.
    Off,
    /// The lock could not be inspected (the lease table is unreadable, the server's clock
    /// could not be read, ...): `status` and `unlock` say so instead of failing;
    /// `unlock --force` fails.
    Unknown {
        /// The error that stopped the inspection, with its code (`[CODE] message`).
        reason: String,
    },
}

/// The lock, its strategy and its state, as `status` and `unlock` report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LockReport {
    /// The lock's name, `dirthara:migrations`.
    pub name: String,
    /// The history connection, where the lock is taken.
    pub connection: String,
    /// The strategy in force; `None` (`null` in JSON) when the backend cannot lock as
    /// configured.
    pub strategy: Option<LockStrategy>,
    /// Whether, and by whom, the lock is held.
    #[serde(flatten)]
    pub state: LockState,
    /// The other strategy's lock, when it is not free: held by a runner configured with
    /// another `locking` (or with `locking` off, both are looked at). Empty in the usual case.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<OtherLock>,
}

/// A lock of another strategy than the one in force, as `status` and `unlock` found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct OtherLock {
    /// Which primitive: the session lock or the lease.
    pub strategy: LockStrategy,
    /// Whether, and by whom, it is held.
    #[serde(flatten)]
    pub state: LockState,
}

/// Everything `status` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StatusReport {
    /// Every migration known to the files or the history, in version order.
    pub migrations: Vec<MigrationStatus>,
    /// Every repeatable migration known to the files or its records, in name order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repeatables: Vec<crate::plan::RepeatableStatus>,
    /// The lock's state.
    pub lock: LockReport,
}

impl StatusReport {
    /// Every migration's status, and the lock's.
    pub fn new(migrations: Vec<MigrationStatus>, lock: LockReport) -> Self {
        StatusReport {
            migrations,
            repeatables: Vec::new(),
            lock,
        }
    }

    /// With the repeatable migrations' status.
    pub fn with_repeatables(mut self, repeatables: Vec<crate::plan::RepeatableStatus>) -> Self {
        self.repeatables = repeatables;
        self
    }
}

/// What `unlock --force` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ForceUnlockReport {
    /// The lock as it was found, before it was released.
    pub lock: LockReport,
    /// Sessions terminated / documents deleted; empty when the lock was free.
    pub released: Vec<String>,
}
