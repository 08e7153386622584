//! The schedule of a fleet run: files loaded once, then `jobs` targets at a time — the
//! canary first — each an ordinary command of its own migrator, under its own lock.
//!
//! A locked command first tries each target's lock without waiting: a target another runner
//! is migrating is left for the end, when everything else is done, and is then run waiting as
//! `lock_wait` says — so several runners on one fleet each take what is free, and none
//! migrates a target twice (the lock sees to that; the waiting one finds nothing to do).
//! Failures are counted as targets end: once `max_failures` have failed, no target is
//! started any more; those never started are reported `skipped`. A target that was already
//! dirty when the run came to it fails without counting, so a re-run after a crash goes on to
//! the rest of the fleet. A shutdown signal stops the
//! starting too, and each running target finishes its running migration and stops.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::report::{FleetReport, FleetStatus, FleetTotals, TargetReport, TargetStatus};
use super::{Fleet, FleetCommand, Target};
use crate::backend::{BackendKind, Connector, ReusingConnector};
use crate::config::{Config, LockWait};
use crate::engine::Connections;
use crate::engine::Migrator;
use crate::error::{Code, Error, ErrorKind, Result};
use crate::events::EventKind;
use crate::migration::{DownSteps, Migration};
use crate::plan::Command;
use crate::vocabulary::Outcome;

/// Which pass a target is run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// A locked command tries the lock without waiting: a held lock defers the target.
    First,
    /// The deferred targets, at the end, waiting for their lock as configured.
    Deferred,
}

/// What one target's run came to.
enum Ended {
    Done(Box<TargetReport>),
    /// Its lock was held: come back to it at the end.
    Deferred(Option<String>),
}

pub(super) async fn run(
    fleet: &Fleet,
    targets: Vec<Target>,
    command: FleetCommand,
) -> Result<FleetReport> {
    if let FleetCommand::Run(Command::Refresh | Command::Fresh) = command {
        return Err(Error::config(format!(
            "`{}` is not run over a fleet: it would reverse or drop every target's data. Run \
             it on one database at a time, without --targets, --schemas, --databases or \
             --targets-sql (with `--no-fleet -d URL` when dirthara.toml has a [fleet])",
            command.name()
        )));
    }
    let base = &fleet.migrator;
    let options = &fleet.options;
    // Each target's URL is read once, here: its migrator is given what was read.
    let history = base.config().history_connection.as_str();
    let shared = base.connections();
    let parsed: Vec<Connections> = (targets.iter())
        .map(|t| {
            shared
                .clone()
                .with(history, crate::backend::kind_of(&t.url))
        })
        .collect();
    let loaded = preload(base, &targets, &parsed, command)?;
    base.events().emit(EventKind::FleetPlanned {
        operation: command.name().to_string(),
        targets: targets.len(),
        jobs: options.jobs.max(1),
    });
    let deadline = match command {
        FleetCommand::Wait(_, Some(timeout)) => Instant::now().checked_add(timeout),
        _ => None,
    };
    // Targets on one server and database (the schemas of a database) take turns with the
    // connections the finished ones leave clean, `jobs` of them at most.
    let reuse = Arc::new(ReusingConnector::new(base.connector(), options.jobs.max(1)));
    let mut schedule = Schedule {
        base,
        reuse: Arc::clone(&reuse) as Arc<dyn Connector>,
        targets: &targets,
        parsed: &parsed,
        command,
        loaded: &loaded,
        search_path: &options.search_path,
        jobs: options.jobs.max(1),
        max_failures: options.max_failures,
        strict: base.config().strict,
        deadline,
        results: vec![None; targets.len()],
        deferred: Vec::new(),
        failures: 0,
        stopped: false,
    };
    let (canary, rest) = canary(options, &targets);
    schedule.pass(canary.clone(), Pass::First).await;
    schedule.pass_deferred().await;
    let canary_failed = (canary.iter().map(|&i| &schedule.results[i])).any(|r| {
        !matches!(r, Some(t) if t.found_drift()
            || matches!(t.outcome, Outcome::Applied | Outcome::UpToDate | Outcome::Pending))
    });
    if !canary_failed {
        schedule.pass(rest, Pass::First).await;
        schedule.pass_deferred().await;
    }
    reuse.close_all().await;
    let reports: Vec<TargetReport> = (schedule.results.into_iter().zip(&targets))
        .map(|(result, target)| {
            result.unwrap_or_else(|| TargetReport::new(&target.name, Outcome::Skipped))
        })
        .collect();
    let status = matches!(command, FleetCommand::Status).then(|| {
        let latest = (loaded.values())
            .flat_map(|(_, m)| m.iter())
            .map(|m| m.version)
            .max();
        FleetStatus::of(&reports, latest)
    });
    Ok(FleetReport {
        operation: command,
        totals: FleetTotals::of(&reports),
        targets: reports,
        status,
    })
}

