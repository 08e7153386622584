//! The chaos checker's rules: pure functions from what the runners printed and what the
//! database held to the list of violations. A round's result is that list; a test of the
//! product asserts it is empty, a test of the checker (a fault planted) that it is not.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::runners::{End, RunnerRecord};
use super::snapshot::Snapshot;

/// Which guarantee a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Rule {
    /// A migration's effect is in the database while its history says pending.
    EffectWithoutRecord,
    /// The history says applied, the marker is missing.
    RecordWithoutEffect,
    /// The history says applied, the `chaos_effects` row is missing.
    EffectIncomplete,
    /// A migration's effect is there twice.
    EffectTwice,
    /// More than one `running` record: two runners were inside migrations, or one left a
    /// record behind and another went on.
    SeveralRunning,
    /// A history state other than applied/running.
    UnknownState,
    /// After the clean run, a migration is not applied.
    NotAllApplied,
    /// A migration executed more often than once plus the attempts that were cut off.
    ExecutedTooOften,
    /// A migration executed more often than runners announced it.
    UnannouncedExecution,
    /// A migration is applied, but its DDL never ran.
    NeverExecuted,
    /// Runners began a migration more often than once plus the attempts that were cut off.
    StartedTooOften,
    /// Two runners (or one, twice) finished the same migration.
    FinishedTwice,
    /// A runner said it finished a migration that the history does not have as applied.
    FinishedButNotRecorded,
    /// A runner's result (or error's `completed` list) disagrees with its own events.
    ReportDisagrees,
    /// A runner ended in a way the design does not allow.
    ExitNotAllowed,
    /// `DIRTY_MIGRATION` named a migration that was not left `running`.
    DirtyNotRunning,
    /// A runner that was refused (lock held, dirty) began a migration anyway.
    WorkAfterRefusal,
    /// Killed runners' server sessions did not end.
    SessionsLingering,
    /// Resolving the dirty records or the clean run afterwards failed.
    CleanUpFailed,
}

/// One broken guarantee, with the evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    pub rule: Rule,
    pub detail: String,
}

impl Violation {
    pub(crate) fn new(rule: Rule, detail: impl Into<String>) -> Violation {
        Violation {
            rule,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.rule, self.detail)
    }
}

fn context(s: &Snapshot) -> String {
    format!(
        "history {:?}, markers {:?}, rows {:?}, executions {:?}",
        s.states, s.markers, s.rows, s.executions
    )
}

/// History against effects. `resolved_applied`: `None` at the first checkpoint (right after
/// the runners); after the clean run, the versions that were resolved `--applied` (their
/// step was cut off after its marker, so their row may be missing), and everything must be
/// applied.
pub(crate) fn truth(
    s: &Snapshot,
    n: u64,
    resolved_applied: Option<&BTreeSet<u64>>,
) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut running = Vec::new();
    for v in 1..=n {
        let marker = s.markers.contains(&v);
        let rows = s.rows(v);
        if rows > 1 {
            found.push(Violation::new(
                Rule::EffectTwice,
                format!("migration {v} took effect {rows} times; {}", context(s)),
            ));
        }
        match s.state(v) {
            "applied" => {
                if !marker {
                    found.push(Violation::new(
                        Rule::RecordWithoutEffect,
                        format!("migration {v} recorded without its marker; {}", context(s)),
                    ));
                }
                let may_lack_row = resolved_applied.is_some_and(|r| r.contains(&v));
                if rows == 0 && !may_lack_row {
                    found.push(Violation::new(
                        Rule::EffectIncomplete,
                        format!("migration {v} recorded, effect incomplete; {}", context(s)),
                    ));
                }
            }
            "pending" => {
                if marker || rows > 0 {
                    found.push(Violation::new(
                        Rule::EffectWithoutRecord,
                        format!("migration {v} took effect unrecorded; {}", context(s)),
                    ));
                }
            }
            "running" => running.push(v),
            other => found.push(Violation::new(
                Rule::UnknownState,
                format!("migration {v} in state {other:?}; {}", context(s)),
            )),
        }
        if resolved_applied.is_some() && s.state(v) != "applied" {
            found.push(Violation::new(
                Rule::NotAllApplied,
                format!(
                    "migration {v} is {} after the clean run; {}",
                    s.state(v),
                    context(s)
                ),
            ));
        }
    }
    if running.len() > 1 {
        found.push(Violation::new(
            Rule::SeveralRunning,
            format!("running records {running:?}; {}", context(s)),
        ));
    }
    found
}

