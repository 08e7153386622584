//! Tests of the planner: one unit test per rule, then properties checked against a small
//! simulator that applies plans to an in-memory history.
//!
//! One long file on purpose: the properties at the end drive every rule above through the one
//! simulator, and a rule is easiest to check beside the property that combines it.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::history::{AppliedMigration, RecordState};
use crate::migration::{Direction, Migration};
use crate::Code;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// A reversible migration.
fn m(version: i64) -> Migration {
    Migration::new(
        version,
        format!("m{version}"),
        format!("CREATE TABLE t{version} (id INTEGER);"),
    )
    .with_down(format!("DROP TABLE t{version};"))
}

/// A migration without a down step.
fn irreversible(version: i64) -> Migration {
    Migration::new(
        version,
        format!("m{version}"),
        format!("CREATE TABLE t{version} (id INTEGER);"),
    )
}

/// An `applied` record of `migration` in `batch`.
fn rec(migration: &Migration, batch: i64) -> AppliedMigration {
    AppliedMigration {
        version: migration.version,
        name: migration.name.clone(),
        checksum: migration.checksum().to_string(),
        batch,
        state: RecordState::Applied,
        applied_at: "2024-01-01T00:00:00Z".to_string(),
        duration_ms: 1,
        applied_by: "test:1 dirthara/0".to_string(),
        failure: None,
    }
}

fn plan_ok<'a>(
    available: &'a [Migration],
    applied: &[AppliedMigration],
    command: Command,
) -> Plan<'a> {
    match plan(available, applied, command, PlanOptions::default()) {
        Ok(planned) => planned,
        Err(e) => panic!("{command:?} should plan, got {:?}: {e}", e.code()),
    }
}

fn err_code(result: Result<Plan<'_>>) -> Code {
    match result {
        Ok(planned) => panic!("expected an error, got the plan {:?}", steps_of(&planned)),
        Err(e) => e.code(),
    }
}

fn plan_err(available: &[Migration], applied: &[AppliedMigration], command: Command) -> Code {
    err_code(plan(available, applied, command, PlanOptions::default()))
}

fn steps_of(planned: &Plan<'_>) -> Vec<(Direction, i64)> {
    planned
        .steps
        .iter()
        .map(|s| (s.direction, s.migration.version))
        .collect()
}

fn ups(versions: &[i64]) -> Vec<(Direction, i64)> {
    versions.iter().map(|v| (Direction::Up, *v)).collect()
}

fn downs(versions: &[i64]) -> Vec<(Direction, i64)> {
    versions.iter().map(|v| (Direction::Down, *v)).collect()
}

fn state_of(lines: &[MigrationStatus], version: i64) -> MigrationState {
    lines
        .iter()
        .find(|l| l.version == version)
        .unwrap_or_else(|| panic!("status has no line for {version}"))
        .state
}

/// Applies a plan to an in-memory history the way the engine records it.
fn simulate(history: &mut Vec<AppliedMigration>, planned: &Plan<'_>) {
    if planned.drop_all {
        history.clear();
    }
    for step in &planned.steps {
        let version = step.migration.version;
        match step.direction {
            Direction::Up => {
                assert!(
                    history.iter().all(|r| r.version != version),
                    "plan applies {version}, which is already recorded"
                );
                history.push(rec(step.migration, planned.batch));
            }
            Direction::Down => {
                assert!(
                    history.iter().any(|r| r.version == version),
                    "plan reverses {version}, which is not recorded"
                );
                // The planner promises that every down step it plans exists.
                assert!(!step.text().is_empty());
                history.retain(|r| r.version != version);
            }
        }
    }
}

fn versions_of(history: &[AppliedMigration]) -> BTreeSet<i64> {
    history.iter().map(|r| r.version).collect()
}

fn sorted(history: &[AppliedMigration]) -> Vec<AppliedMigration> {
    let mut records = history.to_vec();
    records.sort_by_key(|r| r.version);
    records
}

// ---------------------------------------------------------------------------------------
// migrate
// ---------------------------------------------------------------------------------------

#[test]
fn migrate_applies_pending_in_version_order_as_batch_one_on_empty_history() {
    // Deliberately not in version order: the planner sorts.
    let available = vec![m(3), m(1), m(2)];
    let planned = plan_ok(&available, &[], Command::Migrate);
    assert_eq!(steps_of(&planned), ups(&[1, 2, 3]));
    assert_eq!(planned.batch, 1);
    assert!(!planned.drop_all);
    assert!(planned.warnings.is_empty());
    assert!(planned.steps.iter().all(|s| !s.out_of_order));
}

#[test]
fn migrate_batch_is_highest_recorded_batch_plus_one() {
    let available = vec![m(1), m(2), m(3), m(4)];
    // Batches need not be contiguous: the next one is the highest + 1, not the count + 1.
    let history = vec![rec(&available[0], 1), rec(&available[1], 3)];
    let planned = plan_ok(&available, &history, Command::Migrate);
    assert_eq!(steps_of(&planned), ups(&[3, 4]));
    assert_eq!(planned.batch, 4);
}

#[test]
fn migrate_with_nothing_pending_plans_nothing() {
    let available = vec![m(1), m(2)];
    let history = vec![rec(&available[0], 1), rec(&available[1], 2)];
    let planned = plan_ok(&available, &history, Command::Migrate);
    assert!(planned.is_empty());
    assert!(planned.steps.is_empty());
    assert!(planned.warnings.is_empty());

    let nothing = plan_ok(&[], &[], Command::Migrate);
    assert!(nothing.is_empty());
    assert_eq!(nothing.batch, 1);
}

#[test]
fn migrate_up_step_text_is_the_up_sql() {
    let available = vec![m(1)];
    let planned = plan_ok(&available, &[], Command::Migrate);
    assert_eq!(planned.steps[0].text(), "CREATE TABLE t1 (id INTEGER);");
}

// ---------------------------------------------------------------------------------------
// rollback
// ---------------------------------------------------------------------------------------