/// The targets run first, as the canary, and the rest, by index: the targets named (those of
/// this shard: [`Fleet::targets`] checked that each is a target of the fleet), or the first
/// `canary`.
fn canary(options: &super::FleetOptions, targets: &[Target]) -> (Vec<usize>, Vec<usize>) {
    if options.canary_names.is_empty() {
        let canary = options.canary.min(targets.len());
        return ((0..canary).collect(), (canary..targets.len()).collect());
    }
    let named = |i: &usize| options.canary_names.contains(&targets[*i].name);
    (0..targets.len()).partition(named)
}

/// The migrations loaded for each kind of database (by its name), with the down steps read.
type Loaded = BTreeMap<&'static str, (DownSteps, Arc<Vec<Migration>>)>;

/// The migrations, loaded and checked once for each kind of database among the targets (in
/// practice one): what each target's migrator then uses instead of loading again.
fn preload(
    base: &Migrator,
    targets: &[Target],
    parsed: &[Connections],
    command: FleetCommand,
) -> Result<Loaded> {
    let downs = match command {
        FleetCommand::Run(command) | FleetCommand::Preview(command) => command.down_steps(),
        _ => DownSteps::Skip,
    };
    let mut loaded = BTreeMap::new();
    let history = base.config().history_connection.as_str();
    for (target, connections) in targets.iter().zip(parsed) {
        let kind = connections.kind(history)?.name();
        if loaded.contains_key(kind) {
            continue;
        }
        let migrator = base.for_target(
            &target.name,
            target_config(base.config(), target),
            base.events().clone(),
            None,
            connections.clone(),
        );
        loaded.insert(kind, (downs, migrator.preload(downs)?));
    }
    Ok(loaded)
}

/// The configuration of one target: the base one, with the target's URL for the history
/// connection.
fn target_config(base: &Config, target: &Target) -> Config {
    let mut config = base.clone();
    let history = config.history_connection.clone();
    config.connections.insert(history, target.url.clone());
    config
}

/// Where a target writes its `dump_schema`: the path with `{target}` made its name, or,
/// without `{target}`, the path for the first target alone (one file, one schema).
fn dump_schema_of(path: &std::path::Path, target: &str, first: bool) -> Option<std::path::PathBuf> {
    let text = path.to_string_lossy();
    // A name is one file name: a `/` in it (a --targets-sql row) does not reach elsewhere.
    let name = match target.replace(['/', '\\'], "_") {
        dots if dots == "." || dots == ".." => "_".to_string(),
        name => name,
    };
    match text.contains("{target}") {
        true => Some(text.replace("{target}", &name).into()),
        false => first.then(|| path.to_path_buf()),
    }
}

struct Schedule<'a> {
    base: &'a Migrator,
    /// Opens the targets' connections, keeping clean ones for the next target.
    reuse: Arc<dyn Connector>,
    targets: &'a [Target],
    /// Each target's connections, their URLs read once.
    parsed: &'a [Connections],
    command: FleetCommand,
    loaded: &'a Loaded,
    /// A `--schemas` target's sessions' `search_path`.
    search_path: &'a super::SearchPath,
    jobs: usize,
    max_failures: Option<usize>,
    /// `--strict`: a target dirty before the run counts toward `max_failures` too.
    strict: bool,
    /// `wait`: when the whole fleet's timeout runs out.
    deadline: Option<Instant>,
    results: Vec<Option<TargetReport>>,
    /// Targets of the last first pass whose lock was held, with its holder.
    deferred: Vec<(usize, Option<String>)>,
    failures: usize,
    /// No target is started any more: `max_failures` reached, or a signal came.
    stopped: bool,
}

