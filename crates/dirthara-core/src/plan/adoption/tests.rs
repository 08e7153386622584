//! Every rule of `plan_adoption`, then properties over random histories.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;
use crate::history::RecordState;

fn m(version: i64) -> Migration {
    Migration::new(version, format!("m{version}"), format!("SELECT {version}"))
}

fn files(versions: &[i64]) -> Vec<Migration> {
    versions.iter().copied().map(m).collect()
}

fn foreign(tool: &str, applied: &[i64]) -> ForeignHistory {
    ForeignHistory {
        tool: tool.into(),
        table: format!("{tool}_table"),
        applied: applied.iter().copied().collect(),
        through: None,
        failed: None,
        repeatables: Default::default(),
    }
}

fn versions(plan: &AdoptionPlan<'_>) -> Vec<i64> {
    plan.records.iter().map(|m| m.version).collect()
}

fn record(version: i64, state: RecordState) -> AppliedMigration {
    AppliedMigration {
        version,
        name: format!("m{version}"),
        checksum: m(version).checksum().to_string(),
        batch: 1,
        state,
        applied_at: String::new(),
        duration_ms: 0,
        applied_by: String::new(),
        failure: None,
    }
}

#[test]
fn records_exactly_the_versions_the_tool_applied_in_one_batch() {
    let available = files(&[1, 2, 3, 4]);
    let planned = plan_adoption(&available, &[], &foreign("sqlx", &[1, 2])).unwrap();
    assert_eq!(versions(&planned), vec![1, 2]);
    assert_eq!(planned.batch, 1);
    assert!(planned.notes.is_empty(), "{:?}", planned.notes);
}

#[test]
fn records_carry_the_files_here_with_their_checksums() {
    let available = files(&[5, 7]);
    let planned = plan_adoption(&available, &[], &foreign("diesel", &[7])).unwrap();
    assert_eq!(planned.records[0].checksum(), m(7).checksum());
    assert_eq!(planned.records[0].name, "m7");
}

#[test]
fn version_zero_is_a_real_migration() {
    let available = files(&[0, 1]);
    let planned = plan_adoption(&available, &[], &foreign("sqlx", &[0])).unwrap();
    assert_eq!(versions(&planned), vec![0]);
}

#[test]
fn an_empty_foreign_history_adopts_nothing_and_says_so() {
    let available = files(&[1]);
    let planned = plan_adoption(&available, &[], &foreign("dbmate", &[])).unwrap();
    assert!(planned.records.is_empty());
    assert!(
        planned.notes[0].contains("nothing to adopt"),
        "{:?}",
        planned.notes
    );
}

#[test]
fn through_records_every_file_up_to_it_and_says_why() {
    let available = files(&[1, 2, 3, 4]);
    let mut history = foreign("golang-migrate", &[]);
    history.through = Some(Through {
        version: 3,
        needs_file: true,
        reason: "golang-migrate keeps only the newest version".into(),
    });
    let planned = plan_adoption(&available, &[], &history).unwrap();
    assert_eq!(versions(&planned), vec![1, 2, 3]);
    assert!(
        planned.notes[0].contains("golang-migrate keeps only the newest version")
            && planned.notes[0].contains("up to version 3 (3 file(s))"),
        "{:?}",
        planned.notes
    );
}

#[test]
fn a_through_that_needs_a_file_refuses_when_it_is_missing() {
    let available = files(&[1, 2]);
    let mut history = foreign("golang-migrate", &[]);
    history.through = Some(Through {
        version: 9,
        needs_file: true,
        reason: "r".into(),
    });
    let refused = plan_adoption(&available, &[], &history).unwrap_err();
    assert_eq!(
        refused,
        AdoptionRefusal::NoFile {
            tool: "golang-migrate".into(),
            table: "golang-migrate_table".into(),
            versions: vec![9]
        }
    );
}

