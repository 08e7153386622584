//! Planning the commands that change only the history: `baseline` (record migrations as
//! applied without running them) and `resolve` (record what an operator fixed by hand).
//! Pure: the engine reads the history under the lock, asks here, and writes what comes back.

use crate::error::{Error, ErrorKind, Result};
use crate::history::{AppliedMigration, HistoryChange, NewRecord, RecordState};
use crate::migration::{Direction, Migration};

/// What `resolve` records after an operator fixed a migration by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Resolution {
    /// The dirty migration's changes are in place: mark it applied.
    Applied,
    /// The dirty migration's changes are not in place: forget it.
    RolledBack,
    /// The applied migration's file was edited on purpose: record its new checksum.
    AcceptChecksum,
}

/// A history change the engine writes under the lock, and what it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recording<'a> {
    pub version: i64,
    pub name: &'a str,
    pub direction: Direction,
    pub change: HistoryChange,
}

/// `baseline <version>`: every migration up to `version` not yet recorded, recorded as
/// applied in one new batch (returned with the records; empty when all are recorded).
pub fn plan_baseline<'a>(
    available: &'a [Migration],
    applied: &[AppliedMigration],
    version: i64,
    applied_by: &str,
) -> Result<(i64, Vec<Recording<'a>>)> {
    if !available.iter().any(|m| m.version == version) {
        return Err(Error::new(ErrorKind::UnknownVersion { version }));
    }
    refuse_dirty(applied)?;
    let batch = next_batch(applied);
    let records = available
        .iter()
        .filter(|m| m.version <= version)
        .filter(|m| !applied.iter().any(|a| a.version == m.version))
        .map(|m| Recording {
            version: m.version,
            name: &m.name,
            direction: Direction::Up,
            change: recorded_without_running(m, batch, applied_by),
        })
        .collect();
    Ok((batch, records))
}

/// The record of a migration marked applied without running it (`baseline`, and adopting
/// another tool's history): the file's checksum, and no duration.
pub fn recorded_without_running(
    migration: &Migration,
    batch: i64,
    applied_by: &str,
) -> HistoryChange {
    HistoryChange::Insert(NewRecord {
        version: migration.version,
        name: migration.name.clone(),
        checksum: migration.checksum().to_string(),
        batch,
        state: RecordState::Applied,
        duration_ms: Some(0),
        applied_by: applied_by.to_string(),
    })
}

/// `resolve <version> --applied | --rolled-back | --accept-checksum`: the one change to
/// record, or `None` when there is nothing to accept (the file matches what was applied).
pub fn plan_resolution<'h>(
    available: &[Migration],
    applied: &'h [AppliedMigration],
    version: i64,
    resolution: Resolution,
) -> Result<Option<Recording<'h>>> {
    let Some(record) = applied.iter().find(|a| a.version == version) else {
        return Err(Error::config(format!(
            "migration {version} has no history record, so there is nothing to resolve \
             (`dirthara status` shows the recorded migrations)"
        )));
    };
    let dirty = record.state == RecordState::Running;
    let change = match resolution {
        Resolution::Applied | Resolution::RolledBack if !dirty => {
            return Err(Error::new(ErrorKind::NotDirty {
                version,
                name: record.name.clone(),
            }))
        }
        Resolution::Applied => HistoryChange::MarkApplied {
            version,
            duration_ms: record.duration_ms,
        },
        Resolution::RolledBack => HistoryChange::Delete { version },
        Resolution::AcceptChecksum => {
            let Some(migration) = available.iter().find(|m| m.version == version) else {
                return Err(Error::new(ErrorKind::MissingMigration {
                    version,
                    name: record.name.clone(),
                }));
            };
            if dirty {
                return Err(Error::dirty(record));
            }
            if migration.checksum() == record.checksum {
                return Ok(None);
            }
            HistoryChange::SetChecksum {
                version,
                checksum: migration.checksum().to_string(),
            }
        }
    };
    Ok(Some(Recording {
        version,
        name: &record.name,
        direction: match resolution {
            Resolution::RolledBack => Direction::Down,
            _ => Direction::Up,
        },
        change,
    }))
}

/// The batch a new set of records goes into.
pub(crate) fn next_batch(applied: &[AppliedMigration]) -> i64 {
    applied.iter().map(|a| a.batch).max().unwrap_or(0) + 1
}

