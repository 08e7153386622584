//! The planner: a pure function from (available migrations, history, command) to a plan.
//!
//! No I/O happens here, so every rule — what is pending, what a rollback reverses, which
//! batch comes next, what is refused — is tested exhaustively without a database.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::error::{Error, ErrorKind, Result};
use crate::events::Warning;
use crate::history::{AppliedMigration, RecordState};
use crate::migration::{Direction, DownSteps, Migration};
use crate::vocabulary::Operation;

mod adoption;
mod baselines;
mod records;
mod repeatables;
pub mod retry;
pub use adoption::{
    adoptable_repeatables, flyway_checksum, plan_adoption, AdoptionPlan, ForeignFailure,
    ForeignHistory, Through,
};
pub use baselines::{followed, squashed_versions, Followed};
pub use records::Resolution;
pub use records::{plan_baseline, plan_resolution, recorded_without_running, Recording};
pub use repeatables::{
    repeatable_checksum, repeatable_status, repeatables_to_apply, RepeatableState, RepeatableStatus,
};

/// What a rollback reverses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RollbackScope {
    /// Every migration of the most recent batch (the default).
    LastBatch,
    /// The N most recently applied migrations.
    Steps(usize),
    /// Every migration applied after version V (V stays applied; 0 reverses everything
    /// unless a migration 0 exists, which then stays applied).
    To(i64),
    /// Every applied migration.
    All,
}

/// A command the planner turns into steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Command {
    /// Apply every pending migration, in version order, as one new batch.
    Migrate,
    /// Reverse applied migrations, newest first, as far as the scope says.
    Rollback(RollbackScope),
    /// Move to version V: up through V, or down until V is the newest applied (0 = empty,
    /// unless a migration 0 exists: then it is the target like any other version).
    MigrateTo(i64),
    /// Reverse every applied migration, then apply all, under one lock.
    Refresh,
    /// Drop every table or collection of the history connection's database (the history
    /// included, the lease lock's excluded), then apply all. Destroys data.
    Fresh,
}

impl Command {
    /// The down steps a run of this command reads: none when it never reverses anything.
    pub fn down_steps(&self) -> DownSteps {
        match self {
            Command::Migrate | Command::Fresh => DownSteps::Skip,
            Command::Rollback(_) | Command::MigrateTo(_) | Command::Refresh => DownSteps::Read,
        }
    }

    /// The operation's name, as it appears in lock diagnostics and output.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Migrate => "migrate",
            Command::Rollback(_) => "rollback",
            Command::MigrateTo(_) => "to",
            Command::Refresh => "refresh",
            Command::Fresh => "fresh",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlanOptions {
    /// Refuse pending migrations older than the newest applied one instead of warning.
    pub strict: bool,
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedStep<'a> {
    pub direction: Direction,
    pub migration: &'a Migration,
    /// An up step for a migration older than the newest one applied (merged from a branch).
    pub out_of_order: bool,
}

impl PlannedStep<'_> {
    /// A down step that is empty or only comments: recorded without sending anything.
    pub fn reverses_nothing(&self) -> bool {
        self.direction == Direction::Down
            && (self.migration.down.as_ref()).is_some_and(|down| down.is_blank)
    }

    /// Whether the step may share one transaction with its history record.
    pub fn transactional(&self) -> bool {
        self.migration.transactional_in(self.direction)
    }

    /// The SQL (or commands) this step runs.
    pub fn text(&self) -> &str {
        self.migration
            .step(self.direction)
            .expect("the planner only plans down steps that exist")
    }
}

/// What a command will do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan<'a> {
    /// `fresh`: drop every table of the history connection's database first.
    pub drop_all: bool,
    pub steps: Vec<PlannedStep<'a>>,
    /// The batch number every up step is recorded under.
    pub batch: i64,
    pub warnings: Vec<Warning>,
}

#[cfg(test)]
impl Plan<'_> {
    /// Does nothing at all (the tests' way to say "nothing to do").
    fn is_empty(&self) -> bool {
        !self.drop_all && self.steps.is_empty()
    }
}

