//! Which repeatable migrations a run applies, and where each stands for `status`: pure
//! decisions over the files and their records.
//!
//! A repeatable is applied again whenever its checksum differs from the one last applied
//! for its name. The checksum is over the text that runs, placeholders filled in, so a
//! changed value applies it again (unlike a versioned migration, whose checksum is over the
//! text as written). A record left `running` (its last run failed or died) is applied again
//! too: a repeatable is written to be run again.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::history::{AppliedRepeatable, RecordState, RecordedFailure};
use crate::migration::{checksum, Migration};

/// The checksum a repeatable is recorded with: of its text as it runs.
pub fn repeatable_checksum(repeatable: &Migration) -> String {
    checksum(
        repeatable
            .step(crate::migration::Direction::Up)
            .unwrap_or_default(),
    )
}

/// Where a repeatable migration stands between its file and its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum RepeatableState {
    /// Never applied: the next `migrate` applies it.
    Pending,
    /// Applied, and its text (placeholders filled in) is the one applied.
    Applied,
    /// Applied, but its text changed since: the next `migrate` applies it again.
    Changed,
    /// Its last run did not finish (it failed, or its runner died): applied again next.
    Failed,
    /// Recorded, but its file is gone: reported, never an error.
    Removed,
}

impl RepeatableState {
    pub fn as_str(self) -> &'static str {
        match self {
            RepeatableState::Pending => "pending",
            RepeatableState::Applied => "applied",
            RepeatableState::Changed => "changed",
            RepeatableState::Failed => "failed",
            RepeatableState::Removed => "removed",
        }
    }
}

/// One repeatable's line of `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RepeatableStatus {
    pub name: String,
    pub state: RepeatableState,
    /// When it was last applied (UTC, RFC 3339); `None` when never.
    pub applied_at: Option<String>,
    /// Why its last run failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<RecordedFailure>,
    /// Always `true`: told apart from a versioned migration in `--output json`.
    pub repeatable: bool,
}

fn state_of(file: Option<&Migration>, record: Option<&AppliedRepeatable>) -> RepeatableState {
    match (file, record) {
        (_, None) => RepeatableState::Pending,
        (None, Some(_)) => RepeatableState::Removed,
        (Some(_), Some(record)) if record.state != RecordState::Applied => RepeatableState::Failed,
        (Some(file), Some(record)) if record.checksum != repeatable_checksum(file) => {
            RepeatableState::Changed
        }
        (Some(_), Some(_)) => RepeatableState::Applied,
    }
}

/// The repeatables a run applies, in name order: every one when `every` (`refresh`,
/// `fresh`), else those not applied as they are now.
pub fn repeatables_to_apply<'a>(
    files: &'a [Migration],
    records: &[AppliedRepeatable],
    every: bool,
) -> Vec<&'a Migration> {
    let records: BTreeMap<&str, &AppliedRepeatable> =
        records.iter().map(|r| (r.name.as_str(), r)).collect();
    (files.iter())
        .filter(|file| {
            every
                || state_of(Some(file), records.get(file.name.as_str()).copied())
                    != RepeatableState::Applied
        })
        .collect()
}

/// Every repeatable known to the files or the records, in name order, with its state.
pub fn repeatable_status(
    files: &[Migration],
    records: &[AppliedRepeatable],
) -> Vec<RepeatableStatus> {
    let mut names: BTreeMap<&str, (Option<&Migration>, Option<&AppliedRepeatable>)> =
        BTreeMap::new();
    for file in files {
        names.entry(&file.name).or_default().0 = Some(file);
    }
    for record in records {
        names.entry(&record.name).or_default().1 = Some(record);
    }
    (names.into_iter())
        .map(|(name, (file, record))| RepeatableStatus {
            name: name.to_string(),
            state: state_of(file, record),
            applied_at: record
                .filter(|r| r.state == RecordState::Applied)
                .map(|r| r.applied_at.clone()),
            failure: record.and_then(|r| r.failure.clone()),
            repeatable: true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> Migration {
        let mut file = Migration::new(0, name, text);
        file.repeatable = true;
        file
    }

    fn record(name: &str, text: &str, state: RecordState) -> AppliedRepeatable {
        AppliedRepeatable::new(name.into(), checksum(text), state)
    }

    #[test]
    fn only_what_changed_or_did_not_finish_is_applied_again_unless_every() {
        let files = [
            file("a_view", "CREATE VIEW a AS SELECT 1"),
            file("b_view", "CREATE VIEW b AS SELECT 2"),
            file("c_view", "CREATE VIEW c AS SELECT 3"),
            file("d_view", "CREATE VIEW d AS SELECT 4"),
        ];
        let records = [
            record("a_view", "CREATE VIEW a AS SELECT 1", RecordState::Applied),
            record("b_view", "CREATE VIEW b AS SELECT 1", RecordState::Applied),
            record("c_view", "CREATE VIEW c AS SELECT 3", RecordState::Running),
            record("gone", "SELECT 1", RecordState::Applied),
        ];
        let due: Vec<&str> = repeatables_to_apply(&files, &records, false)
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        assert_eq!(due, ["b_view", "c_view", "d_view"]);
        assert_eq!(repeatables_to_apply(&files, &records, true).len(), 4);
        let status = repeatable_status(&files, &records);
        let states: Vec<(&str, RepeatableState)> =
            status.iter().map(|s| (s.name.as_str(), s.state)).collect();
        assert_eq!(
            states,
            [
                ("a_view", RepeatableState::Applied),
                ("b_view", RepeatableState::Changed),
                ("c_view", RepeatableState::Failed),
                ("d_view", RepeatableState::Pending),
                ("gone", RepeatableState::Removed),
            ]
        );
    }
}
