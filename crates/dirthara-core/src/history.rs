//! The records of the migration history, as every backend stores them.

use serde::Serialize;

mod digest;
mod repeatables;
pub use digest::HistoryDigest;
pub use repeatables::{repeatables_table, AppliedRepeatable, RepeatableChange};

/// Version of the history's own layout (tables/columns). Bumped whenever the layout
/// changes: a newer dirthara upgrades an older layout in place under the lock, and an older
/// dirthara refuses a newer layout rather than misread it.
///
/// - 1: the first layout.
/// - 2: a `failure` column (field on MongoDB): the error that left a record `running`.
pub const HISTORY_LAYOUT_VERSION: i64 = 2;

/// The default name of the history table/collection.
pub const DEFAULT_HISTORY_TABLE: &str = "dirthara_migrations";

/// Whether a recorded migration completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RecordState {
    /// Written before a step that cannot share a transaction with its record; still present
    /// on the next run only if that step never finished (a "dirty" migration).
    Running,
    /// In place: its step completed, or `baseline` or `resolve` recorded it as applied.
    Applied,
}

impl RecordState {
    /// The state as the history stores it: `running` or `applied`.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordState::Running => "running",
            RecordState::Applied => "applied",
        }
    }

    /// Reads a stored state; `None` for anything but `running` or `applied`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "running" => Some(RecordState::Running),
            "applied" => Some(RecordState::Applied),
            _ => None,
        }
    }
}

/// The error that left a record `running` (a dirty migration), kept in the record so that
/// whoever comes next — the second deploy's operator, `status` — sees why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RecordedFailure {
    /// The database's message (its first line), as the failing run showed it.
    pub message: String,
    /// SQLSTATE, or the code's name, where the database gave one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub code: Option<String>,
    /// The error number (MySQL/MariaDB, MongoDB), where the database gave one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub number: Option<i64>,
    /// The line of the migration's file where the failing statement is.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub line: Option<usize>,
}

impl RecordedFailure {
    /// The longest message kept: the record stays small, and the first run printed it whole.
    pub(crate) const MAX_MESSAGE: usize = 1000;

    /// As the history stores it: one JSON object.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Read back; text that is not our JSON (written by hand) is kept as the message.
    pub fn from_stored(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_else(|_| RecordedFailure {
            message: text.to_string(),
            code: None,
            number: None,
            line: None,
        })
    }
}

impl std::fmt::Display for RecordedFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        match (&self.code, self.number) {
            (Some(code), Some(number)) => write!(f, " (error {number}, SQLSTATE {code})")?,
            (Some(code), None) => write!(f, " (SQLSTATE {code})")?,
            (None, Some(number)) => write!(f, " (code {number})")?,
            (None, None) => {}
        }
        if let Some(line) = self.line {
            write!(f, " at line {line}")?;
        }
        Ok(())
    }
}

/// One row of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AppliedMigration {
    pub version: i64,
    pub name: String,
    pub checksum: String,
    pub batch: i64,
    pub state: RecordState,
    /// UTC, RFC 3339, as the database's clock gave it.
    pub applied_at: String,
    pub duration_ms: i64,
    /// `host:pid dirthara/<version>` of the runner that applied it.
    pub applied_by: String,
    /// For a `running` record: the error that left it so, when the failing run could say.
    pub failure: Option<RecordedFailure>,
}

/// A record the engine writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRecord {
    pub version: i64,
    pub name: String,
    pub checksum: String,
    pub batch: i64,
    pub state: RecordState,
    /// `None`: measured by whoever runs the step together with this record.
    pub duration_ms: Option<i64>,
    pub applied_by: String,
}

/// A change to the history, as the engine asks a backend to make it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistoryChange {
    /// Record a migration (as `running` before a non-transactional step, or `applied`).
    Insert(NewRecord),
    /// A `running` record's step finished.
    MarkApplied { version: i64, duration_ms: i64 },
    /// Change a record's state without touching the rest (before a non-transactional down
    /// step, or to undo that marker when the step failed cleanly). A recorded failure goes.
    SetState { version: i64, state: RecordState },
    /// Keep, in a record left `running`, the error that left it so.
    RecordFailure {
        version: i64,
        failure: RecordedFailure,
    },
    /// Replace the recorded checksum (`resolve --accept-checksum`).
    SetChecksum { version: i64, checksum: String },
    /// Forget a migration (it was reversed).
    Delete { version: i64 },
}

impl HistoryChange {
    /// This change, with an unmeasured duration filled in.
    pub fn measured(&self, elapsed: std::time::Duration) -> HistoryChange {
        match self {
            HistoryChange::Insert(record) if record.duration_ms.is_none() => {
                HistoryChange::Insert(NewRecord {
                    duration_ms: Some(elapsed.as_millis().try_into().unwrap_or(i64::MAX)),
                    ..record.clone()
                })
            }
            other => other.clone(),
        }
    }
}

/// Identifies this runner in the history and in lock diagnostics: `host:pid dirthara/x.y.z`.
pub fn runner_identity() -> String {
    format!(
        "{}:{} dirthara/{}",
        crate::host::hostname(),
        std::process::id(),
        env!("CARGO_PKG_VERSION")
    )
}

impl HistoryChange {
    /// The same change, an inserted record taking `new_state`.
    pub fn with_state(mut self, new_state: RecordState) -> Self {
        if let HistoryChange::Insert(record) = &mut self {
            record.state = new_state;
        }
        self
    }
}