/// The codes a runner may fail with when the server restarted under it: its session (and
/// with it a session lock, or the statement it was running) is gone.
const RESTART_CODES: [&str; 5] = [
    "CONNECTION_ERROR",
    "MIGRATION_FAILED",
    "LOCK_LEASE_LOST",
    "MIGRATION_LOCK_FAILED",
    "HISTORY_ERROR",
];

/// Whether a runner's end cut off an attempt at a migration through no fault of the
/// product: it was killed, or the server restarted under it.
fn cut_off(r: &RunnerRecord) -> bool {
    r.end == End::Killed || (r.hit_by_restart && r.end != End::Exited(0))
}

/// How each runner ended, against what the design allows, given the first checkpoint:
/// - 0;
/// - `DIRTY_MIGRATION` naming a migration still `running` at the end of the round (never one
///   another runner finished), having begun nothing;
/// - `MIGRATION_LOCK_HELD` for a lease taken without waiting, having begun nothing;
/// - under a server restart, the errors of a lost session ([`RESTART_CODES`]; a failed
///   migration only with `connection_lost`);
/// - killed by the round.
pub(crate) fn exits(records: &[RunnerRecord], first: &Snapshot) -> Vec<Violation> {
    let mut found = Vec::new();
    for r in records {
        let code = r.error_code();
        let refused = |why: &str| {
            (!r.started().is_empty()).then(|| {
                Violation::new(
                    Rule::WorkAfterRefusal,
                    format!("{why}, yet it began migrations: {}", r.describe()),
                )
            })
        };
        let verdict: Result<(), String> = match (r.end, code.as_deref()) {
            (End::Killed, _) | (End::Exited(0), _) => Ok(()),
            (End::Exited(1), Some("DIRTY_MIGRATION")) => match r.dirty_version() {
                Some(v) if first.state(v) == "running" => {
                    found.extend(refused("it stopped at a dirty migration"));
                    Ok(())
                }
                Some(v) => {
                    found.push(Violation::new(
                        Rule::DirtyNotRunning,
                        format!(
                            "DIRTY_MIGRATION named migration {v}, which is {} at the end of the round: {}",
                            first.state(v),
                            r.describe()
                        ),
                    ));
                    Ok(())
                }
                None => Err("DIRTY_MIGRATION without a version".into()),
            },
            (End::Exited(1), Some("MIGRATION_LOCK_HELD")) if r.lease_without_wait => {
                found.extend(refused("the lease was held"));
                Ok(())
            }
            (End::Exited(1), Some(code)) if r.hit_by_restart && RESTART_CODES.contains(&code) => {
                if code == "MIGRATION_FAILED" && r.error()["database"]["connection_lost"] != true {
                    Err("a migration failed, though not by losing its connection".into())
                } else {
                    Ok(())
                }
            }
            (End::Exited(1), Some(_)) => Err("an error the design does not allow here".into()),
            (End::Exited(1), None) => Err("exit 1 without an error code".into()),
            (End::Exited(_), _) => Err("an exit code the design does not allow".into()),
            (End::Abnormal, _) => Err("ended by a signal it was not sent, or hung".into()),
        };
        if let Err(why) = verdict {
            found.push(Violation::new(
                Rule::ExitNotAllowed,
                format!("{why}: {}\n{}", r.describe(), r.stderr.trim_end()),
            ));
        }
    }
    found
}

