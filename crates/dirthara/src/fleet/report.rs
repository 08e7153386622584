//! What a fleet run did: each target's outcome, the totals, and — for `status` — where the
//! fleet stands.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use crate::error::Error;
use crate::plan::{MigrationState, MigrationStatus};
use crate::report::{LockState, Preview, StatusReport, StepReport};
use crate::vocabulary::Outcome;

/// One target of a fleet run.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct TargetReport {
    /// The target's name.
    pub name: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Migrations applied there.
    pub applied: Vec<StepReport>,
    /// Migrations reverted there.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reverted: Vec<StepReport>,
    /// Records written without running a step (`baseline`, `resolve`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recorded: Vec<StepReport>,
    /// Why it failed; `None` unless `outcome` is `failed`.
    pub error: Option<Error>,
    /// How long the target took, in milliseconds (0 when skipped).
    pub duration_ms: u64,
    /// Its lock was held by another runner when this one came to it first: it was left for
    /// the end, and waited for then.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
    /// It failed only because a migration was already dirty when this run came to it (a run
    /// before this one died there): nothing was tried. Such a target does not count toward
    /// `max_failures`, so one crash does not stop the recovery of the rest of the fleet.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dirty_before_run: bool,
    /// What else to know of how it ended: `resolve` of a migration that is not dirty there
    /// says "nothing to resolve" (outcome `up_to_date`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `status`: where it stands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<TargetStatus>,
    /// `preview`: what the command would run there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preview: Option<Preview>,
    /// `drift`: what differs there from its snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<crate::engine::DriftReport>,
}

impl TargetReport {
    pub(crate) fn new(name: &str, outcome: Outcome) -> Self {
        TargetReport {
            name: name.to_string(),
            outcome,
            applied: Vec::new(),
            reverted: Vec::new(),
            recorded: Vec::new(),
            error: None,
            duration_ms: 0,
            deferred: false,
            dirty_before_run: false,
            note: None,
            status: None,
            preview: None,
            drift: None,
        }
    }

    /// Failed, when it has an error.
    pub(crate) fn failed_if_erred(mut self) -> Self {
        if self.error.is_some() {
            self.outcome = Outcome::Failed;
        }
        self
    }

    /// `drift` found its schema other than its snapshot (`SCHEMA_DRIFT`): a finding, not a
    /// failure of the run.
    pub fn found_drift(&self) -> bool {
        (self.error.as_ref()).is_some_and(|e| e.code() == crate::error::Code::SchemaDrift)
    }

    pub(crate) fn failed(name: &str, error: Error) -> Self {
        TargetReport {
            error: Some(error),
            ..TargetReport::new(name, Outcome::Failed)
        }
    }
}

/// Where one target stands (`status` over a fleet).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct TargetStatus {
    /// The newest applied version; `None` when nothing is applied.
    pub newest: Option<i64>,
    /// Migrations of the files not applied there.
    pub pending: usize,
    /// A migration is dirty (a run died inside it).
    pub dirty: bool,
    /// The dirty migration, and the error that left it so as the failing run recorded it:
    /// `migration 3 (add_index): <cause>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dirty_cause: Option<String>,
    /// Applied migrations whose file is missing or changed.
    pub drifted: usize,
    /// A runner holds its lock now.
    pub locked: bool,
}

impl TargetStatus {
    pub(crate) fn of(report: &StatusReport) -> Self {
        let count = |state: MigrationState| {
            (report.migrations.iter())
                .filter(|m: &&MigrationStatus| m.state == state)
                .count()
        };
        TargetStatus {
            newest: (report.migrations.iter())
                .filter(|m| m.state != MigrationState::Pending)
                .map(|m| m.version)
                .max(),
            pending: count(MigrationState::Pending),
            dirty: count(MigrationState::Dirty) > 0,
            dirty_cause: (report.migrations.iter())
                .find(|m| m.state == MigrationState::Dirty)
                .map(|m| {
                    let cause = (m.failure.as_ref())
                        .map_or_else(|| "no cause was recorded".to_string(), |f| f.to_string());
                    format!("migration {} ({}): {cause}", m.version, m.name)
                }),
            drifted: count(MigrationState::Missing) + count(MigrationState::Modified),
            locked: matches!(report.lock.state, LockState::Held { .. })
                || report
                    .lock
                    .others
                    .iter()
                    .any(|o| matches!(o.state, LockState::Held { .. })),
        }
    }
}

