//! Baseline migrations (`dirthara squash --to V`): which migrations a database follows.
//!
//! A baseline `B<V>__<name>` is the schema at V in one step. A **new** database (an empty
//! history) runs the highest baseline at or below its target, recorded at V with the
//! baseline's checksum, and then the migrations after V; the files it stands for are never
//! pending there. A database that already has records goes on from its own history and
//! ignores baselines: its records of the versions a baseline stands for are accepted without
//! their files, which may then be archived. As Flyway runs its baseline migrations.

use std::collections::BTreeSet;

use crate::error::{Error, ErrorKind, Result};
use crate::history::AppliedMigration;
use crate::migration::{split_baselines, Migration};

/// The migrations a database follows, in version order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Followed<'a> {
    /// Its versioned migrations: the files, or a baseline and the files after it.
    pub migrations: Vec<&'a Migration>,
    /// The baseline it was (or, with an empty history, will be) built from.
    pub baseline: Option<&'a Migration>,
}

/// What a database with `applied` follows among `versioned` (its versioned migrations and
/// baselines, as [`crate::migration::split_repeatables`] gives them). `through` is the
/// target of a command that goes no further (`to V`): an empty history takes the highest
/// baseline at or below it.
pub fn followed<'a>(
    versioned: &'a [Migration],
    applied: &[AppliedMigration],
    through: Option<i64>,
) -> Followed<'a> {
    let (files, baselines) = split_baselines(versioned);
    let baseline = match applied.is_empty() {
        true => (baselines.iter()).rfind(|b| through.is_none_or(|t| b.version <= t)),
        false => built_from(baselines, applied),
    };
    let mut migrations: Vec<&Migration> = match baseline {
        None => files.iter().collect(),
        // A file it does not stand for (merged from a branch after the squash, with an older
        // version) is the database's to apply, after it.
        Some(baseline) => std::iter::once(baseline)
            .chain(files.iter().filter(|m| !baseline.stands_for(m.version)))
            .collect(),
    };
    // The baseline first, then in version order, whatever order the caller gave them in.
    migrations.sort_by_key(|m| (!m.is_baseline(), m.version));
    Followed {
        migrations,
        baseline,
    }
}

/// The baseline a history was built from: one whose version has a record with its checksum,
/// or with no record of the other versions it stands for (the baseline was edited since:
/// its record is then checked against it, and a changed checksum refused, rather than the
/// history taken for one of the originals, which would run them again on top of it).
fn built_from<'a>(
    baselines: &'a [Migration],
    applied: &[AppliedMigration],
) -> Option<&'a Migration> {
    baselines.iter().rev().find(|b| {
        let Some(record) = applied.iter().find(|a| a.version == b.version) else {
            return false;
        };
        let others = || (b.squashes.iter().flatten()).filter(|v| **v != b.version);
        record.checksum == b.checksum()
            || (others().next().is_some()
                && others().all(|v| applied.iter().all(|a| a.version != *v)))
    })
}

/// Every version some baseline stands for: a record of one needs no file.
pub fn squashed_versions(versioned: &[Migration]) -> BTreeSet<i64> {
    let (_, baselines) = split_baselines(versioned);
    (baselines.iter())
        .flat_map(|b| b.squashes.iter().flatten().copied())
        .collect()
}