#[test]
fn a_marker_through_needs_no_file_of_its_own() {
    // A Flyway baseline at 5 with files 3 and 7: 3 is covered, 7 stays pending.
    let available = files(&[3, 7]);
    let mut history = foreign("flyway", &[]);
    history.through = Some(Through {
        version: 5,
        needs_file: false,
        reason: "Flyway baseline".into(),
    });
    let planned = plan_adoption(&available, &[], &history).unwrap();
    assert_eq!(versions(&planned), vec![3]);
}

#[test]
fn applied_versions_and_a_through_combine() {
    let available = files(&[1, 2, 3, 8, 9]);
    let mut history = foreign("flyway", &[8]);
    history.through = Some(Through {
        version: 2,
        needs_file: false,
        reason: "Flyway baseline".into(),
    });
    let planned = plan_adoption(&available, &[], &history).unwrap();
    assert_eq!(versions(&planned), vec![1, 2, 8]);
    assert!(
        planned.notes.iter().any(|n| n.contains("version(s) 3")),
        "{:?}",
        planned.notes
    );
}

#[test]
fn gaps_stay_pending_and_are_named() {
    let available = files(&[1, 2, 3]);
    let planned = plan_adoption(&available, &[], &foreign("goose", &[1, 3])).unwrap();
    assert_eq!(versions(&planned), vec![1, 3]);
    assert!(
        planned.notes[0].contains("never applied version(s) 2")
            && planned.notes[0].contains("out of order"),
        "{:?}",
        planned.notes
    );
}

#[test]
fn a_version_without_a_file_is_refused_naming_every_one() {
    let available = files(&[1, 2]);
    let refused = plan_adoption(&available, &[], &foreign("refinery", &[1, 4, 6])).unwrap_err();
    assert_eq!(
        refused,
        AdoptionRefusal::NoFile {
            tool: "refinery".into(),
            table: "refinery_table".into(),
            versions: vec![4, 6]
        }
    );
    let message = refused.to_string();
    assert!(
        message.contains("version(s) 4, 6") && message.contains("--dir"),
        "{message}"
    );
}

#[test]
fn a_failed_or_dirty_entry_is_refused_with_the_tools_fix() {
    let available = files(&[1, 2]);
    let mut history = foreign("golang-migrate", &[]);
    history.failed = Some(ForeignFailure {
        version: 2,
        state: "dirty".into(),
        fix: "fix it by hand, then `migrate force 2`".into(),
    });
    let refused = plan_adoption(&available, &[], &history).unwrap_err();
    let message = refused.to_string();
    assert!(matches!(refused, AdoptionRefusal::ForeignFailed { .. }));
    assert!(
        message.contains("version 2 marked dirty") && message.contains("`migrate force 2`"),
        "{message}"
    );
}

#[test]
fn the_failure_is_reported_before_missing_files() {
    let mut history = foreign("sqlx", &[5]);
    history.failed = Some(ForeignFailure {
        version: 5,
        state: "failed".into(),
        fix: "f".into(),
    });
    let refused = plan_adoption(&[], &[], &history).unwrap_err();
    assert!(matches!(refused, AdoptionRefusal::ForeignFailed { .. }));
}

#[test]
fn a_history_with_records_is_refused_whatever_its_state() {
    let available = files(&[1, 2]);
    for state in [RecordState::Applied, RecordState::Running] {
        let applied = vec![record(1, state), record(2, state)];
        let refused = plan_adoption(&available, &applied, &foreign("sqlx", &[1])).unwrap_err();
        assert_eq!(
            refused,
            AdoptionRefusal::HistoryNotEmpty {
                records: 2,
                newest: 2
            }
        );
    }
}

#[test]
fn a_non_empty_history_is_refused_before_a_foreign_failure() {
    let mut history = foreign("sqlx", &[1]);
    history.failed = Some(ForeignFailure {
        version: 1,
        state: "failed".into(),
        fix: "f".into(),
    });
    let refused =
        plan_adoption(&files(&[1]), &[record(1, RecordState::Applied)], &history).unwrap_err();
    assert!(matches!(refused, AdoptionRefusal::HistoryNotEmpty { .. }));
}

