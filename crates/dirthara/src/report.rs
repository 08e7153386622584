//! What a command did, returned to the caller (and rendered by the CLI).

use serde::Serialize;

use crate::events::{LockHolder, Warning};
use crate::migration::Direction;
use crate::plan::MigrationStatus;

pub use crate::step_report::StepReport;

/// Which command produced a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Operation {
    #[default]
    Migrate,
    Rollback,
    /// `to V` / [`Migrator::migrate_to`](crate::Migrator::migrate_to).
    To,
    Refresh,
    Fresh,
    Baseline,
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

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl From<crate::plan::Command> for Operation {
    fn from(command: crate::plan::Command) -> Self {
        use crate::plan::Command;
        match command {
            Command::Migrate => Operation::Migrate,
            Command::Rollback(_) => Operation::Rollback,
            Command::MigrateTo(_) => Operation::To,
            Command::Refresh => Operation::Refresh,
            Command::Fresh => Operation::Fresh,
        }
    }
}

/// The result of a command that changes the database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[non_exhaustive]
pub struct RunReport {
    pub operation: Operation,
    /// The batch the applied migrations were recorded under (none when nothing was applied).
    pub batch: Option<i64>,
    /// Tables dropped by `fresh`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<String>,
    pub reverted: Vec<StepReport>,
    pub applied: Vec<StepReport>,
    /// Records written without running a step (`baseline`, `resolve`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recorded: Vec<StepReport>,
    pub warnings: Vec<Warning>,
    /// How the command was protected: `session`, `lease`, or `off`.
    pub lock: String,
}

/// A step as `preview` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PreviewStep {
    pub version: i64,
    pub name: String,
    pub direction: Direction,
    pub connection: String,
    pub transactional: bool,
    /// The file controls its own transaction (e.g. "`COMMIT` at line 3 of the up step"): it
    /// runs as written, bracketed by a `running` record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_transaction: Option<String>,
    /// A down step that is empty or only comments: nothing will be sent.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reverses_nothing: bool,
    pub out_of_order: bool,
    /// The exact text that would run.
    pub sql: String,
}

/// Said with every preview, in every output format.
pub const PREVIEW_NOTICE: &str =
    "this preview took no lock; another runner may change the database before you act on it";

/// What a command would do, computed without a lock: it may be stale as soon as it returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Preview {
    pub operation: Operation,
    /// [`PREVIEW_NOTICE`]: the plan may be stale as soon as it is shown.
    pub notice: String,
    /// The `init_sql` each connection the plan touches runs on every session, by connection.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub init_sql: std::collections::BTreeMap<String, String>,
    pub drop_all: bool,
    pub batch: Option<i64>,
    pub steps: Vec<PreviewStep>,
    pub warnings: Vec<Warning>,
}

/// The lock's state, as `status` and `unlock` report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
#[non_exhaustive]
pub enum LockState {
    Free,
    Held {
        holder: LockHolder,
        /// A lease whose expiry is missing or not a date: held until `unlock --force`.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        malformed: bool,
    },
    /// A lease whose time ran out: the next runner takes it.
    Stale {
        holder: LockHolder,
    },
    /// The backend has no lock of the configured kind (SQLite with `locking = true`).
    Unsupported {
        reason: String,
    },
    /// Locking is turned off in the configuration.
    Off,
    /// The lock could not be inspected (the lease table is unreadable, the server's clock
    /// could not be read, ...): `status` and `unlock` say so instead of failing;
    /// `unlock --force` fails.
    Unknown {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LockReport {
    pub name: String,
    pub connection: String,
    pub strategy: String,
    #[serde(flatten)]
    pub state: LockState,
}

/// Everything `status` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StatusReport {
    pub migrations: Vec<MigrationStatus>,
    pub lock: LockReport,
}

/// What `unlock --force` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ForceUnlockReport {
    pub lock: LockReport,
    /// Sessions terminated / documents deleted; empty when the lock was free.
    pub released: Vec<String>,
}