/// Refuses a database that goes on from its own history while versions a baseline stands
/// for are neither applied nor on disk: their files were archived after `squash`, and
/// applying what comes after them would build a schema without them.
pub(crate) fn check_nothing_squashed_away(
    versioned: &[Migration],
    applied: &[AppliedMigration],
    followed: &Followed,
) -> Result<()> {
    if applied.is_empty() {
        return Ok(());
    }
    let (files, baselines) = split_baselines(versioned);
    let covered = followed.baseline.map_or(i64::MIN, |b| b.version);
    let applied: BTreeSet<i64> = applied.iter().map(|a| a.version).collect();
    let on_disk: BTreeSet<i64> = files.iter().map(|m| m.version).collect();
    for baseline in baselines {
        let away: Vec<i64> = (baseline.squashes.iter().flatten().copied())
            .filter(|v| *v > covered && !applied.contains(v) && !on_disk.contains(v))
            .collect();
        if !away.is_empty() {
            return Err(Error::new(ErrorKind::SquashedAway {
                versions: away,
                baseline: baseline.origin.clone(),
            }));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::RecordState;
    use crate::migration::Direction;
    use crate::plan::{plan, status, Command, MigrationState, PlanOptions, RollbackScope};
    use crate::Code;

    fn m(version: i64) -> Migration {
        Migration::new(
            version,
            format!("m{version}"),
            format!("CREATE TABLE t{version} (id INT);"),
        )
        .with_down(format!("DROP TABLE t{version};"))
    }

    /// The baseline at `version` standing for 1..=version.
    fn b(version: i64) -> Migration {
        let text = format!("CREATE TABLE t1 (id INT); -- and the rest up to {version}");
        Migration::new(version, "squash", text).as_baseline((1..=version).collect())
    }

    fn rec(migration: &Migration) -> AppliedMigration {
        AppliedMigration {
            version: migration.version,
            name: migration.name.clone(),
            checksum: migration.checksum().to_string(),
            batch: 1,
            state: RecordState::Applied,
            applied_at: "2024-01-01T00:00:00Z".to_string(),
            duration_ms: 1,
            applied_by: "test".to_string(),
            failure: None,
        }
    }

    /// The files 1..=5 (those in `archived` left out), then the baseline at 3.
    fn files(archived: &[i64]) -> Vec<Migration> {
        let mut all: Vec<Migration> = (1..=5).filter(|v| !archived.contains(v)).map(m).collect();
        all.push(b(3));
        all
    }

    fn steps(
        available: &[Migration],
        applied: &[AppliedMigration],
        command: Command,
    ) -> Vec<(Direction, i64, String)> {
        let planned = plan(available, applied, command, PlanOptions::default()).unwrap();
        (planned.steps.iter())
            .map(|s| (s.direction, s.migration.version, s.migration.name.clone()))
            .collect()
    }

    fn refusal(available: &[Migration], applied: &[AppliedMigration], command: Command) -> Error {
        plan(available, applied, command, PlanOptions::default()).unwrap_err()
    }

    fn code(available: &[Migration], applied: &[AppliedMigration], command: Command) -> Code {
        refusal(available, applied, command).code()
    }

    fn up(version: i64, name: &str) -> (Direction, i64, String) {
        (Direction::Up, version, name.to_string())
    }

    #[test]
    fn a_new_database_runs_the_highest_baseline_then_the_files_after_it() {
        for archived in [&[][..], &[1, 2, 3]] {
            let available = files(archived);
            assert_eq!(
                steps(&available, &[], Command::Migrate),
                [up(3, "squash"), up(4, "m4"), up(5, "m5")]
            );
            let fresh = plan(
                &available,
                &[rec(&m(1))],
                Command::Fresh,
                PlanOptions::default(),
            );
            let fresh = fresh.unwrap();
            assert!(fresh.drop_all);
            assert_eq!(fresh.steps[0].migration.name, "squash");
        }
        // A target below the baseline builds from the files.
        let available = files(&[]);
        assert_eq!(
            steps(&available, &[], Command::MigrateTo(2)),
            [up(1, "m1"), up(2, "m2")]
        );
        assert_eq!(
            steps(&available, &[], Command::MigrateTo(3)),
            [up(3, "squash")]
        );
        // ... and is refused once they are archived, rather than doing nothing.
        let archived = files(&[1, 2, 3]);
        assert_eq!(
            code(&archived, &[], Command::MigrateTo(2)),
            Code::MissingMigration
        );
    }

    #[test]
    fn a_database_built_from_the_baseline_follows_it_and_cannot_go_below_it() {
        let available = files(&[]);
        let applied = [rec(&b(3)), rec(&m(4))];
        assert_eq!(steps(&available, &applied, Command::Migrate), [up(5, "m5")]);
        let followed = followed(&available, &applied, None);
        assert_eq!(followed.baseline.map(|b| b.version), Some(3));
        assert!(steps(&available, &applied, Command::MigrateTo(3)).len() == 1);
        let error = plan(
            &available,
            &applied,
            Command::Rollback(RollbackScope::All),
            PlanOptions::default(),
        )
        .unwrap_err();
        assert_eq!(error.code(), Code::IrreversibleMigration);
        assert!(error.to_string().contains("baseline"), "{error}");
        assert_eq!(
            code(&available, &applied, Command::MigrateTo(2)),
            Code::IrreversibleMigration
        );
        let lines = status(&available, &applied);
        let shown: Vec<(i64, MigrationState)> =
            lines.iter().map(|l| (l.version, l.state)).collect();
        assert_eq!(
            shown,
            [
                (3, MigrationState::Applied),
                (4, MigrationState::Applied),
                (5, MigrationState::Pending)
            ]
        );
        assert_eq!(lines[0].squashes.as_deref(), Some("1–3, 3 migrations"));
    }

    #[test]
    fn a_database_that_applied_the_originals_goes_on_from_its_history_with_them_archived() {
        let applied: Vec<AppliedMigration> = (1..=4).map(|v| rec(&m(v))).collect();
        for archived in [&[][..], &[1, 2, 3]] {
            let available = files(archived);
            assert_eq!(steps(&available, &applied, Command::Migrate), [up(5, "m5")]);
        }
        let available = files(&[1, 2, 3]);
        let lines = status(&available, &applied);
        let shown: Vec<(i64, MigrationState)> =
            lines.iter().map(|l| (l.version, l.state)).collect();
        assert_eq!(
            shown,
            [
                (1, MigrationState::Squashed),
                (2, MigrationState::Squashed),
                (3, MigrationState::Squashed),
                (4, MigrationState::Applied),
                (5, MigrationState::Pending)
            ]
        );
        // A record no baseline stands for still needs its file.
        let available = files(&[1, 2, 3, 4]);
        assert_eq!(
            code(&available, &applied, Command::Migrate),
            Code::MissingMigration
        );
        // Reversing an archived one needs its file back.
        let available = files(&[1, 2, 3]);
        assert_eq!(
            code(&available, &applied, Command::MigrateTo(2)),
            Code::MissingMigration
        );
    }

    #[test]
    fn a_database_inside_the_baseline_with_its_files_archived_is_refused() {
        let applied = [rec(&m(1)), rec(&m(2))];
        let available = files(&[1, 2, 3]);
        let error = refusal(&available, &applied, Command::Migrate);
        assert_eq!(error.code(), Code::MissingMigration);
        assert!(
            error
                .to_string()
                .contains("migration(s) 3 are neither applied"),
            "{error}"
        );
        // With the files there, it goes on from its history: 3 is pending like any other.
        let available = files(&[]);
        assert_eq!(
            steps(&available, &applied, Command::Migrate),
            [up(3, "m3"), up(4, "m4"), up(5, "m5")]
        );
    }

    #[test]
    fn a_file_the_baseline_does_not_stand_for_runs_after_it_though_older() {
        // Merged from a branch after the squash: 2 is not in the baseline's list.
        let mut available: Vec<Migration> = [1, 2, 3, 4].into_iter().map(m).collect();
        available
            .push(Migration::new(3, "squash", "CREATE TABLE t (id INT);").as_baseline(vec![1, 3]));
        assert_eq!(
            steps(&available, &[], Command::Migrate),
            [up(3, "squash"), up(2, "m2"), up(4, "m4")]
        );
        let built = [rec(&available[4])];
        assert_eq!(
            steps(&available, &built, Command::Migrate),
            [up(2, "m2"), up(4, "m4")]
        );
    }

    #[test]
    fn an_edited_baseline_is_refused_by_its_checksum_never_taken_for_the_originals() {
        let applied = [rec(&b(3)), rec(&m(4))];
        let mut available = files(&[]);
        let edited =
            Migration::new(3, "squash", "CREATE TABLE t1 (id BIGINT);").as_baseline(vec![1, 2, 3]);
        *available.last_mut().unwrap() = edited;
        let error = refusal(&available, &applied, Command::Migrate);
        assert_eq!(error.code(), Code::ChecksumMismatch);
        assert!(error.to_string().contains("squash"), "{error}");
    }

    #[test]
    fn the_squashed_versions_of_every_baseline_are_known() {
        let mut available = files(&[]);
        available.push(
            Migration::new(5, "squash", "CREATE TABLE t (id INT);")
                .as_baseline(vec![1, 2, 3, 4, 5]),
        );
        assert_eq!(squashed_versions(&available), (1..=5).collect());
        // A new database takes the highest baseline.
        assert_eq!(steps(&available, &[], Command::Migrate), [up(5, "squash")]);
    }
}