#[test]
fn refusals_are_config_errors_carrying_their_message() {
    let refusal = AdoptionRefusal::HistoryNotEmpty {
        records: 1,
        newest: 3,
    };
    let error = Error::from(refusal.clone());
    assert_eq!(error.code(), crate::Code::ConfigError);
    assert!(error.to_string().contains("already has 1 record(s)"));
}

proptest! {
    /// Whatever the histories, an accepted plan records exactly the files the tool applied
    /// (plus those covered by `through`), in order, each once; and everything the tool
    /// applied has a file. A refusal for missing files names exactly the missing versions.
    #[test]
    fn adoption_records_exactly_what_the_tool_applied(
        here in proptest::collection::btree_set(0i64..30, 0..12),
        applied in proptest::collection::btree_set(0i64..30, 0..8),
        through in proptest::option::of((0i64..30, any::<bool>())),
    ) {
        let available: Vec<Migration> = here.iter().copied().map(m).collect();
        let mut history = foreign("tool", &applied.iter().copied().collect::<Vec<_>>());
        history.through = through.map(|(version, needs_file)| Through { version, needs_file, reason: "r".into() });
        let mut required = applied.clone();
        if let Some((v, true)) = through {
            required.insert(v);
        }
        let missing: Vec<i64> = required.difference(&here).copied().collect();
        match plan_adoption(&available, &[], &history) {
            Ok(planned) => {
                prop_assert!(missing.is_empty());
                let got: Vec<i64> = versions(&planned);
                let expected: Vec<i64> = here
                    .iter()
                    .copied()
                    .filter(|v| applied.contains(v) || through.is_some_and(|(t, _)| *v <= t))
                    .collect();
                prop_assert_eq!(got.clone(), expected);
                let unique: BTreeSet<i64> = got.iter().copied().collect();
                prop_assert_eq!(unique.len(), got.len());
            }
            Err(AdoptionRefusal::NoFile { versions, .. }) => prop_assert_eq!(versions, missing),
            Err(other) => prop_assert!(false, "unexpected refusal {:?}", other),
        }
    }
}

#[test]
fn flyway_checksums_are_crc32_over_the_lines_without_their_endings() {
    use super::flyway_checksum;
    // The CRC-32 check value.
    assert_eq!(flyway_checksum("123456789"), 0xCBF4_3926_u32 as i32);
    let unix = "CREATE VIEW v AS\nSELECT 1;\n";
    assert_eq!(
        flyway_checksum(unix),
        flyway_checksum("CREATE VIEW v AS\r\nSELECT 1;")
    );
    assert_eq!(
        flyway_checksum(unix),
        flyway_checksum("\u{feff}CREATE VIEW v AS\rSELECT 1;")
    );
    assert_ne!(
        flyway_checksum(unix),
        flyway_checksum("CREATE VIEW v AS\nSELECT 2;\n")
    );
}

#[test]
fn only_repeatables_applied_with_their_present_text_are_adopted() {
    use super::{adoptable_repeatables, flyway_checksum};
    let mut same = Migration::new(0, "same", "SELECT 1;");
    same.repeatable = true;
    let mut changed = Migration::new(0, "changed", "SELECT 2;");
    changed.repeatable = true;
    let mut foreign = ForeignHistory::default();
    foreign
        .repeatables
        .insert("same".into(), flyway_checksum("SELECT 1;\n"));
    foreign
        .repeatables
        .insert("changed".into(), flyway_checksum("SELECT 1;"));
    let files = [changed, same];
    let texts = |m: &Migration| vec![m.step(crate::migration::Direction::Up).unwrap().to_string()];
    let adopted: Vec<&str> = adoptable_repeatables(&files, &foreign, texts)
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(adopted, ["same"]);
}
