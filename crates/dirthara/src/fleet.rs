//! Fleets: one command over many targets — every tenant's schema or database — in parallel,
//! each under its own lock exactly as a single run, shared safely by several runners.
//!
//! - `fleet/targets.rs`: where targets come from (a file, the schemas or databases of the
//!   `default` connection, a query), their names, and the stable split into shards;
//! - `fleet/run.rs`: the schedule — files loaded once, `jobs` targets at a time, the canary
//!   first, failures counted against `max_failures`, a target whose lock is held left for
//!   the end, a signal that stops the starting;
//! - `fleet/report.rs`: what happened on each target, the totals, and where a fleet stands.
//!
//! Several runners (hosts, CI shards, two deploys at once) need no coordinator: the lock of
//! each target is its own. A runner that finds a target's lock held moves on and comes back to
//! it at the end, where it waits as `lock_wait` says and then finds nothing left to do.

mod report;
mod run;
mod targets;

use std::time::Duration;

pub use crate::vocabulary::Outcome;
pub use dirthara_core::config::{
    Canary, FleetOptions, FleetSettings, SearchPath, Shard, Target, TargetSource,
};
pub use dirthara_core::config::{ShardSpec, SHARD_COUNT_VARIABLE, SHARD_INDEX_VARIABLES};
pub use report::{FleetReport, FleetStatus, FleetTotals, TargetReport, TargetStatus};

use crate::engine::Migrator;
use crate::plan::{Command, Resolution};

/// A command over a fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FleetCommand {
    /// `migrate`, `rollback`, `down`, `to` (locked; `refresh` and `fresh` are refused).
    Run(Command),
    /// `baseline V`.
    Baseline(i64),
    /// `resolve V ...`.
    Resolve(i64, Resolution),
    /// `status`: read-only, no lock.
    Status,
    /// `preview <command>`: read-only, no lock.
    Preview(Command),
    /// `wait`: read-only, no lock; each target as [`Migrator::wait`](crate::Migrator::wait)
    /// (a newer database is fine unless `strict`; a version waits for itself alone). The
    /// timeout is the whole fleet's (`None`: for ever): a target started after it still
    /// gets one look, of at most a second.
    Wait(crate::engine::WaitFor, Option<Duration>),
    /// `drift`: each target's live schema against its snapshot, under its lock (changes
    /// nothing). A drifted target fails with `SCHEMA_DRIFT`, which neither counts toward
    /// `max_failures` nor stops the fleet after its canary: it is a finding, not a failure.
    Drift,
    /// `drift --accept`: each target's live schema taken as its reference, under its lock.
    AcceptSchema,
}

impl FleetCommand {
    /// The command's name, as in events and reports.
    pub fn name(&self) -> &'static str {
        match self {
            FleetCommand::Run(command) => command.name(),
            FleetCommand::Baseline(_) => "baseline",
            FleetCommand::Resolve(..) => "resolve",
            FleetCommand::Status => "status",
            FleetCommand::Preview(_) => "preview",
            FleetCommand::Wait(..) => "wait",
            FleetCommand::Drift | FleetCommand::AcceptSchema => "drift",
        }
    }

    /// Whether it takes each target's lock.
    fn locks(&self) -> bool {
        matches!(
            self,
            FleetCommand::Run(_)
                | FleetCommand::Baseline(_)
                | FleetCommand::Resolve(..)
                | FleetCommand::Drift
                | FleetCommand::AcceptSchema
        )
    }
}

/// A command as reports name it: `migrate`, `status`, ...
fn serialize_command<S: serde::Serializer>(
    command: &FleetCommand,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.serialize_str(command.name())
}

/// One command over many targets. Built from a [`Migrator`] whose configuration every target
/// shares, but for its URL (and, for a schema, its `search_path`).
///
/// # Examples
///
/// ```no_run
/// # async fn run() -> Result<(), dirthara::Error> {
/// use dirthara::fleet::{Fleet, FleetCommand, FleetOptions, TargetSource};
///
/// let migrator = dirthara::Migrator::new(dirthara::Config::with_url("postgres://app@db/app"));
/// let fleet = Fleet::new(migrator, FleetOptions::default());
/// let targets = fleet.targets(&TargetSource::Schemas("tenant_*".into())).await?;
/// let report = fleet.run(targets, FleetCommand::Run(dirthara::Command::Migrate)).await?;
/// assert!(report.succeeded());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Fleet {
    migrator: Migrator,
    options: FleetOptions,
}