/// How many targets ended each way.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct FleetTotals {
    /// Every target of the run (this runner's shard).
    pub targets: usize,
    /// Targets the command changed.
    pub applied: usize,
    /// Targets with nothing to do.
    pub up_to_date: usize,
    /// Targets with something left to do (`status`, `preview`).
    pub pending: usize,
    /// Targets where the command failed.
    pub failed: usize,
    /// Targets never started.
    pub skipped: usize,
    /// Migrations applied over every target.
    pub migrations_applied: usize,
    /// Migrations reverted over every target.
    pub migrations_reverted: usize,
    /// `drift`: targets whose schema is not their snapshot's (counted among `failed`).
    #[serde(skip_serializing_if = "is_zero")]
    pub drifted: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl FleetTotals {
    pub(crate) fn of(targets: &[TargetReport]) -> Self {
        let count = |outcome: Outcome| targets.iter().filter(|t| t.outcome == outcome).count();
        FleetTotals {
            targets: targets.len(),
            applied: count(Outcome::Applied),
            up_to_date: count(Outcome::UpToDate),
            pending: count(Outcome::Pending),
            failed: count(Outcome::Failed),
            skipped: count(Outcome::Skipped),
            migrations_applied: targets.iter().map(|t| t.applied.len()).sum(),
            migrations_reverted: targets.iter().map(|t| t.reverted.len()).sum(),
            drifted: targets.iter().filter(|t| t.found_drift()).count(),
        }
    }
}

/// Where a fleet stands: `970 at 20240301120000, 28 one behind, 2 dirty, 0 locked`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct FleetStatus {
    /// The newest migration of the files.
    pub latest: Option<i64>,
    /// Targets with every migration applied (none dirty).
    pub at_latest: usize,
    /// Targets by how many migrations they lack: `{1: 28, 3: 2}`.
    pub behind: BTreeMap<usize, usize>,
    /// Targets with a dirty migration.
    pub dirty: usize,
    /// Targets whose lock a runner holds now.
    pub locked: usize,
    /// Targets that could not be read.
    pub unreachable: usize,
}

impl FleetStatus {
    pub(crate) fn of(targets: &[TargetReport], latest: Option<i64>) -> Self {
        let mut status = FleetStatus {
            latest,
            ..FleetStatus::default()
        };
        for target in targets {
            let Some(found) = &target.status else {
                if target.outcome == Outcome::Failed {
                    status.unreachable += 1;
                }
                continue;
            };
            if found.dirty {
                status.dirty += 1;
            } else if found.pending == 0 {
                status.at_latest += 1;
            } else {
                *status.behind.entry(found.pending).or_default() += 1;
            }
            status.locked += usize::from(found.locked);
        }
        status
    }
}

impl fmt::Display for FleetStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.latest {
            Some(latest) => write!(f, "{} at {latest}", self.at_latest)?,
            None => write!(f, "{} with nothing to apply", self.at_latest)?,
        }
        for (behind, targets) in &self.behind {
            match behind {
                1 => write!(f, ", {targets} one behind")?,
                n => write!(f, ", {targets} behind by {n}")?,
            }
        }
        write!(f, ", {} dirty, {} locked", self.dirty, self.locked)?;
        if self.unreachable > 0 {
            write!(f, ", {} unreadable", self.unreachable)?;
        }
        Ok(())
    }
}

/// A whole fleet run.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct FleetReport {
    /// The command (`operation` in JSON: `migrate`, `status`, ...).
    #[serde(serialize_with = "super::serialize_command")]
    pub operation: super::FleetCommand,
    /// Every target, in the order they were given.
    pub targets: Vec<TargetReport>,
    /// How many ended each way.
    pub totals: FleetTotals,
    /// `status`: where the fleet stands.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<FleetStatus>,
}

impl FleetReport {
    /// Every target succeeded: none failed, none was skipped.
    pub fn succeeded(&self) -> bool {
        self.totals.failed == 0 && self.totals.skipped == 0
    }

    /// The targets that were not simply fine: failed, skipped, deferred, or (for `status`)
    /// not at the latest migration.
    pub fn not_fine(&self) -> impl Iterator<Item = &TargetReport> {
        self.targets.iter().filter(|t| {
            matches!(
                t.outcome,
                Outcome::Failed | Outcome::Skipped | Outcome::Pending
            ) || t.deferred
                || t.status
                    .as_ref()
                    .is_some_and(|s| s.dirty || s.locked || s.drifted > 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_status(pending: usize, dirty: bool, locked: bool) -> TargetReport {
        TargetReport {
            status: Some(TargetStatus {
                newest: Some(1),
                pending,
                dirty,
                dirty_cause: None,
                drifted: 0,
                locked,
            }),
            ..TargetReport::new("t", Outcome::UpToDate)
        }
    }

    #[test]
    fn a_fleets_status_reads_as_people_say_it() {
        let mut targets = vec![];
        targets.extend((0..970).map(|_| with_status(0, false, false)));
        targets.extend((0..28).map(|_| with_status(1, false, false)));
        targets.extend((0..2).map(|_| with_status(0, true, false)));
        let status = FleetStatus::of(&targets, Some(20240301120000));
        assert_eq!(
            status.to_string(),
            "970 at 20240301120000, 28 one behind, 2 dirty, 0 locked"
        );
        targets.push(with_status(3, false, true));
        targets.push(TargetReport::failed("down", Error::config("unreachable")));
        assert_eq!(
            FleetStatus::of(&targets, Some(7)).to_string(),
            "970 at 7, 28 one behind, 1 behind by 3, 2 dirty, 1 locked, 1 unreadable"
        );
    }
}