#[test]
fn rollback_last_batch_reverses_exactly_the_newest_batch_newest_version_first() {
    let available = vec![m(1), m(2), m(3), m(4), m(5)];
    let history = vec![
        rec(&available[0], 1),
        rec(&available[1], 1),
        rec(&available[2], 2),
        rec(&available[3], 2),
        rec(&available[4], 2),
    ];
    let planned = plan_ok(
        &available,
        &history,
        Command::Rollback(RollbackScope::LastBatch),
    );
    assert_eq!(steps_of(&planned), downs(&[5, 4, 3]));
    assert_eq!(planned.steps[0].text(), "DROP TABLE t5;");
    assert!(planned.warnings.is_empty());
}

#[test]
fn rollback_last_batch_uses_the_batch_not_the_highest_version() {
    // Version 2 was merged late and applied in batch 2, after 3 (batch 1).
    let available = vec![m(1), m(2), m(3)];
    let history = vec![
        rec(&available[0], 1),
        rec(&available[2], 1),
        rec(&available[1], 2),
    ];
    let planned = plan_ok(
        &available,
        &history,
        Command::Rollback(RollbackScope::LastBatch),
    );
    assert_eq!(steps_of(&planned), downs(&[2]));
}

#[test]
fn rollback_on_empty_history_plans_nothing() {
    let available = vec![m(1)];
    for scope in [
        RollbackScope::LastBatch,
        RollbackScope::Steps(3),
        RollbackScope::To(0),
        RollbackScope::To(1),
        RollbackScope::All,
    ] {
        let planned = plan_ok(&available, &[], Command::Rollback(scope));
        assert!(planned.is_empty(), "{scope:?}");
    }
}

#[test]
fn rollback_steps_takes_the_n_most_recently_applied_across_batches() {
    let available = vec![m(1), m(2), m(3), m(4), m(10), m(20)];
    // batch 1: 10, 20; batch 2: 1, 2 (out of order); batch 3: 3, 4
    let history = vec![
        rec(&available[4], 1),
        rec(&available[5], 1),
        rec(&available[0], 2),
        rec(&available[1], 2),
        rec(&available[2], 3),
        rec(&available[3], 3),
    ];
    let cases: [(usize, &[i64]); 6] = [
        (0, &[]),
        (1, &[4]),
        (2, &[4, 3]),
        (3, &[4, 3, 2]),
        (5, &[4, 3, 2, 1, 20]),
        (6, &[4, 3, 2, 1, 20, 10]),
    ];
    for (n, expected) in cases {
        let planned = plan_ok(
            &available,
            &history,
            Command::Rollback(RollbackScope::Steps(n)),
        );
        assert_eq!(steps_of(&planned), downs(expected), "Steps({n})");
    }
}

#[test]
fn rollback_steps_beyond_the_history_reverses_everything() {
    let available = vec![m(1), m(2)];
    let history = vec![rec(&available[0], 1), rec(&available[1], 2)];
    let planned = plan_ok(
        &available,
        &history,
        Command::Rollback(RollbackScope::Steps(99)),
    );
    assert_eq!(steps_of(&planned), downs(&[2, 1]));
}

#[test]
fn rollback_to_reverses_only_versions_above_target_and_target_stays() {
    let available = vec![m(1), m(2), m(3), m(4)];
    let history = vec![
        rec(&available[0], 1),
        rec(&available[1], 1),
        rec(&available[2], 2),
        rec(&available[3], 3),
    ];
    let planned = plan_ok(
        &available,
        &history,
        Command::Rollback(RollbackScope::To(2)),
    );
    assert_eq!(steps_of(&planned), downs(&[4, 3]));

    let planned = plan_ok(
        &available,
        &history,
        Command::Rollback(RollbackScope::To(4)),
    );
    assert!(planned.is_empty(), "To(newest) reverses nothing");
}

#[test]
fn rollback_to_a_known_pending_version_reverses_the_applied_above_it() {
    let available = vec![m(1), m(2), m(3)];
    // 2 is known but pending.
    let history = vec![rec(&available[0], 1), rec(&available[2], 1)];
    let planned = plan_ok(
        &available,
        &history,
        Command::Rollback(RollbackScope::To(2)),
    );
    assert_eq!(steps_of(&planned), downs(&[3]));
}

#[test]
fn rollback_to_zero_and_all_reverse_everything_newest_first() {
    let available = vec![m(1), m(2), m(3)];
    let history = vec![
        rec(&available[0], 1),
        rec(&available[2], 1),
        rec(&available[1], 2),
    ];
    for scope in [RollbackScope::To(0), RollbackScope::All] {
        let planned = plan_ok(&available, &history, Command::Rollback(scope));
        assert_eq!(steps_of(&planned), downs(&[2, 3, 1]), "{scope:?}");
        assert!(!planned.drop_all);
    }
}

#[test]
fn rollback_to_unknown_version_is_unknown_version() {
    let available = vec![m(1), m(2)];
    let history = vec![rec(&available[0], 1)];
    for v in [3, -1, i64::MAX] {
        assert_eq!(
            plan_err(
                &available,
                &history,
                Command::Rollback(RollbackScope::To(v))
            ),
            Code::UnknownVersion,
            "To({v})"
        );
    }
}

// ---------------------------------------------------------------------------------------
// to V
// ---------------------------------------------------------------------------------------

#[test]
fn migrate_to_up_applies_only_pending_through_target() {
    let available = vec![m(1), m(2), m(3), m(4)];
    let history = vec![rec(&available[0], 1)];
    let planned = plan_ok(&available, &history, Command::MigrateTo(3));
    assert_eq!(steps_of(&planned), ups(&[2, 3]));
    assert_eq!(planned.batch, 2);
    assert!(planned.warnings.is_empty());
}

#[test]
fn migrate_to_down_reverses_until_target_is_newest() {
    let available = vec![m(1), m(2), m(3), m(4)];
    let history = vec![
        rec(&available[0], 1),
        rec(&available[1], 1),
        rec(&available[2], 2),
        rec(&available[3], 2),
    ];
    let planned = plan_ok(&available, &history, Command::MigrateTo(2));
    assert_eq!(steps_of(&planned), downs(&[4, 3]));
}