impl Fleet {
    /// A fleet of `migrator`'s configuration, run as `options` say.
    pub fn new(migrator: Migrator, options: FleetOptions) -> Self {
        Fleet { migrator, options }
    }

    /// The options it runs with.
    pub fn options(&self) -> &FleetOptions {
        &self.options
    }

    /// The targets `source` names, checked (unique names, URLs of a known kind), in their
    /// order, and only this runner's shard of them. A source that names none is
    /// `FLEET_EMPTY`, unless [`FleetOptions::allow_empty`] (a shard of a fleet may hold
    /// none: an index with nothing to do). The shard is [`FleetOptions::shard`], else the
    /// configuration's `[fleet] shard = "auto"` resolved from the process's environment. A canary named
    /// ([`FleetOptions::canary_names`]) that is no target of the whole fleet is an error, as
    /// is one of [`FleetOptions::only`], the targets kept.
    pub async fn targets(&self, source: &TargetSource) -> crate::Result<Vec<Target>> {
        let found = match targets::find(&self.migrator, source).await {
            Err(e) if self.options.allow_empty && e.code() == crate::error::Code::FleetEmpty => {
                return Ok(Vec::new())
            }
            found => found?,
        };
        let canary = &self.options.canary_names;
        let fix = "name targets of the fleet, or give a number of targets";
        targets::check_named("--canary", fix, canary, &found, source)?;
        let only = &self.options.only;
        let fix = "name targets of the fleet, as its reports name them";
        targets::check_named("--target", fix, only, &found, source)?;
        let mut found = found;
        if !only.is_empty() {
            found.retain(|target| only.contains(&target.name));
        }
        // `[fleet] shard = "auto"`, read from the orchestrator's environment now.
        let shard = self.shard(|name| std::env::var(name).ok())?;
        Ok(match shard {
            Some(shard) => found.into_iter().filter(|t| shard.holds(&t.name)).collect(),
            None => found,
        })
    }

    /// The shard this runner takes: [`FleetOptions::shard`], else the configuration's
    /// `[fleet] shard = "auto"` resolved against `env`.
    fn shard(&self, env: impl Fn(&str) -> Option<String>) -> crate::Result<Option<Shard>> {
        let auto = self.migrator.config().fleet.shard_auto;
        Ok(match (self.options.shard, auto) {
            (Some(shard), _) => Some(shard),
            (None, Some(spec)) => Some(spec.resolve(env)?),
            (None, None) => None,
        })
    }

    /// Runs `command` on every target, as the options say. The files are loaded and checked
    /// once, before any target is touched: a bad file is the error, and nothing ran. Every
    /// other failure is a target's, in the report; [`FleetReport::succeeded`] says whether
    /// every target succeeded.
    pub async fn run(
        &self,
        targets: Vec<Target>,
        command: FleetCommand,
    ) -> crate::Result<FleetReport> {
        run::run(self, targets, command).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_auto_shard_is_read_from_the_environment_unless_one_is_given() {
        let mut config = crate::Config::with_url("sqlite::memory:");
        config.fleet.shard_auto = Some(ShardSpec::parse("auto/2").unwrap());
        let fleet = Fleet::new(Migrator::new(config), FleetOptions::default());
        let index = |value: &'static str| {
            move |name: &str| (name == "JOB_COMPLETION_INDEX").then(|| value.to_string())
        };
        assert_eq!(
            fleet.shard(index("1")).unwrap(),
            Some(Shard::parse("2/2").unwrap())
        );
        assert!(fleet.shard(|_| None).is_err(), "no index variable");
        let mut given = FleetOptions::default();
        given.shard = Some(Shard::parse("1/3").unwrap());
        let fleet = Fleet::new(fleet.migrator.clone(), given);
        assert_eq!(
            fleet.shard(index("1")).unwrap(),
            Some(Shard::parse("1/3").unwrap())
        );
    }
}
