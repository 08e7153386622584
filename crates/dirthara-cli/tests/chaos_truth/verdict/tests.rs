//! The checker's rules on made-up rounds: each rule fires on the evidence it names, and
//! stays silent on a clean round.

use super::*;
use serde_json::json;

fn runner(id: usize, end: End, events: Vec<serde_json::Value>) -> RunnerRecord {
    RunnerRecord {
        id,
        pid: 0,
        end,
        events,
        stderr: String::new(),
        lease_without_wait: false,
        hit_by_restart: false,
    }
}

fn started(v: u64) -> serde_json::Value {
    json!({"event": "migration_started", "version": v})
}

fn finished(v: u64) -> serde_json::Value {
    json!({"event": "migration_finished", "version": v})
}

fn error(code: &str, message: &str) -> serde_json::Value {
    json!({"event": "error", "error": {"code": code, "message": message}})
}

fn result(applied: &[u64]) -> serde_json::Value {
    let steps: Vec<_> = applied.iter().map(|v| json!({"version": v})).collect();
    json!({"event": "result", "applied": steps})
}

/// Migrations 1..=n applied, each with its marker, row and one execution.
fn all_applied(n: u64) -> Snapshot {
    Snapshot {
        states: (1..=n).map(|v| (v, "applied".to_string())).collect(),
        markers: (1..=n).collect(),
        rows: (1..=n).map(|v| (v, 1)).collect(),
        executions: Some((1..=n).map(|v| (v, 1)).collect()),
    }
}

fn rules(found: &[Violation]) -> Vec<Rule> {
    found.iter().map(|v| v.rule).collect()
}

#[test]
fn a_clean_round_has_no_violations() {
    let s = all_applied(2);
    let records = vec![runner(
        0,
        End::Exited(0),
        vec![
            started(1),
            finished(1),
            started(2),
            finished(2),
            result(&[1, 2]),
        ],
    )];
    assert!(truth(&s, 2, Some(&BTreeSet::new())).is_empty());
    assert!(exits(&records, &s).is_empty());
    assert!(reports(&records, &s, false).is_empty());
    assert!(executions(&records, &s, 2).is_empty());
}

#[test]
fn an_effect_the_history_does_not_record_is_reported() {
    let mut s = all_applied(2);
    s.states.remove(&2);
    assert_eq!(rules(&truth(&s, 2, None)), vec![Rule::EffectWithoutRecord]);
}

#[test]
fn a_failed_migration_is_not_an_allowed_exit() {
    let s = all_applied(1);
    let records = vec![runner(
        1,
        End::Exited(1),
        vec![started(1), error("MIGRATION_FAILED", "duplicate key")],
    )];
    assert_eq!(rules(&exits(&records, &s)), vec![Rule::ExitNotAllowed]);
}

#[test]
fn dirty_naming_a_migration_that_was_finished_is_reported() {
    let s = all_applied(3);
    let message = "migration 3 (m3) was started by an earlier run that did not finish it";
    let records = vec![runner(
        1,
        End::Exited(1),
        vec![error("DIRTY_MIGRATION", message)],
    )];
    assert_eq!(rules(&exits(&records, &s)), vec![Rule::DirtyNotRunning]);
    let mut running = s.clone();
    running.states.insert(3, "running".into());
    assert!(exits(&records, &running).is_empty());
}

#[test]
fn lock_held_is_allowed_only_for_a_lease_without_wait() {
    let s = all_applied(1);
    let mut r = runner(
        1,
        End::Exited(1),
        vec![error("MIGRATION_LOCK_HELD", "held")],
    );
    assert_eq!(rules(&exits(&[r.clone()], &s)), vec![Rule::ExitNotAllowed]);
    r.lease_without_wait = true;
    assert!(exits(&[r], &s).is_empty());
}

#[test]
fn an_execution_beyond_the_cut_off_attempts_is_reported() {
    let mut s = all_applied(1);
    s.executions = Some(BTreeMap::from([(1, 2)]));
    // One runner killed inside migration 1, another finished it: two executions, fine.
    let killed = runner(0, End::Killed, vec![started(1)]);
    let winner = runner(
        1,
        End::Exited(0),
        vec![started(1), finished(1), result(&[1])],
    );
    assert!(executions(&[killed.clone(), winner.clone()], &s, 1).is_empty());
    // Without the kill, the second execution is one too many, and unannounced.
    assert_eq!(
        rules(&executions(std::slice::from_ref(&winner), &s, 1)),
        vec![Rule::ExecutedTooOften, Rule::UnannouncedExecution]
    );
    // A runner that began it and exited by itself without finishing was not cut off.
    let quitter = runner(
        2,
        End::Exited(1),
        vec![started(1), error("MIGRATION_FAILED", "x")],
    );
    assert_eq!(
        rules(&executions(&[quitter, winner], &s, 1)),
        vec![Rule::StartedTooOften, Rule::ExecutedTooOften]
    );
}

#[test]
fn a_migration_finished_by_two_runners_is_reported() {
    let s = all_applied(1);
    let a = runner(
        0,
        End::Exited(0),
        vec![started(1), finished(1), result(&[1])],
    );
    let b = runner(
        1,
        End::Exited(0),
        vec![started(1), finished(1), result(&[1])],
    );
    assert!(rules(&executions(&[a, b], &s, 1)).contains(&Rule::FinishedTwice));
}

#[test]
fn a_finish_the_history_does_not_have_is_reported() {
    let mut s = all_applied(1);
    s.states.clear();
    let a = runner(0, End::Killed, vec![started(1), finished(1)]);
    assert_eq!(
        rules(&reports(&[a], &s, false)),
        vec![Rule::FinishedButNotRecorded]
    );
}

#[test]
fn on_mysql_only_the_last_finish_of_a_cut_off_runner_may_still_be_running() {
    let mut s = all_applied(2);
    s.states.insert(2, "running".into());
    let killed = runner(
        0,
        End::Killed,
        vec![started(1), finished(1), started(2), finished(2)],
    );
    assert!(reports(std::slice::from_ref(&killed), &s, true).is_empty());
    assert_eq!(
        rules(&reports(std::slice::from_ref(&killed), &s, false)),
        vec![Rule::FinishedButNotRecorded]
    );
    // Not an earlier one, and not for a runner that ended by itself.
    s.states.insert(1, "running".into());
    assert_eq!(
        rules(&reports(&[killed], &s, true)),
        vec![Rule::FinishedButNotRecorded]
    );
    let mut s = all_applied(1);
    s.states.insert(1, "running".into());
    let quit = runner(
        1,
        End::Exited(0),
        vec![started(1), finished(1), result(&[1])],
    );
    assert_eq!(
        rules(&reports(&[quit], &s, true)),
        vec![Rule::FinishedButNotRecorded]
    );
}