/// Plans `command` against the history.
///
/// `available` holds the versioned migrations and the baselines after them (see
/// [`followed`]: a new database is built from the highest baseline, and a database built
/// from one follows it).
///
/// Refuses, before anything is changed: a dirty history (`DIRTY_MIGRATION`), an applied
/// migration whose file is missing or changed (unless a baseline stands for it), versions
/// a baseline stands for that are neither applied nor on disk, a target version nobody
/// knows, a reversal of a migration without a down step, and (with `strict`) out-of-order
/// pending migrations. `fresh` ignores the history, which it is about to drop.
pub fn plan<'a>(
    available: &'a [Migration],
    applied: &[AppliedMigration],
    command: Command,
    options: PlanOptions,
) -> Result<Plan<'a>> {
    let through = match command {
        Command::MigrateTo(target) => Some(target),
        _ => None,
    };
    let followed = match command {
        Command::Fresh => baselines::followed(available, &[], None),
        _ => baselines::followed(available, applied, through),
    };
    let by_version: BTreeMap<i64, &'a Migration> = (followed.migrations.iter())
        .map(|m| (m.version, *m))
        .collect();
    let squashed = baselines::squashed_versions(available);
    if command != Command::Fresh {
        verify_history(&by_version, &squashed, applied)?;
        baselines::check_nothing_squashed_away(available, applied, &followed)?;
    }
    let applied_versions: BTreeSet<i64> = applied.iter().map(|a| a.version).collect();
    // A version is known when a file, a baseline or a baseline's list has it.
    let known_versions: BTreeSet<i64> = (available.iter().map(|m| m.version))
        .chain(squashed.iter().copied())
        .collect();

    let (drop_all, to_reverse, to_apply): (bool, Vec<&AppliedMigration>, Vec<&'a Migration>) =
        match command {
            Command::Migrate => (
                false,
                Vec::new(),
                pending(&followed.migrations, &applied_versions, None),
            ),
            Command::Rollback(scope) => (
                false,
                rollback_set(&known_versions, applied, scope)?,
                Vec::new(),
            ),
            // `to 0` means "before the first migration", unless a migration 0 exists (sqlx,
            // golang-migrate and Diesel allow one): then it is a target like any other, and
            // `rollback --all` is how to reverse everything.
            Command::MigrateTo(0) if !known_versions.contains(&0) => (
                false,
                rollback_set(&known_versions, applied, RollbackScope::All)?,
                Vec::new(),
            ),
            Command::MigrateTo(target) => {
                if !known_versions.contains(&target) {
                    return Err(Error::new(ErrorKind::UnknownVersion { version: target }));
                }
                let reachable = by_version.contains_key(&target)
                    || applied_versions.contains(&target)
                    || followed.baseline.is_some_and(|b| target <= b.version);
                if !reachable {
                    // A version only a baseline knows, on a database not built from it.
                    let baseline = (available.iter().rev()).find(|m| m.stands_for(target));
                    return Err(Error::new(ErrorKind::SquashedAway {
                        versions: vec![target],
                        baseline: baseline.map(|b| b.origin.clone()).unwrap_or_default(),
                    }));
                }
                (
                    false,
                    rollback_set(&known_versions, applied, RollbackScope::To(target))?,
                    pending(&followed.migrations, &applied_versions, Some(target)),
                )
            }
            // Once everything is reversed the database is new: it is built as a new one is.
            Command::Refresh => (
                false,
                rollback_set(&known_versions, applied, RollbackScope::All)?,
                baselines::followed(available, &[], None).migrations,
            ),
            Command::Fresh => (true, Vec::new(), followed.migrations.clone()),
        };

    let mut steps = Vec::with_capacity(to_reverse.len() + to_apply.len());
    for record in &to_reverse {
        // Only an applied migration a baseline stands for may have no file (archived).
        let Some(migration) = by_version.get(&record.version).copied() else {
            return Err(Error::new(ErrorKind::MissingMigration {
                version: record.version,
                name: record.name.clone(),
            }));
        };
        if migration.down.is_none() {
            debug_assert!(
                !migration.down_unread,
                "{command:?} planned a down step on migrations loaded without their down steps"
            );
            return Err(Error::irreversible(migration));
        }
        steps.push(PlannedStep {
            direction: Direction::Down,
            migration,
            out_of_order: false,
        });
    }

    // What stays applied once the down steps ran decides the batch and what is out of order.
    let reversed: BTreeSet<i64> = to_reverse.iter().map(|r| r.version).collect();
    let remaining = || {
        applied
            .iter()
            .filter(|a| !drop_all && !reversed.contains(&a.version))
    };
    let batch = remaining().map(|a| a.batch).max().unwrap_or(0) + 1;
    let newest_remaining = remaining().map(|a| a.version).max();

    let mut warnings = Vec::new();
    let out_of_order: Vec<i64> = match newest_remaining {
        Some(newest) => to_apply
            .iter()
            .map(|m| m.version)
            .filter(|v| *v < newest)
            .collect(),
        None => Vec::new(),
    };
    if let (false, Some(newest)) = (out_of_order.is_empty(), newest_remaining) {
        if options.strict {
            return Err(Error::new(ErrorKind::OutOfOrder {
                versions: out_of_order,
                newest_applied: newest,
            }));
        }
        warnings.push(Warning::out_of_order(&out_of_order, newest));
    }
    for migration in to_apply {
        steps.push(PlannedStep {
            direction: Direction::Up,
            migration,
            out_of_order: out_of_order.contains(&migration.version),
        });
    }
    Ok(Plan {
        drop_all,
        steps,
        batch,
        warnings,
    })
}