#[test]
fn migrate_to_current_newest_plans_nothing() {
    let available = vec![m(1), m(2), m(3)];
    let history = vec![rec(&available[0], 1), rec(&available[1], 1)];
    let planned = plan_ok(&available, &history, Command::MigrateTo(2));
    assert!(planned.is_empty());
}

#[test]
fn migrate_to_zero_reverses_everything() {
    let available = vec![m(1), m(2), m(3)];
    let history = vec![
        rec(&available[0], 1),
        rec(&available[1], 2),
        rec(&available[2], 2),
    ];
    let planned = plan_ok(&available, &history, Command::MigrateTo(0));
    assert_eq!(steps_of(&planned), downs(&[3, 2, 1]));
}

#[test]
fn migrate_to_zero_targets_a_real_migration_zero_and_rollback_all_reverses_it() {
    let available = vec![m(0), m(1), m(2)];
    let history = vec![
        rec(&available[0], 1),
        rec(&available[1], 1),
        rec(&available[2], 2),
    ];
    let planned = plan_ok(&available, &history, Command::MigrateTo(0));
    assert_eq!(steps_of(&planned), downs(&[2, 1]));
    let planned = plan_ok(
        &available,
        &history,
        Command::Rollback(RollbackScope::To(0)),
    );
    assert_eq!(steps_of(&planned), downs(&[2, 1]));
    let planned = plan_ok(&available, &history, Command::Rollback(RollbackScope::All));
    assert_eq!(steps_of(&planned), downs(&[2, 1, 0]));
    // From an empty history, `to 0` applies migration 0 and nothing after it.
    let planned = plan_ok(&available, &[], Command::MigrateTo(0));
    assert_eq!(steps_of(&planned), ups(&[0]));
    let planned = plan_ok(&available, &[], Command::Migrate);
    assert_eq!(steps_of(&planned), ups(&[0, 1, 2]));
}

#[test]
fn migrate_to_unknown_version_is_unknown_version() {
    let available = vec![m(1), m(2)];
    let history = vec![rec(&available[0], 1)];
    for v in [3, -5, i64::MAX] {
        assert_eq!(
            plan_err(&available, &history, Command::MigrateTo(v)),
            Code::UnknownVersion,
            "MigrateTo({v})"
        );
    }
}

// ---------------------------------------------------------------------------------------
// refresh and fresh
// ---------------------------------------------------------------------------------------

#[test]
fn refresh_reverses_all_applied_then_applies_all_as_batch_one() {
    let available = vec![m(1), m(2), m(3), m(4)];
    let history = vec![
        rec(&available[0], 1),
        rec(&available[1], 2),
        rec(&available[2], 2),
    ];
    let planned = plan_ok(&available, &history, Command::Refresh);
    let mut expected = downs(&[3, 2, 1]);
    expected.extend(ups(&[1, 2, 3, 4]));
    assert_eq!(steps_of(&planned), expected);
    assert_eq!(planned.batch, 1);
    assert!(!planned.drop_all);
    assert!(planned.warnings.is_empty());
    assert!(planned.steps.iter().all(|s| !s.out_of_order));
}

#[test]
fn refresh_on_empty_history_applies_all() {
    let available = vec![m(1), m(2)];
    let planned = plan_ok(&available, &[], Command::Refresh);
    assert_eq!(steps_of(&planned), ups(&[1, 2]));
    assert_eq!(planned.batch, 1);
}

#[test]
fn fresh_drops_all_then_applies_all_as_batch_one() {
    let available = vec![m(1), irreversible(2), m(3)];
    let history = vec![rec(&available[0], 1), rec(&available[1], 2)];
    let planned = plan_ok(&available, &history, Command::Fresh);
    assert!(planned.drop_all);
    assert!(!planned.is_empty());
    assert_eq!(steps_of(&planned), ups(&[1, 2, 3]));
    assert_eq!(planned.batch, 1);
    assert!(planned.warnings.is_empty());

    let empty = plan_ok(&[], &[], Command::Fresh);
    assert!(empty.drop_all);
    assert!(
        !empty.is_empty(),
        "dropping everything is not an empty plan"
    );
}

#[test]
fn fresh_ignores_a_dirty_modified_or_missing_history() {
    let available = vec![m(1), m(2), m(3)];
    let mut dirty = rec(&available[0], 1);
    dirty.state = RecordState::Running;
    let mut modified = rec(&available[1], 1);
    modified.checksum = "not-the-checksum".to_string();
    let missing = rec(&m(9), 2);
    let history = vec![dirty, modified, missing];
    let planned = plan_ok(&available, &history, Command::Fresh);
    assert!(planned.drop_all);
    assert_eq!(steps_of(&planned), ups(&[1, 2, 3]));
    assert_eq!(planned.batch, 1);
    assert!(planned.warnings.is_empty());
}

#[test]
fn refresh_and_fresh_apply_in_version_order_even_if_available_is_unsorted() {
    // `migrate` sorts what it applies; `refresh` and `fresh` must apply "all" in the same
    // version order, whatever order the caller passes the migrations in.
    let available = vec![m(3), m(1), m(2)];
    let history = vec![rec(&available[1], 1)];
    let planned = plan_ok(&available, &history, Command::Refresh);
    let mut expected = downs(&[1]);
    expected.extend(ups(&[1, 2, 3]));
    assert_eq!(steps_of(&planned), expected);

    let planned = plan_ok(&available, &history, Command::Fresh);
    assert_eq!(steps_of(&planned), ups(&[1, 2, 3]));
}

// ---------------------------------------------------------------------------------------
// refusals
// ---------------------------------------------------------------------------------------