impl Schedule<'_> {
    /// Runs the targets `indices`, `jobs` at a time, until all ran or starting stops.
    async fn pass(&mut self, indices: Vec<usize>, pass: Pass) {
        let mut queue = indices.into_iter();
        let mut running = JoinSet::new();
        loop {
            while running.len() < self.jobs && !self.stopping() {
                let Some(index) = queue.next() else { break };
                let migrator = self.migrator_for(index, pass);
                let target = self.targets[index].clone();
                let command = self.command;
                let deadline = self.deadline;
                running.spawn(async move {
                    (
                        index,
                        run_target(migrator, &target, command, pass, deadline).await,
                    )
                });
            }
            let Some(joined) = running.join_next().await else {
                return;
            };
            let (index, ended) = match joined {
                Ok(ended) => ended,
                // A target's task panicked: that is a bug, and it is the process's to report.
                Err(error) => std::panic::resume_unwind(error.into_panic()),
            };
            match ended {
                Ended::Deferred(holder) => self.deferred.push((index, holder)),
                Ended::Done(report) => {
                    let mut report = *report;
                    report.deferred = pass == Pass::Deferred;
                    // A target already dirty is the last crash's, not this run's failure: it
                    // does not stop the rest of the fleet, unless --strict.
                    let counts = (!report.dirty_before_run || self.strict) && !report.found_drift();
                    if report.outcome == Outcome::Failed && counts {
                        self.failures += 1;
                    }
                    self.results[index] = Some(report);
                }
            }
        }
    }

    /// The targets the last first pass deferred, run now, waiting for their locks.
    async fn pass_deferred(&mut self) {
        let deferred: Vec<usize> = std::mem::take(&mut self.deferred)
            .into_iter()
            .map(|(index, _)| index)
            .collect();
        if !deferred.is_empty() {
            self.pass(deferred, Pass::Deferred).await;
        }
    }

    fn stopping(&mut self) -> bool {
        if self.max_failures.is_some_and(|max| self.failures >= max) || self.base.stopped() {
            self.stopped = true;
        }
        self.stopped
    }

    /// The target's own migrator: its URL (and schema), its events naming it, the files
    /// loaded once, and — in the first pass of a locked command — no wait for its lock.
    fn migrator_for(&self, index: usize, pass: Pass) -> Migrator {
        let target = &self.targets[index];
        let mut config = target_config(self.base.config(), target);
        config.dump_schema = (config.dump_schema.take())
            .and_then(|path| dump_schema_of(&path, &target.name, index == 0));
        if pass == Pass::First && self.command.locks() {
            config.lock_wait = Some(LockWait::For(Duration::ZERO));
        }
        let events = self.base.events().for_target(&target.name);
        let connections = self.parsed[index].clone();
        let history = self.base.config().history_connection.as_str();
        let kind = connections.kind(history).map(BackendKind::name);
        let search_path = (target.schema.as_deref()).map(|schema| self.search_path.schemas(schema));
        let migrator =
            (self
                .base
                .for_target(&target.name, config, events, search_path, connections))
            .with_shared_connector(Arc::clone(&self.reuse));
        match kind.ok().and_then(|kind| self.loaded.get(kind)) {
            Some((downs, migrations)) => migrator.with_preloaded(*downs, Arc::clone(migrations)),
            None => migrator,
        }
    }
}

/// One target, start to end.
async fn run_target(
    migrator: Migrator,
    target: &Target,
    command: FleetCommand,
    pass: Pass,
    deadline: Option<Instant>,
) -> Ended {
    let events = migrator.events().clone();
    events.emit(EventKind::TargetStarted {
        deferred: pass == Pass::Deferred,
    });
    let started = Instant::now();
    let done = run_command(&migrator, command, deadline).await;
    let mut report = match done {
        Err(error) if pass == Pass::First && error.code() == Code::MigrationLockHeld => {
            let holder = holder_of(&error);
            events.emit(EventKind::TargetDeferred {
                holder: holder.clone(),
            });
            return Ended::Deferred(holder);
        }
        Err(error) if matches!(error.kind(), ErrorKind::NotDirty { .. }) => TargetReport {
            note: Some(format!("nothing to resolve: {error}")),
            ..TargetReport::new(&target.name, Outcome::UpToDate)
        },
        Err(error) => failed(&target.name, error),
        Ok(done) => done.into_report(&target.name),
    };
    report.duration_ms = started.elapsed().as_millis().try_into().unwrap_or(u64::MAX);
    events.emit(EventKind::TargetFinished {
        outcome: report.outcome,
        applied: report.applied.len(),
        reverted: report.reverted.len(),
        error: report.error.as_ref().map(|e| e.code()),
        duration: started.elapsed(),
    });
    Ended::Done(Box::new(report))
}