/// Every applied record must be complete, still have its file (or be one a baseline stands
/// for), and match its checksum.
fn verify_history(
    by_version: &BTreeMap<i64, &Migration>,
    squashed: &BTreeSet<i64>,
    applied: &[AppliedMigration],
) -> Result<()> {
    if let Some(dirty) = applied.iter().find(|a| a.state == RecordState::Running) {
        return Err(Error::dirty(dirty));
    }
    for record in applied {
        match by_version.get(&record.version) {
            None if squashed.contains(&record.version) => {}
            None => {
                return Err(Error::new(ErrorKind::MissingMigration {
                    version: record.version,
                    name: record.name.clone(),
                }))
            }
            Some(migration) if migration.checksum() != record.checksum => {
                return Err(Error::new(ErrorKind::ChecksumMismatch {
                    version: record.version,
                    name: record.name.clone(),
                    file: migration.origin.clone(),
                    recorded: record.checksum.clone(),
                    actual: migration.checksum().to_string(),
                }))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Pending migrations in version order, optionally only those up to `through`.
fn pending<'a>(
    followed: &[&'a Migration],
    applied: &BTreeSet<i64>,
    through: Option<i64>,
) -> Vec<&'a Migration> {
    let mut pending: Vec<&Migration> = (followed.iter().copied())
        .filter(|m| !applied.contains(&m.version))
        .filter(|m| through.is_none_or(|t| m.version <= t))
        .collect();
    // A baseline first: a file it does not stand for may be older, and runs after it.
    pending.sort_by_key(|m| (!m.is_baseline(), m.version));
    pending
}

/// Applied records in the reverse of the order they were applied: newest batch first, and
/// within a batch (applied in version order) the highest version first.
pub fn newest_first(applied: &[AppliedMigration]) -> Vec<&AppliedMigration> {
    let mut records: Vec<&AppliedMigration> = applied.iter().collect();
    records.sort_by_key(|r| std::cmp::Reverse((r.batch, r.version)));
    records
}

fn rollback_set<'h>(
    known_versions: &BTreeSet<i64>,
    applied: &'h [AppliedMigration],
    scope: RollbackScope,
) -> Result<Vec<&'h AppliedMigration>> {
    let records = newest_first(applied);
    Ok(match scope {
        RollbackScope::All => records,
        RollbackScope::LastBatch => {
            let last = records.first().map(|r| r.batch);
            records
                .into_iter()
                .filter(|r| Some(r.batch) == last)
                .collect()
        }
        RollbackScope::Steps(n) => records.into_iter().take(n).collect(),
        RollbackScope::To(target) => {
            let known = target == 0
                || known_versions.contains(&target)
                || applied.iter().any(|a| a.version == target);
            if !known {
                return Err(Error::new(ErrorKind::UnknownVersion { version: target }));
            }
            records.into_iter().filter(|r| r.version > target).collect()
        }
    })
}

/// The state of one migration, as `status` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum MigrationState {
    /// Recorded as applied, and its file is unchanged.
    Applied,
    /// Not recorded: the next `migrate` applies it.
    Pending,
    /// Recorded as applied, but its file is gone.
    Missing,
    /// Applied, but its file changed since.
    Modified,
    /// Recorded as `running`: a run died inside it.
    Dirty,
    /// Recorded as applied; its file is gone, and a baseline stands for it (archived after
    /// `squash`).
    Squashed,
}