#[test]
fn reversing_a_migration_without_down_is_irreversible_and_plans_nothing() {
    let available = vec![m(1), irreversible(2), m(3)];
    let history = vec![
        rec(&available[0], 1),
        rec(&available[1], 1),
        rec(&available[2], 2),
    ];
    for command in [
        Command::Rollback(RollbackScope::Steps(2)),
        Command::Rollback(RollbackScope::To(1)),
        Command::Rollback(RollbackScope::To(0)),
        Command::Rollback(RollbackScope::All),
        Command::MigrateTo(1),
        Command::MigrateTo(0),
        Command::Refresh,
    ] {
        let result = plan(&available, &history, command, PlanOptions::default());
        match result {
            Ok(planned) => panic!("{command:?} planned {:?}", steps_of(&planned)),
            Err(e) => {
                assert_eq!(e.code(), Code::IrreversibleMigration, "{command:?}");
                assert!(
                    matches!(e.kind(), ErrorKind::Irreversible { version: 2, name } if name == "m2"),
                    "{command:?}: {:?}",
                    e.kind()
                );
            }
        }
    }
    // The last batch holds only 3, which is reversible.
    let planned = plan_ok(
        &available,
        &history,
        Command::Rollback(RollbackScope::LastBatch),
    );
    assert_eq!(steps_of(&planned), downs(&[3]));
}

#[test]
fn rollback_stopping_at_an_irreversible_migration_keeps_it_and_succeeds() {
    let available = vec![m(1), irreversible(2), m(3)];
    let history = vec![
        rec(&available[0], 1),
        rec(&available[1], 1),
        rec(&available[2], 1),
    ];
    let planned = plan_ok(
        &available,
        &history,
        Command::Rollback(RollbackScope::To(2)),
    );
    assert_eq!(steps_of(&planned), downs(&[3]));
    let planned = plan_ok(
        &available,
        &history,
        Command::Rollback(RollbackScope::Steps(1)),
    );
    assert_eq!(steps_of(&planned), downs(&[3]));
}

#[test]
fn applied_record_without_its_migration_is_missing_migration() {
    let available = vec![m(1), m(3)];
    let history = vec![rec(&available[0], 1), rec(&m(2), 1)];
    for command in [
        Command::Migrate,
        Command::Rollback(RollbackScope::LastBatch),
        Command::Rollback(RollbackScope::All),
        Command::MigrateTo(3),
        Command::Refresh,
    ] {
        let result = plan(&available, &history, command, PlanOptions::default());
        match result {
            Ok(planned) => panic!("{command:?} planned {:?}", steps_of(&planned)),
            Err(e) => {
                assert_eq!(e.code(), Code::MissingMigration, "{command:?}");
                assert!(matches!(
                    e.kind(),
                    ErrorKind::MissingMigration { version: 2, .. }
                ));
            }
        }
    }
}