/// The report of a target whose command failed: what completed before the failure is kept.
/// Interrupted before anything was done, it was skipped, not failed.
fn failed(name: &str, error: Error) -> TargetReport {
    let completed = error.completed().to_vec();
    if error.code() == Code::Interrupted && completed.is_empty() {
        return TargetReport {
            error: Some(error),
            ..TargetReport::new(name, Outcome::Skipped)
        };
    }
    // A migration dirty before this run is the plan's first finding: nothing was tried.
    let dirty_before_run = error.code() == Code::DirtyMigration && completed.is_empty();
    let mut report = TargetReport {
        dirty_before_run,
        ..TargetReport::failed(name, error)
    };
    for step in completed {
        match step.direction {
            crate::migration::Direction::Up => report.applied.push(step),
            crate::migration::Direction::Down => report.reverted.push(step),
        }
    }
    report
}

/// Who holds the lock, as a `MIGRATION_LOCK_HELD` error says.
fn holder_of(error: &Error) -> Option<String> {
    match error.kind() {
        crate::error::ErrorKind::LockHeld { holder, .. } => {
            holder.as_ref().map(ToString::to_string)
        }
        _ => None,
    }
}

/// What a target's command returned.
enum Done {
    Run(crate::report::RunReport),
    Status(crate::report::StatusReport),
    Preview(crate::report::Preview),
    Waited,
    Drift(crate::engine::DriftReport),
    Accepted(crate::schema::SchemaSnapshot),
}

async fn run_command(
    migrator: &Migrator,
    command: FleetCommand,
    deadline: Option<Instant>,
) -> Result<Done> {
    Ok(match command {
        FleetCommand::Run(command) => Done::Run(migrator.run(command).await?),
        FleetCommand::Baseline(version) => Done::Run(migrator.baseline(version).await?),
        FleetCommand::Resolve(version, resolution) => {
            Done::Run(migrator.resolve(version, resolution).await?)
        }
        FleetCommand::Status => Done::Status(migrator.status().await?),
        FleetCommand::Preview(command) => Done::Preview(migrator.preview(command).await?),
        FleetCommand::Wait(until, timeout) => {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            migrator.wait(until, left.or(timeout)).await?;
            Done::Waited
        }
        FleetCommand::Drift => Done::Drift(migrator.drift().await?),
        FleetCommand::AcceptSchema => Done::Accepted(migrator.accept_schema().await?),
    })
}

impl Done {
    fn into_report(self, name: &str) -> TargetReport {
        match self {
            Done::Run(run) => {
                let changed =
                    !run.applied.is_empty() || !run.reverted.is_empty() || !run.recorded.is_empty();
                TargetReport {
                    applied: run.applied,
                    reverted: run.reverted,
                    recorded: run.recorded,
                    ..TargetReport::new(
                        name,
                        if changed {
                            Outcome::Applied
                        } else {
                            Outcome::UpToDate
                        },
                    )
                }
            }
            Done::Status(status) => {
                let found = TargetStatus::of(&status);
                let outcome = match found.pending > 0 || found.dirty {
                    true => Outcome::Pending,
                    false => Outcome::UpToDate,
                };
                TargetReport {
                    status: Some(found),
                    ..TargetReport::new(name, outcome)
                }
            }
            Done::Preview(preview) => {
                let outcome = match preview.steps.is_empty() {
                    true => Outcome::UpToDate,
                    false => Outcome::Pending,
                };
                TargetReport {
                    preview: Some(preview),
                    ..TargetReport::new(name, outcome)
                }
            }
            Done::Waited => TargetReport::new(name, Outcome::UpToDate),
            Done::Drift(drift) => TargetReport {
                error: drift.error(),
                drift: Some(drift),
                ..TargetReport::new(name, Outcome::UpToDate)
            }
            .failed_if_erred(),
            Done::Accepted(snapshot) => TargetReport {
                note: Some(format!(
                    "took the schema ({} objects) as the reference",
                    snapshot.dump.objects().len()
                )),
                ..TargetReport::new(name, Outcome::UpToDate)
            },
        }
    }
}