/// What each runner said it did, against its own events and the history in `s` (for the
/// round's runners the first checkpoint, for the clean run the last): every migration it
/// finished is applied, and its result (or its error's `completed`) lists exactly those.
///
/// `folds`: the backend writes a bracketed step's `applied` record together with the next
/// step's `running` marker (MySQL, `engine/session.rs` `folds_records`), so a runner cut off
/// between the two has finished its last migration while the history still says `running`
/// — by design a DIRTY record, resolved like any interrupted step. (That runner's events and
/// error say the migration was recorded; they are wrong, the history is not.)
pub(crate) fn reports(records: &[RunnerRecord], s: &Snapshot, folds: bool) -> Vec<Violation> {
    let mut found = Vec::new();
    for r in records {
        let finished = r.finished();
        for &v in &finished {
            let folded =
                folds && cut_off(r) && finished.last() == Some(&v) && s.state(v) == "running";
            if s.state(v) != "applied" && !folded {
                found.push(Violation::new(
                    Rule::FinishedButNotRecorded,
                    format!(
                        "migration {v} finished, history says {}: {}",
                        s.state(v),
                        r.describe()
                    ),
                ));
            }
        }
        let said = match r.end {
            End::Exited(0) => r.reported_applied(),
            End::Exited(_) if !r.error().is_null() => Some(r.reported_completed()),
            _ => None,
        };
        if let Some(said) = said {
            if said != r.finished() {
                found.push(Violation::new(
                    Rule::ReportDisagrees,
                    format!("it reported {said:?}: {}", r.describe()),
                ));
            }
        } else if r.end == End::Exited(0) {
            found.push(Violation::new(
                Rule::ReportDisagrees,
                format!("exit 0 without a result line: {}", r.describe()),
            ));
        }
    }
    found
}

/// Every migration's step ran exactly once, give or take the attempts that were cut off
/// (the runner killed, or its server restarted, inside it), by the migrations' own counts
/// (`s.executions`) and by the runners' announcements; and no migration was finished twice.
/// `records`: every runner of the round and the clean run after it; `s`: the last checkpoint.
pub(crate) fn executions(records: &[RunnerRecord], s: &Snapshot, n: u64) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut started: BTreeMap<u64, u64> = BTreeMap::new();
    let mut finished: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    let mut cut: BTreeMap<u64, u64> = BTreeMap::new();
    for r in records {
        for v in r.started() {
            *started.entry(v).or_default() += 1;
        }
        for v in r.finished() {
            finished.entry(v).or_default().push(r.id);
        }
        if let Some(v) = r.unfinished().filter(|_| cut_off(r)) {
            *cut.entry(v).or_default() += 1;
        }
    }
    let runners_of = |v: u64| -> String {
        records
            .iter()
            .filter(|r| r.started().contains(&v))
            .map(RunnerRecord::describe)
            .collect::<Vec<_>>()
            .join("\n  ")
    };
    for v in 1..=n {
        let announced = started.get(&v).copied().unwrap_or(0);
        let allowed = 1 + cut.get(&v).copied().unwrap_or(0);
        if let Some(ids) = finished.get(&v).filter(|ids| ids.len() > 1) {
            found.push(Violation::new(
                Rule::FinishedTwice,
                format!(
                    "migration {v} finished by runners {ids:?}:\n  {}",
                    runners_of(v)
                ),
            ));
        }
        if announced > allowed {
            found.push(Violation::new(
                Rule::StartedTooOften,
                format!(
                    "migration {v} begun {announced} times, {} of them cut off:\n  {}",
                    allowed - 1,
                    runners_of(v)
                ),
            ));
        }
        let Some(executions) = &s.executions else {
            continue;
        };
        let ran = executions.get(&v).copied().unwrap_or(0);
        if ran > allowed {
            found.push(Violation::new(
                Rule::ExecutedTooOften,
                format!(
                    "migration {v} executed {ran} times, {} attempt(s) cut off:\n  {}",
                    allowed - 1,
                    runners_of(v)
                ),
            ));
        }
        if ran > announced {
            found.push(Violation::new(
                Rule::UnannouncedExecution,
                format!(
                    "migration {v} executed {ran} times, announced {announced}:\n  {}",
                    runners_of(v)
                ),
            ));
        }
        if ran == 0 && s.state(v) == "applied" {
            found.push(Violation::new(
                Rule::NeverExecuted,
                format!("migration {v} applied, never executed; {}", context(s)),
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests;
