//! The history of repeatable migrations (`R__<name>.sql`): one record per name, the last
//! time it was applied, in a table (collection) of its own beside the history,
//! `<history>_repeatables`, created the first time a repeatable is applied. A history
//! without repeatables keeps its layout.

use serde::Serialize;

use super::{RecordState, RecordedFailure};

/// The table (MongoDB: collection) of a history's repeatable migrations.
pub fn repeatables_table(history_table: &str) -> String {
    format!("{history_table}_repeatables")
}

/// The record of one repeatable migration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct AppliedRepeatable {
    pub name: String,
    /// The checksum of the text last applied (or being applied), placeholders filled in.
    pub checksum: String,
    /// `applied`, or `running`: its last run did not finish (it failed, or its runner died).
    pub state: RecordState,
    /// UTC, RFC 3339, as the database's clock gave it.
    pub applied_at: String,
    pub duration_ms: i64,
    pub applied_by: String,
    /// Why its last run failed, when it did.
    pub failure: Option<RecordedFailure>,
}

impl AppliedRepeatable {
    /// A record as a backend reads it.
    pub fn new(name: String, checksum: String, state: RecordState) -> Self {
        AppliedRepeatable {
            name,
            checksum,
            state,
            applied_at: String::new(),
            duration_ms: 0,
            applied_by: String::new(),
            failure: None,
        }
    }
}

/// A change to the repeatables' records, as the engine asks a backend to make it. Each
/// replaces the name's record, or updates it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepeatableChange {
    /// Before its text runs: the record holds the new checksum, `running`, so that a run
    /// that dies meanwhile leaves it to be applied again.
    Running {
        name: String,
        checksum: String,
        applied_by: String,
    },
    /// Its text ran: `applied`.
    Applied { name: String, duration_ms: i64 },
    /// Its text failed: it stays `running`, with why.
    Failed {
        name: String,
        failure: RecordedFailure,
    },
    /// Recorded as applied without running (another tool applied this text).
    Adopted {
        name: String,
        checksum: String,
        applied_by: String,
    },
}
