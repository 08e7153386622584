//! A command over a fleet: which commands run there, what they are as the library's
//! [`FleetCommand`], and a run that did not succeed on every target as the CLI's failure.

use dirthara::fleet::{Fleet, FleetCommand, FleetReport, Outcome, TargetSource};
use dirthara::{Command as Plan, Migrator, Resolution, RollbackScope};
use tokio::sync::watch;

use crate::cli::{Command, PreviewCommand};
use crate::commands::{rollback_scope, wait_timeout};
use crate::error::{CliError, FleetIncomplete};
use crate::render::Renderer;
use crate::summary::Facts;

/// Runs `command` over the fleet and prints its report; what `--summary-file` says of the
/// run goes to `facts`, whether every target succeeded or not.
pub(crate) async fn run(
    command: Command,
    migrator: Migrator,
    source: &TargetSource,
    renderer: Renderer,
    shutdown: &watch::Receiver<bool>,
    facts: &mut Facts,
) -> Result<(), CliError> {
    let command = fleet_command(command)?;
    let options = migrator.config().fleet.options.clone();
    let shard = options.shard;
    let report = {
        let fleet = Fleet::new(migrator, options);
        let targets = fleet.targets(source).await?;
        fleet.run(targets, command).await?
        // The fleet goes here, and its events with it: a progress bar is cleared before the
        // result is printed.
    };
    renderer.fleet(&report);
    facts.fleet(&report, shard);
    if report.succeeded() {
        return Ok(());
    }
    Err(CliError::FleetIncomplete(incomplete(
        &report,
        *shutdown.borrow(),
    )))
}

/// The fleet's form of `command`, or why it does not run over a fleet.
fn fleet_command(command: Command) -> Result<FleetCommand, CliError> {
    Ok(match command {
        Command::Migrate => FleetCommand::Run(Plan::Migrate),
        Command::Rollback(args) => FleetCommand::Run(Plan::Rollback(rollback_scope(&args))),
        Command::Down => FleetCommand::Run(Plan::Rollback(RollbackScope::Steps(1))),
        Command::To { target } => FleetCommand::Run(Plan::MigrateTo(target)),
        Command::Baseline(args) if args.from.from.is_none() => {
            FleetCommand::Baseline(args.target.expect("clap requires VERSION without --from"))
        }
        Command::Resolve {
            migration,
            applied,
            rolled_back,
            ..
        } => FleetCommand::Resolve(
            migration,
            match (applied, rolled_back) {
                (true, _) => Resolution::Applied,
                (_, true) => Resolution::RolledBack,
                _ => Resolution::AcceptChecksum,
            },
        ),
        Command::Status => FleetCommand::Status,
        Command::Preview { command } => FleetCommand::Preview(match command {
            PreviewCommand::Migrate => Plan::Migrate,
            PreviewCommand::Rollback(args) => Plan::Rollback(rollback_scope(&args)),
            PreviewCommand::Down => Plan::Rollback(RollbackScope::Steps(1)),
            PreviewCommand::To { target } => Plan::MigrateTo(target),
            PreviewCommand::Refresh => Plan::Refresh,
            PreviewCommand::Fresh => Plan::Fresh,
            PreviewCommand::Baseline(_) => return Err(not_over_a_fleet("preview baseline --from")),
        }),
        Command::Wait { until, timeout } => FleetCommand::Wait(until, wait_timeout(timeout)?),
        Command::Baseline(_) => return Err(not_over_a_fleet("baseline --from")),
        Command::Refresh => return Err(not_over_a_fleet("refresh")),
        Command::Fresh { .. } => return Err(not_over_a_fleet("fresh")),
        Command::Unlock { .. } => return Err(not_over_a_fleet("unlock")),
        Command::New { .. } | Command::Completions { .. } | Command::Man | Command::Lint(_) => {
            unreachable!("run before any fleet is looked at")
        }
    })
}

fn not_over_a_fleet(command: &'static str) -> CliError {
    CliError::NotOverAFleet { command }
}

/// The failure of a fleet run that did not succeed everywhere: the first target that failed
/// gives its code.
fn incomplete(report: &FleetReport, interrupted: bool) -> FleetIncomplete {
    let first = (report.targets.iter())
        .find(|t| t.outcome == Outcome::Failed)
        .and_then(|t| Some((t.name.clone(), t.error.clone()?)));
    FleetIncomplete {
        targets: report.totals.targets,
        failed: report.totals.failed,
        skipped: report.totals.skipped,
        first,
        interrupted,
    }
}