#[test]
fn changed_checksum_is_checksum_mismatch() {
    let available = vec![m(1), m(2)];
    let mut changed = rec(&available[0], 1);
    changed.checksum = "0000".to_string();
    let history = vec![changed];
    for command in [
        Command::Migrate,
        Command::Rollback(RollbackScope::LastBatch),
        Command::MigrateTo(2),
        Command::Refresh,
    ] {
        let result = plan(&available, &history, command, PlanOptions::default());
        match result {
            Ok(planned) => panic!("{command:?} planned {:?}", steps_of(&planned)),
            Err(e) => {
                assert_eq!(e.code(), Code::ChecksumMismatch, "{command:?}");
                match e.kind() {
                    ErrorKind::ChecksumMismatch {
                        version,
                        recorded,
                        actual,
                        ..
                    } => {
                        assert_eq!(*version, 1);
                        assert_eq!(recorded, "0000");
                        assert_eq!(actual, available[0].checksum());
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
    }
}

#[test]
fn running_record_is_dirty_migration_reported_before_checksum_or_missing_problems() {
    let available = vec![m(1), m(2), m(3)];
    // Listed first, so a check that stops at the first bad record would report these.
    let mut changed = rec(&available[0], 1);
    changed.checksum = "0000".to_string();
    let missing = rec(&m(7), 1);
    let mut running = rec(&available[1], 2);
    running.state = RecordState::Running;
    let history = vec![changed, missing, running];
    for command in [
        Command::Migrate,
        Command::Rollback(RollbackScope::LastBatch),
        Command::Rollback(RollbackScope::All),
        Command::MigrateTo(3),
        Command::Refresh,
    ] {
        let result = plan(&available, &history, command, PlanOptions::default());
        match result {
            Ok(planned) => panic!("{command:?} planned {:?}", steps_of(&planned)),
            Err(e) => {
                assert_eq!(e.code(), Code::DirtyMigration, "{command:?}");
                assert!(matches!(e.kind(), ErrorKind::Dirty { version: 2, .. }));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// out of order
// ---------------------------------------------------------------------------------------

#[test]
fn out_of_order_pending_is_applied_flagged_and_warned_once() {
    let available = vec![m(1), m(2), m(3), m(4), m(5)];
    // 2 and 4 were merged from a branch after 5 was applied.
    let history = vec![
        rec(&available[0], 1),
        rec(&available[2], 1),
        rec(&available[4], 2),
    ];
    let planned = plan_ok(&available, &history, Command::Migrate);
    assert_eq!(steps_of(&planned), ups(&[2, 4]));
    assert!(planned.steps.iter().all(|s| s.out_of_order));
    assert_eq!(planned.batch, 3);
    assert_eq!(planned.warnings.len(), 1);
    assert_eq!(planned.warnings[0].code, Code::OutOfOrder);
    assert!(planned.warnings[0].message.contains("2, 4"));
    assert!(planned.warnings[0].message.contains('5'));
}

#[test]
fn only_pending_older_than_newest_applied_are_out_of_order() {
    let available = vec![m(1), m(2), m(3), m(4)];
    let history = vec![rec(&available[0], 1), rec(&available[2], 1)];
    let planned = plan_ok(&available, &history, Command::Migrate);
    let flags: Vec<(i64, bool)> = planned
        .steps
        .iter()
        .map(|s| (s.migration.version, s.out_of_order))
        .collect();
    assert_eq!(flags, vec![(2, true), (4, false)]);
    assert_eq!(planned.warnings.len(), 1);
}

#[test]
fn out_of_order_with_strict_is_an_out_of_order_error() {
    let available = vec![m(1), m(2), m(3), m(4)];
    let history = vec![rec(&available[0], 1), rec(&available[2], 1)];
    let result = plan(
        &available,
        &history,
        Command::Migrate,
        PlanOptions { strict: true },
    );
    let e = result.expect_err("strict refuses out-of-order migrations");
    assert_eq!(e.code(), Code::OutOfOrder);
    match e.kind() {
        ErrorKind::OutOfOrder {
            versions,
            newest_applied,
        } => {
            assert_eq!(versions, &vec![2]);
            assert_eq!(*newest_applied, 3);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn strict_without_out_of_order_plans_normally() {
    let available = vec![m(1), m(2), m(3)];
    let history = vec![rec(&available[0], 1)];
    let strict = plan(
        &available,
        &history,
        Command::Migrate,
        PlanOptions { strict: true },
    )
    .expect("nothing is out of order");
    assert_eq!(strict, plan_ok(&available, &history, Command::Migrate));
}

#[test]
fn refresh_and_migrate_to_below_reversed_versions_are_not_out_of_order() {
    let available = vec![m(1), m(2), m(3), m(4)];
    let history = vec![rec(&available[0], 1), rec(&available[3], 1)];
    // Refresh reverses 4 before applying 2: nothing newer remains applied.
    let planned = plan_ok(&available, &history, Command::Refresh);
    assert!(planned.warnings.is_empty());
    assert!(planned.steps.iter().all(|s| !s.out_of_order));
    // to 3 reverses 4, then applies 2 and 3: nothing newer than them remains.
    let planned = plan_ok(&available, &history, Command::MigrateTo(3));
    let mut expected = downs(&[4]);
    expected.extend(ups(&[2, 3]));
    assert_eq!(steps_of(&planned), expected);
    assert!(planned.warnings.is_empty());
    assert!(planned.steps.iter().all(|s| !s.out_of_order));
    let strict = plan(
        &available,
        &history,
        Command::MigrateTo(3),
        PlanOptions { strict: true },
    );
    assert!(strict.is_ok());
}

// ---------------------------------------------------------------------------------------
// status
// ---------------------------------------------------------------------------------------

#[test]
fn status_reports_applied_pending_missing_modified_and_dirty() {
    let available = vec![m(1), m(2), m(3), m(4), m(6)];
    let applied = rec(&available[0], 1);
    let mut modified = rec(&available[1], 1);
    modified.checksum = "0000".to_string();
    let mut dirty = rec(&available[2], 2);
    dirty.state = RecordState::Running;
    let missing = rec(&m(5), 2);
    let mut dirty_and_missing = rec(&m(7), 3);
    dirty_and_missing.state = RecordState::Running;
    let history = vec![applied, modified, dirty, missing, dirty_and_missing];

    let lines = status(&available, &history);
    let versions: Vec<i64> = lines.iter().map(|l| l.version).collect();
    assert_eq!(
        versions,
        vec![1, 2, 3, 4, 5, 6, 7],
        "every version, in order"
    );
    assert_eq!(state_of(&lines, 1), MigrationState::Applied);
    assert_eq!(state_of(&lines, 2), MigrationState::Modified);
    assert_eq!(state_of(&lines, 3), MigrationState::Dirty);
    assert_eq!(state_of(&lines, 4), MigrationState::Pending);
    assert_eq!(state_of(&lines, 5), MigrationState::Missing);
    assert_eq!(state_of(&lines, 6), MigrationState::Pending);
    assert_eq!(state_of(&lines, 7), MigrationState::Dirty);

    let batches: Vec<Option<i64>> = lines.iter().map(|l| l.batch).collect();
    assert_eq!(
        batches,
        vec![Some(1), Some(1), Some(2), None, Some(2), None, Some(3)]
    );
    assert_eq!(lines[0].name, "m1");
    assert_eq!(lines[0].applied_at.as_deref(), Some("2024-01-01T00:00:00Z"));
    assert_eq!(lines[3].applied_at, None);
}

#[test]
fn status_flags_out_of_order_only_for_pending_older_than_newest_applied() {
    let available = vec![m(1), m(2), m(3), m(4), m(5)];
    let history = vec![rec(&available[0], 1), rec(&available[3], 1)];
    let lines = status(&available, &history);
    let flags: Vec<(i64, MigrationState, bool)> = lines
        .iter()
        .map(|l| (l.version, l.state, l.out_of_order))
        .collect();
    assert_eq!(
        flags,
        vec![
            (1, MigrationState::Applied, false),
            (2, MigrationState::Pending, true),
            (3, MigrationState::Pending, true),
            (4, MigrationState::Applied, false),
            (5, MigrationState::Pending, false),
        ]
    );

    // On an empty history nothing is out of order.
    assert!(status(&available, &[])
        .iter()
        .all(|l| !l.out_of_order && l.state == MigrationState::Pending && l.batch.is_none()));
}

#[test]
fn status_of_nothing_is_empty() {
    assert!(status(&[], &[]).is_empty());
}

// ---------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------

/// A migration of a generated scenario.
#[derive(Debug, Clone)]
struct MigrationSpec {
    version: i64,
    reversible: bool,
    /// Index of the history-building command before which the file appears (a later value
    /// than 0 makes it a migration merged from a branch).
    appears_at: usize,
}

/// A command run while building the history.
#[derive(Debug, Clone, Copy)]
enum Op {
    Migrate,
    LastBatch,
    Steps(usize),
    /// Rollback to one of the scenario's versions (which may not be available yet).
    To(prop::sample::Index),
    ToZero,
    All,
}

#[derive(Debug, Clone)]
struct Scenario {
    /// In arbitrary order: the planner must not rely on the caller's order.
    specs: Vec<MigrationSpec>,
    ops: Vec<Op>,
}

/// The final state of a scenario: every migration available, and the history the commands
/// left behind.
struct World {
    available: Vec<Migration>,
    history: Vec<AppliedMigration>,
}

impl World {
    fn migration(&self, version: i64) -> &Migration {
        self.available
            .iter()
            .find(|m| m.version == version)
            .expect("histories only record available migrations")
    }

    fn reversible(&self, version: i64) -> bool {
        self.migration(version).down.is_some()
    }

    fn sorted_available(&self) -> Vec<Migration> {
        let mut all = self.available.clone();
        all.sort_by_key(|m| m.version);
        all
    }

    /// The history from most to least recently applied: batch desc, version desc.
    fn newest_first(&self) -> Vec<AppliedMigration> {
        let mut records = self.history.clone();
        records.sort_by(|a, b| b.batch.cmp(&a.batch).then(b.version.cmp(&a.version)));
        records
    }

    fn max_batch(&self) -> i64 {
        self.history.iter().map(|r| r.batch).max().unwrap_or(0)
    }

    fn versions(&self) -> Vec<i64> {
        let mut versions: Vec<i64> = self.available.iter().map(|m| m.version).collect();
        versions.sort_unstable();
        versions
    }
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => Just(Op::Migrate),
        2 => Just(Op::LastBatch),
        2 => (0usize..4).prop_map(Op::Steps),
        2 => any::<prop::sample::Index>().prop_map(Op::To),
        1 => Just(Op::ToZero),
        1 => Just(Op::All),
    ]
}

fn scenario_strategy() -> impl Strategy<Value = Scenario> {
    (
        prop::collection::btree_set(1i64..60, 0..=12),
        prop::collection::vec(op_strategy(), 1..10),
    )
        .prop_flat_map(|(versions, ops)| {
            let n = versions.len();
            let last = ops.len();
            let specs = (
                Just(versions.into_iter().collect::<Vec<i64>>()),
                prop::collection::vec(prop::bool::weighted(0.85), n),
                prop::collection::vec(prop_oneof![3 => Just(0usize), 1 => 0..=last], n),
            )
                .prop_map(|(versions, reversible, appears_at)| {
                    versions
                        .into_iter()
                        .zip(reversible)
                        .zip(appears_at)
                        .map(|((version, reversible), appears_at)| MigrationSpec {
                            version,
                            reversible,
                            appears_at,
                        })
                        .collect::<Vec<_>>()
                })
                .prop_shuffle();
            (specs, Just(ops))
        })
        .prop_map(|(specs, ops)| Scenario { specs, ops })
}

fn make(spec: &MigrationSpec) -> Migration {
    if spec.reversible {
        m(spec.version)
    } else {
        irreversible(spec.version)
    }
}

/// Runs the scenario's commands through `plan` + `simulate` from an empty history, so the
/// resulting history is always one the planner itself could have produced.
fn build(scenario: &Scenario) -> World {
    let mut all_versions: Vec<i64> = scenario.specs.iter().map(|s| s.version).collect();
    all_versions.sort_unstable();
    let mut history = Vec::new();
    for (i, op) in scenario.ops.iter().enumerate() {
        let available: Vec<Migration> = scenario
            .specs
            .iter()
            .filter(|s| s.appears_at <= i)
            .map(make)
            .collect();
        let command = match op {
            Op::Migrate => Command::Migrate,
            Op::LastBatch => Command::Rollback(RollbackScope::LastBatch),
            Op::Steps(n) => Command::Rollback(RollbackScope::Steps(*n)),
            Op::To(index) if !all_versions.is_empty() => Command::Rollback(RollbackScope::To(
                all_versions[index.index(all_versions.len())],
            )),
            Op::To(_) | Op::ToZero => Command::Rollback(RollbackScope::To(0)),
            Op::All => Command::Rollback(RollbackScope::All),
        };
        match plan(&available, &history, command, PlanOptions::default()) {
            Ok(planned) => simulate(&mut history, &planned),
            Err(e) => assert!(
                matches!(
                    e.code(),
                    Code::IrreversibleMigration | Code::UnknownVersion
                ),
                "a consistent history can only fail with IRREVERSIBLE or UNKNOWN_VERSION, got {:?} for {command:?}",
                e.code()
            ),
        }
    }
    World {
        available: scenario.specs.iter().map(make).collect(),
        history,
    }
}

/// Checks the shape every successful plan has, applies it, and returns the new history.
fn check_plan_shape(
    world: &World,
    planned: &Plan<'_>,
    command: Command,
) -> std::result::Result<Vec<AppliedMigration>, TestCaseError> {
    let directions: Vec<Direction> = planned.steps.iter().map(|s| s.direction).collect();
    let first_up = directions
        .iter()
        .position(|d| *d == Direction::Up)
        .unwrap_or(directions.len());
    prop_assert!(
        directions[first_up..].iter().all(|d| *d == Direction::Up),
        "{command:?}: down steps must come before up steps: {directions:?}"
    );
    let up_versions: Vec<i64> = planned.steps[first_up..]
        .iter()
        .map(|s| s.migration.version)
        .collect();
    prop_assert!(
        up_versions.windows(2).all(|w| w[0] < w[1]),
        "{command:?}: up steps must be in strictly increasing version order: {up_versions:?}"
    );
    let down_versions: Vec<i64> = planned.steps[..first_up]
        .iter()
        .map(|s| s.migration.version)
        .collect();
    // Down steps go newest-applied first.
    let newest_first: Vec<i64> = world
        .newest_first()
        .iter()
        .map(|r| r.version)
        .filter(|v| down_versions.contains(v))
        .collect();
    prop_assert_eq!(&down_versions, &newest_first, "{:?}: down order", command);

    let remaining_max_batch = if planned.drop_all {
        0
    } else {
        world
            .history
            .iter()
            .filter(|r| !down_versions.contains(&r.version))
            .map(|r| r.batch)
            .max()
            .unwrap_or(0)
    };
    prop_assert_eq!(
        planned.batch,
        remaining_max_batch + 1,
        "{:?}: batch is max remaining batch + 1",
        command
    );

    let mut history = world.history.clone();
    simulate(&mut history, planned);
    let versions: Vec<i64> = history.iter().map(|r| r.version).collect();
    prop_assert_eq!(
        versions.len(),
        versions_of(&history).len(),
        "{:?}: duplicate versions in history",
        command
    );
    Ok(history)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn prop_migrate_applies_every_pending_once_and_nothing_else(scenario in scenario_strategy()) {
        let world = build(&scenario);
        let applied = versions_of(&world.history);
        let pending: Vec<i64> = world
            .versions()
            .into_iter()
            .filter(|v| !applied.contains(v))
            .collect();
        let planned = plan(&world.available, &world.history, Command::Migrate, PlanOptions::default())
            .expect("migrate plans on a consistent history");
        prop_assert!(!planned.drop_all);
        let planned_steps = steps_of(&planned);
        // Nothing pending is skipped, nothing applied is planned again, all in version order.
        prop_assert_eq!(&planned_steps, &ups(&pending));
        for step in &planned.steps {
            prop_assert!(!applied.contains(&step.migration.version));
        }
        prop_assert_eq!(planned.batch, world.max_batch() + 1);

        // Out of order: exactly the pending ones older than the newest applied.
        let newest = applied.iter().next_back().copied();
        let mut any_out_of_order = false;
        for step in &planned.steps {
            let expected = newest.is_some_and(|n| step.migration.version < n);
            prop_assert_eq!(step.out_of_order, expected, "version {}", step.migration.version);
            any_out_of_order |= expected;
        }
        prop_assert_eq!(planned.warnings.len(), usize::from(any_out_of_order));
        prop_assert!(planned.warnings.iter().all(|w| w.code == Code::OutOfOrder));
        let strict = plan(&world.available, &world.history, Command::Migrate, PlanOptions { strict: true });
        match strict {
            Ok(strict) => {
                prop_assert!(!any_out_of_order);
                prop_assert_eq!(&strict, &planned);
            }
            Err(e) => {
                prop_assert!(any_out_of_order);
                prop_assert_eq!(e.code(), Code::OutOfOrder);
            }
        }

        // After it: nothing pending, every migration applied exactly once.
        let after = check_plan_shape(&world, &planned, Command::Migrate)?;
        prop_assert!(status(&world.available, &after)
            .iter()
            .all(|l| l.state == MigrationState::Applied && !l.out_of_order));
        prop_assert_eq!(after.len(), world.available.len());
        let after_versions: Vec<i64> = versions_of(&after).into_iter().collect();
        prop_assert_eq!(after_versions, world.versions());
        for record in &after {
            if !applied.contains(&record.version) {
                prop_assert_eq!(record.batch, planned.batch);
            }
        }
        // A second migrate finds nothing to do.
        let again = plan(&world.available, &after, Command::Migrate, PlanOptions::default())
            .expect("migrate plans on a consistent history");
        prop_assert!(again.is_empty());
    }

    #[test]
    fn prop_migrate_then_rollback_last_batch_restores_the_history(scenario in scenario_strategy()) {
        let world = build(&scenario);
        let planned = plan(&world.available, &world.history, Command::Migrate, PlanOptions::default())
            .expect("migrate plans on a consistent history");
        if planned.steps.is_empty() {
            // Nothing was applied, so there is no batch of this run to roll back.
            return Ok(());
        }
        let batch_versions: Vec<i64> = planned.steps.iter().map(|s| s.migration.version).collect();
        let mut after = world.history.clone();
        simulate(&mut after, &planned);
        let rollback = plan(
            &world.available,
            &after,
            Command::Rollback(RollbackScope::LastBatch),
            PlanOptions::default(),
        );
        if batch_versions.iter().all(|v| world.reversible(*v)) {
            let rollback = rollback.expect("every migration of the batch is reversible");
            let mut reversed = batch_versions.clone();
            reversed.reverse();
            prop_assert_eq!(steps_of(&rollback), downs(&reversed));
            simulate(&mut after, &rollback);
            prop_assert_eq!(sorted(&after), sorted(&world.history));
        } else {
            let code = rollback.map(|p| steps_of(&p)).expect_err("an irreversible migration is in the batch").code();
            prop_assert_eq!(code, Code::IrreversibleMigration);
        }
    }

    #[test]
    fn prop_rollback_all_empties_the_history_or_refuses(scenario in scenario_strategy()) {
        let world = build(&scenario);
        let command = Command::Rollback(RollbackScope::All);
        let result = plan(&world.available, &world.history, command, PlanOptions::default());
        if world.history.iter().all(|r| world.reversible(r.version)) {
            let planned = result.expect("everything applied is reversible");
            let expected: Vec<i64> = world.newest_first().iter().map(|r| r.version).collect();
            prop_assert_eq!(steps_of(&planned), downs(&expected));
            let after = check_plan_shape(&world, &planned, command)?;
            prop_assert!(after.is_empty());
        } else {
            let code = result.map(|p| steps_of(&p)).expect_err("something applied is irreversible").code();
            prop_assert_eq!(code, Code::IrreversibleMigration);
        }
    }

    #[test]
    fn prop_rollback_steps_reverses_the_n_most_recent(
        scenario in scenario_strategy(),
        n in 0usize..16,
    ) {
        let world = build(&scenario);
        let command = Command::Rollback(RollbackScope::Steps(n));
        let result = plan(&world.available, &world.history, command, PlanOptions::default());
        let expected: Vec<i64> = world
            .newest_first()
            .iter()
            .take(n)
            .map(|r| r.version)
            .collect();
        prop_assert_eq!(expected.len(), n.min(world.history.len()));
        if expected.iter().all(|v| world.reversible(*v)) {
            let planned = result.expect("the n most recent are reversible");
            prop_assert_eq!(steps_of(&planned), downs(&expected));
            let after = check_plan_shape(&world, &planned, command)?;
            prop_assert_eq!(after.len(), world.history.len() - expected.len());
            let kept: Vec<AppliedMigration> = world
                .history
                .iter()
                .filter(|r| !expected.contains(&r.version))
                .cloned()
                .collect();
            prop_assert_eq!(sorted(&after), sorted(&kept));
        } else {
            let code = result.map(|p| steps_of(&p)).expect_err("one of the n most recent is irreversible").code();
            prop_assert_eq!(code, Code::IrreversibleMigration);
        }
    }

    #[test]
    fn prop_rollback_to_keeps_exactly_the_versions_up_to_target(
        scenario in scenario_strategy(),
        pick in any::<prop::sample::Index>(),
    ) {
        let world = build(&scenario);
        // Any known version (applied or not), and 0.
        let mut targets = world.versions();
        targets.push(0);
        let target = targets[pick.index(targets.len())];
        let command = Command::Rollback(RollbackScope::To(target));
        let result = plan(&world.available, &world.history, command, PlanOptions::default());
        let expected: Vec<i64> = world
            .newest_first()
            .iter()
            .map(|r| r.version)
            .filter(|v| *v > target)
            .collect();
        if expected.iter().all(|v| world.reversible(*v)) {
            let planned = result.expect("everything above the target is reversible");
            prop_assert_eq!(steps_of(&planned), downs(&expected));
            let after = check_plan_shape(&world, &planned, command)?;
            let kept: Vec<AppliedMigration> = world
                .history
                .iter()
                .filter(|r| r.version <= target)
                .cloned()
                .collect();
            prop_assert_eq!(sorted(&after), sorted(&kept));
        } else {
            let code = result.map(|p| steps_of(&p)).expect_err("something above the target is irreversible").code();
            prop_assert_eq!(code, Code::IrreversibleMigration);
        }
    }

    #[test]
    fn prop_migrate_to_ends_with_exactly_the_versions_up_to_target(
        scenario in scenario_strategy(),
        pick in any::<prop::sample::Index>(),
    ) {
        let world = build(&scenario);
        let mut targets = world.versions();
        targets.push(0);
        let target = targets[pick.index(targets.len())];
        let command = Command::MigrateTo(target);
        let result = plan(&world.available, &world.history, command, PlanOptions::default());
        let above_reversible = world
            .history
            .iter()
            .filter(|r| r.version > target)
            .all(|r| world.reversible(r.version));
        if above_reversible {
            let planned = result.expect("everything above the target is reversible");
            let after = check_plan_shape(&world, &planned, command)?;
            let expected: BTreeSet<i64> = world.versions().into_iter().filter(|v| *v <= target).collect();
            prop_assert_eq!(versions_of(&after), expected);
        } else {
            let code = result.map(|p| steps_of(&p)).expect_err("something above the target is irreversible").code();
            prop_assert_eq!(code, Code::IrreversibleMigration);
        }
    }

    #[test]
    fn prop_refresh_and_fresh_end_with_everything_in_batch_one(scenario in scenario_strategy()) {
        let world = build(&scenario);
        // Sorted: see `refresh_and_fresh_apply_in_version_order_even_if_available_is_unsorted`.
        let available = world.sorted_available();
        let sorted_world = World { available, history: world.history.clone() };
        for command in [Command::Refresh, Command::Fresh] {
            let result = plan(&sorted_world.available, &sorted_world.history, command, PlanOptions::default());
            let reversible = world.history.iter().all(|r| world.reversible(r.version));
            if command == Command::Fresh || reversible {
                let planned = result.expect("refresh of reversible history, or fresh");
                prop_assert!(planned.warnings.is_empty());
                prop_assert_eq!(planned.batch, 1);
                prop_assert_eq!(planned.drop_all, command == Command::Fresh);
                let after = check_plan_shape(&sorted_world, &planned, command)?;
                prop_assert!(after.iter().all(|r| r.batch == 1));
                let after_versions: Vec<i64> = versions_of(&after).into_iter().collect();
                prop_assert_eq!(after_versions, world.versions());
            } else {
                let code = result.map(|p| steps_of(&p)).expect_err("refresh of an irreversible history").code();
                prop_assert_eq!(code, Code::IrreversibleMigration);
            }
        }
    }

    #[test]
    fn prop_every_successful_plan_is_well_formed(
        scenario in scenario_strategy(),
        n in 0usize..6,
        pick in any::<prop::sample::Index>(),
    ) {
        let world = build(&scenario);
        let mut targets = world.versions();
        targets.push(0);
        let target = targets[pick.index(targets.len())];
        for command in [
            Command::Migrate,
            Command::Rollback(RollbackScope::LastBatch),
            Command::Rollback(RollbackScope::Steps(n)),
            Command::Rollback(RollbackScope::To(target)),
            Command::Rollback(RollbackScope::All),
            Command::MigrateTo(target),
        ] {
            match plan(&world.available, &world.history, command, PlanOptions::default()) {
                Ok(planned) => {
                    check_plan_shape(&world, &planned, command)?;
                }
                Err(e) => prop_assert_eq!(e.code(), Code::IrreversibleMigration, "{:?}", command),
            }
        }
    }

    #[test]
    fn prop_status_matches_the_history(scenario in scenario_strategy()) {
        let world = build(&scenario);
        let lines = status(&world.available, &world.history);
        let versions: Vec<i64> = lines.iter().map(|l| l.version).collect();
        prop_assert_eq!(versions, world.versions());
        let applied = versions_of(&world.history);
        let newest = applied.iter().next_back().copied();
        for line in &lines {
            let is_applied = applied.contains(&line.version);
            let expected = if is_applied { MigrationState::Applied } else { MigrationState::Pending };
            prop_assert_eq!(line.state, expected);
            prop_assert_eq!(line.batch.is_some(), is_applied);
            prop_assert_eq!(
                line.out_of_order,
                !is_applied && newest.is_some_and(|n| line.version < n)
            );
        }
    }
}