fn refuse_dirty(applied: &[AppliedMigration]) -> Result<()> {
    match applied.iter().find(|a| a.state == RecordState::Running) {
        Some(dirty) => Err(Error::dirty(dirty)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;

    fn record(version: i64, batch: i64, state: RecordState, checksum: &str) -> AppliedMigration {
        AppliedMigration {
            version,
            name: format!("m{version}"),
            checksum: checksum.to_string(),
            batch,
            state,
            applied_at: String::new(),
            duration_ms: 7,
            applied_by: String::new(),
            failure: None,
        }
    }

    fn migrations() -> Vec<Migration> {
        (1..=4)
            .map(|v| Migration::new(v, format!("m{v}"), format!("SELECT {v}")))
            .collect()
    }

    #[test]
    fn baseline_records_what_is_missing_up_to_the_version_in_one_new_batch() {
        let available = migrations();
        let applied = [record(1, 3, RecordState::Applied, available[0].checksum())];
        let (batch, records) = plan_baseline(&available, &applied, 3, "me").unwrap();
        assert_eq!(batch, 4);
        let versions: Vec<i64> = records.iter().map(|r| r.version).collect();
        assert_eq!(versions, [2, 3]);
        assert!(records.iter().all(|r| matches!(
            &r.change,
            HistoryChange::Insert(NewRecord {
                batch: 4,
                state: RecordState::Applied,
                ..
            })
        )));
    }

    #[test]
    fn baseline_refuses_an_unknown_version_and_a_dirty_history() {
        let available = migrations();
        let unknown = plan_baseline(&available, &[], 9, "me").unwrap_err();
        assert_eq!(unknown.code(), Code::UnknownVersion);
        let dirty = [record(1, 1, RecordState::Running, "x")];
        let refused = plan_baseline(&available, &dirty, 2, "me").unwrap_err();
        assert_eq!(refused.code(), Code::DirtyMigration);
    }

    #[test]
    fn resolve_clears_only_a_dirty_migration_either_way() {
        let available = migrations();
        let dirty = [record(2, 1, RecordState::Running, "x")];
        let applied = plan_resolution(&available, &dirty, 2, Resolution::Applied)
            .unwrap()
            .unwrap();
        assert_eq!(
            applied.change,
            HistoryChange::MarkApplied {
                version: 2,
                duration_ms: 7
            }
        );
        let rolled_back = plan_resolution(&available, &dirty, 2, Resolution::RolledBack)
            .unwrap()
            .unwrap();
        assert_eq!(rolled_back.change, HistoryChange::Delete { version: 2 });
        assert_eq!(rolled_back.direction, Direction::Down);
        let clean = [record(2, 1, RecordState::Applied, "x")];
        let refused = plan_resolution(&available, &clean, 2, Resolution::Applied).unwrap_err();
        assert_eq!(refused.code(), Code::ConfigError);
        let missing = plan_resolution(&available, &clean, 3, Resolution::RolledBack).unwrap_err();
        assert!(missing.to_string().contains("has no history record"));
    }

    #[test]
    fn accepting_a_checksum_records_the_files_and_is_a_no_op_when_it_matches() {
        let available = migrations();
        let changed = [record(1, 1, RecordState::Applied, "old")];
        let accepted = plan_resolution(&available, &changed, 1, Resolution::AcceptChecksum)
            .unwrap()
            .unwrap();
        assert_eq!(
            accepted.change,
            HistoryChange::SetChecksum {
                version: 1,
                checksum: available[0].checksum().to_string()
            }
        );
        let same = [record(1, 1, RecordState::Applied, available[0].checksum())];
        let nothing = plan_resolution(&available, &same, 1, Resolution::AcceptChecksum).unwrap();
        assert!(nothing.is_none());
        let dirty = [record(1, 1, RecordState::Running, "old")];
        let refused =
            plan_resolution(&available, &dirty, 1, Resolution::AcceptChecksum).unwrap_err();
        assert_eq!(refused.code(), Code::DirtyMigration);
        let gone = [record(9, 1, RecordState::Applied, "old")];
        let missing =
            plan_resolution(&available, &gone, 9, Resolution::AcceptChecksum).unwrap_err();
        assert_eq!(missing.code(), Code::MissingMigration);
    }
}