/// One line of `status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct MigrationStatus {
    /// The migration's version.
    pub version: i64,
    /// Its name: the file's, or the recorded one when the file is missing.
    pub name: String,
    /// Where it stands between its file and the history.
    pub state: MigrationState,
    /// The batch it was recorded under; `None` while pending.
    pub batch: Option<i64>,
    /// When it was recorded (UTC, RFC 3339, by the database's clock); `None` while pending.
    pub applied_at: Option<String>,
    /// Pending, yet older than the newest applied migration (merged from a branch):
    /// `migrate` applies it with an `OUT_OF_ORDER` warning, or refuses it with `strict`.
    pub out_of_order: bool,
    /// The up step controls its own transaction (see [`Migration::own_transaction`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_transaction: Option<String>,
    /// For a dirty migration: the error that left it so, as the failing run recorded it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<crate::history::RecordedFailure>,
    /// For a baseline: the versions it stands for (`1–5, 5 migrations`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub squashes: Option<String>,
}

/// Every migration the database follows (its files, or the baseline it was or will be built
/// from and the files after it) or its history knows, in version order, with its state.
pub fn status(available: &[Migration], applied: &[AppliedMigration]) -> Vec<MigrationStatus> {
    let records: BTreeMap<i64, &AppliedMigration> =
        applied.iter().map(|a| (a.version, a)).collect();
    let newest_applied = applied.iter().map(|a| a.version).max();
    let squashed = baselines::squashed_versions(available);
    let mut lines: BTreeMap<i64, MigrationStatus> = BTreeMap::new();
    for migration in baselines::followed(available, applied, None).migrations {
        let record = records.get(&migration.version);
        let state = match record {
            None => MigrationState::Pending,
            Some(r) if r.state == RecordState::Running => MigrationState::Dirty,
            Some(r) if r.checksum != migration.checksum() => MigrationState::Modified,
            Some(_) => MigrationState::Applied,
        };
        lines.insert(
            migration.version,
            MigrationStatus {
                version: migration.version,
                name: migration.name.clone(),
                state,
                batch: record.map(|r| r.batch),
                applied_at: record.map(|r| r.applied_at.clone()),
                out_of_order: state == MigrationState::Pending
                    && newest_applied.is_some_and(|n| migration.version < n),
                own_transaction: migration.own_transaction.clone(),
                failure: record.and_then(|r| r.failure.clone()),
                squashes: (migration.squashes.as_deref()).map(crate::format::squashed_range),
            },
        );
    }
    for record in applied {
        lines
            .entry(record.version)
            .or_insert_with(|| MigrationStatus {
                version: record.version,
                name: record.name.clone(),
                state: if record.state == RecordState::Running {
                    MigrationState::Dirty
                } else if squashed.contains(&record.version) {
                    MigrationState::Squashed
                } else {
                    MigrationState::Missing
                },
                batch: Some(record.batch),
                applied_at: Some(record.applied_at.clone()),
                out_of_order: false,
                own_transaction: None,
                failure: record.failure.clone(),
                squashes: None,
            });
    }
    lines.into_values().collect()
}

impl From<Command> for Operation {
    fn from(command: Command) -> Self {
        match command {
            Command::Migrate => Operation::Migrate,
            Command::Rollback(_) => Operation::Rollback,
            Command::MigrateTo(_) => Operation::To,
            Command::Refresh => Operation::Refresh,
            Command::Fresh => Operation::Fresh,
        }
    }
}

#[cfg(test)]
mod tests;
