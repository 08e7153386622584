//! What one look at the history tells a waiting `wait`, as a pure function of the files, the
//! migrations waited for and the history's records: ready, not yet, a dirty migration (which
//! the caller checks against the lock), or an error that waiting will not fix.

use crate::error::{Error, ErrorKind, Result};
use crate::history::{AppliedMigration, RecordState};
use crate::migration::Migration;

/// What a history says to a waiting runner.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Look {
    /// Every migration waited for is applied. `newer`: the applied migrations these files do
    /// not have (version and name, oldest first) — a newer build migrated the database.
    Ready { newer: Vec<(i64, String)> },
    /// Not yet: `applied` of the migrations waited for are, and this is what it saw.
    NotYet { applied: usize, seen: String },
    /// Not yet, and this migration is dirty: being applied by a runner that holds the lock,
    /// or left half-done by one that died (an error, which waiting will not fix).
    Dirty {
        applied: usize,
        record: AppliedMigration,
    },
    /// The database could not be reached (it may be starting): why.
    Unreachable(String),
}

/// Judges `records` for a `wait` on `wanted` (from `available`, the files). Ready as soon as
/// each migration waited for is applied, whatever else the history holds: other pending
/// migrations, or newer ones these files do not have, which only `strict` refuses.
pub(super) fn judge(
    available: &[Migration],
    wanted: &[&Migration],
    records: &[AppliedMigration],
    strict: bool,
) -> Result<Look> {
    // A version a baseline stands for is known, though its file may be archived; and a
    // database built from a baseline has every migration it stands for.
    let squashed = crate::plan::squashed_versions(available);
    // Once its record says applied: while it runs (or after it failed) nothing is there yet.
    let built_from = (crate::plan::followed(available, records, None).baseline)
        .filter(|b| {
            (records.iter()).any(|r| r.version == b.version && r.state == RecordState::Applied)
        })
        .and_then(|b| b.squashes.as_deref())
        .unwrap_or_default();
    let mut newer: Vec<&AppliedMigration> = (records.iter())
        .filter(|r| {
            !squashed.contains(&r.version) && !available.iter().any(|m| m.version == r.version)
        })
        .collect();
    newer.sort_by_key(|r| r.version);
    if let (true, Some(first)) = (strict, newer.first()) {
        return Err(Error::new(ErrorKind::NewerDatabase {
            version: first.version,
            name: first.name.clone(),
        }));
    }
    let applied = (wanted.iter())
        .filter(|m| {
            built_from.contains(&m.version)
                || (records.iter())
                    .any(|r| r.version == m.version && r.state == RecordState::Applied)
        })
        .count();
    if applied == wanted.len() {
        let newer = (newer.iter()).map(|r| (r.version, r.name.clone()));
        return Ok(Look::Ready {
            newer: newer.collect(),
        });
    }
    if let Some(dirty) = records.iter().find(|r| r.state != RecordState::Applied) {
        return Ok(Look::Dirty {
            applied,
            record: dirty.clone(),
        });
    }
    Ok(Look::NotYet {
        applied,
        seen: format!("{} pending", wanted.len() - applied),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(version: i64, state: RecordState) -> AppliedMigration {
        AppliedMigration {
            version,
            name: format!("m{version}"),
            checksum: String::new(),
            batch: 1,
            state,
            applied_at: String::new(),
            duration_ms: 0,
            applied_by: String::new(),
            failure: None,
        }
    }

    fn applied(versions: &[i64]) -> Vec<AppliedMigration> {
        (versions.iter())
            .map(|&v| record(v, RecordState::Applied))
            .collect()
    }

    fn files() -> Vec<Migration> {
        (1..=3)
            .map(|v| Migration::new(v, format!("m{v}"), "x"))
            .collect()
    }

    fn ready(newer: &[i64]) -> Look {
        Look::Ready {
            newer: newer.iter().map(|&v| (v, format!("m{v}"))).collect(),
        }
    }

    /// After `squash`: the files 1–3 (or only 3, the others archived) and the baseline at 2.
    #[test]
    fn a_database_built_from_a_baseline_or_with_its_files_archived_is_ready() {
        let baseline = Migration::new(2, "squash", "y").as_baseline(vec![1, 2]);
        let mut with_files = files();
        with_files.push(baseline.clone());
        let archived = vec![Migration::new(3, "m3", "x"), baseline.clone()];
        for available in [&with_files, &archived] {
            let all: Vec<&Migration> = available.iter().collect();
            // Built from the baseline: its record at 2 has the baseline's checksum.
            let mut built = vec![
                record(2, RecordState::Applied),
                record(3, RecordState::Applied),
            ];
            built[0].checksum = baseline.checksum().to_string();
            assert_eq!(judge(available, &all, &built, true).unwrap(), ready(&[]));
            // Built from the originals: their records need no file, and are not newer.
            assert_eq!(
                judge(available, &all, &applied(&[1, 2, 3]), true).unwrap(),
                ready(&[])
            );
            assert!(matches!(
                judge(available, &all, &built[..1], false),
                Ok(Look::NotYet { .. })
            ));
            // The baseline still running: not ready, whatever it stands for.
            let mut running = built.clone();
            running[0].state = RecordState::Running;
            running.pop();
            let first: Vec<&Migration> = available.iter().filter(|m| m.version <= 2).collect();
            assert!(!matches!(
                judge(available, &first, &running, false),
                Ok(Look::Ready { .. })
            ));
        }
    }

    #[test]
    fn latest_is_ready_once_every_file_is_applied() {
        let files = files();
        let all: Vec<&Migration> = files.iter().collect();
        assert_eq!(
            judge(&files, &all, &applied(&[1, 2, 3]), false).unwrap(),
            ready(&[])
        );
        assert!(matches!(
            judge(&files, &all, &applied(&[1]), false),
            Ok(Look::NotYet { applied: 1, ref seen }) if seen == "2 pending"
        ));
        // A `running` record: dirty, for the caller to check against the lock.
        let mut running = applied(&[1, 2]);
        running.push(record(3, RecordState::Running));
        assert!(matches!(
            judge(&files, &all, &running, false),
            Ok(Look::Dirty { applied: 2, ref record }) if record.version == 3
        ));
    }

    #[test]
    fn a_database_newer_than_the_files_is_ready_with_the_newer_named_and_refused_when_strict() {
        let files = files();
        let all: Vec<&Migration> = files.iter().collect();
        let newer = applied(&[1, 2, 3, 5, 4]);
        assert_eq!(judge(&files, &all, &newer, false).unwrap(), ready(&[4, 5]));
        let refused = judge(&files, &all, &newer, true).unwrap_err();
        assert_eq!(refused.code(), crate::Code::MissingMigration);
        assert!(
            refused.to_string().contains("migration 4 (m4)"),
            "{refused}"
        );
        assert!(
            refused.to_string().contains("newer than this build"),
            "{refused}"
        );
        // Newer, but a migration of these files is still missing: not ready yet.
        assert!(matches!(
            judge(&files, &all, &applied(&[1, 2, 4]), false),
            Ok(Look::NotYet { applied: 2, .. })
        ));
        // A dirty migration of the newer build is its own runner's business.
        let mut dirty_newer = applied(&[1, 2, 3]);
        dirty_newer.push(record(4, RecordState::Running));
        assert_eq!(
            judge(&files, &all, &dirty_newer, false).unwrap(),
            ready(&[4])
        );
    }

    #[test]
    fn until_waits_for_its_version_alone() {
        let files = files();
        let only_2: Vec<&Migration> = files.iter().filter(|m| m.version == 2).collect();
        // 2 applied, 1 and 3 pending (out of order): ready.
        assert_eq!(
            judge(&files, &only_2, &applied(&[2]), false).unwrap(),
            ready(&[])
        );
        // 2 applied, with a newer one beside it.
        assert_eq!(
            judge(&files, &only_2, &applied(&[1, 2, 9]), false).unwrap(),
            ready(&[9])
        );
        // 2 applied, 3 left dirty: 2 is what was asked for.
        let mut dirty_3 = applied(&[1, 2]);
        dirty_3.push(record(3, RecordState::Running));
        assert_eq!(judge(&files, &only_2, &dirty_3, false).unwrap(), ready(&[]));
        // 1 and 3 applied, 2 not: not yet.
        assert!(matches!(
            judge(&files, &only_2, &applied(&[1, 3]), false),
            Ok(Look::NotYet { applied: 0, ref seen }) if seen == "1 pending"
        ));
        // 2 itself dirty: not applied.
        let mut dirty_2 = applied(&[1]);
        dirty_2.push(record(2, RecordState::Running));
        assert!(matches!(
            judge(&files, &only_2, &dirty_2, false),
            Ok(Look::Dirty { applied: 0, ref record }) if record.version == 2
        ));
    }
}
