//! A command over a fleet: which commands run there, what they are as the library's
//! [`FleetCommand`], and a run that did not succeed on every target as the CLI's failure.

use dirthara::fleet::{Fleet, FleetCommand, FleetReport, Outcome, TargetSource};
use dirthara::{Command as Plan, Migrator, Resolution, RollbackScope};
use tokio::sync::watch;

use crate::cli::{wait_timeout, Command, PreviewCommand};
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
    let dirty_only = matches!(command, Command::Status { dirty: true });
    let command = fleet_command(command)?;
    let options = migrator.config().fleet.options.clone();
    let shard = options.shard;
    let mut report = {
        let fleet = Fleet::new(migrator, options);
        let targets = fleet.targets(source).await?;
        fleet.run(targets, command).await?
        // The fleet goes here, and its events with it: a progress bar is cleared before the
        // result is printed.
    };
    if dirty_only {
        // `status --dirty`: the targets to recover, by name; the totals stay the fleet's.
        report
            .targets
            .retain(|t| t.status.as_ref().is_some_and(|s| s.dirty));
    }
    renderer.fleet(&report, source);
    facts.fleet(&report, shard);
    if report.succeeded() {
        return Ok(());
    }
    Err(CliError::FleetIncomplete(incomplete(
        &report,
        source,
        *shutdown.borrow(),
    )))
}

/// The flags that select `target` alone, for the commands a target's error tells its reader
/// to run (`dirthara resolve 3 --applied`): pasted as printed, they would run on the database
/// the fleet was listed from. A schema or database whose name is a plain word is its own
/// pattern (`--schemas tenant_05`); otherwise the source and `--target NAME`, quoted for a
/// POSIX shell. `None` for targets given in code.
pub(crate) fn selecting(source: &TargetSource, target: &str) -> Option<String> {
    let plain = !target.contains(['*', '?', '[', '\'', ' ']);
    let named = |source: String| format!("{source} --target {}", shell_word(target));
    match source {
        TargetSource::Schemas(_) if plain => Some(format!("--schemas {target}")),
        TargetSource::Databases(_) if plain => Some(format!("--databases {target}")),
        TargetSource::Schemas(glob) => Some(named(format!("--schemas {}", shell_word(glob)))),
        TargetSource::Databases(glob) => Some(named(format!("--databases {}", shell_word(glob)))),
        TargetSource::File(path) => {
            let path = path.display().to_string();
            Some(named(format!("--targets {}", shell_word(&path))))
        }
        TargetSource::Query(sql) => Some(named(format!("--targets-sql {}", shell_word(sql)))),
        _ => None,
    }
}

/// `word` as one word of a POSIX shell command: as it is when it holds only characters no
/// shell reads specially, else in single quotes.
fn shell_word(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./,:=@%+".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// `text` with each command it suggests (`` `dirthara …` ``) run on `target` alone.
pub(crate) fn for_target(source: &TargetSource, target: &str, text: &str) -> String {
    match selecting(source, target) {
        Some(flag) => text.replace("`dirthara ", &format!("`dirthara {flag} ")),
        None => text.to_string(),
    }
}

/// The fleet's form of `command`, or why it does not run over a fleet.
fn fleet_command(command: Command) -> Result<FleetCommand, CliError> {
    Ok(match command {
        Command::Migrate => FleetCommand::Run(Plan::Migrate),
        Command::Rollback(args) => FleetCommand::Run(Plan::Rollback(args.scope())),
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
        Command::Status { .. } => FleetCommand::Status,
        Command::Preview { command } => FleetCommand::Preview(match command {
            PreviewCommand::Migrate => Plan::Migrate,
            PreviewCommand::Rollback(args) => Plan::Rollback(args.scope()),
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
        Command::Dump { .. } => return Err(not_over_a_fleet("dump")),
        Command::Squash { .. } => return Err(not_over_a_fleet("squash")),
        // Each target's schema is its own (on PostgreSQL its objects are named with its
        // schema): one file fits one target.
        Command::Drift {
            against: Some(_), ..
        } => return Err(not_over_a_fleet("drift --against")),
        Command::Drift { accept: true, .. } => FleetCommand::AcceptSchema,
        Command::Drift { .. } => FleetCommand::Drift,
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
fn incomplete(report: &FleetReport, source: &TargetSource, interrupted: bool) -> FleetIncomplete {
    // A target that failed outright comes before one `drift` found drifted.
    let failed = || (report.targets.iter()).filter(|t| t.outcome == Outcome::Failed);
    let first = (failed()
        .find(|t| !t.found_drift())
        .or_else(|| failed().next()))
    .and_then(|t| {
        let error = t.error.clone()?;
        let message = for_target(source, &t.name, &error.to_string());
        Some((t.name.clone(), error, message))
    });
    FleetIncomplete {
        targets: report.totals.targets,
        failed: report.totals.failed,
        drifted: report.totals.drifted,
        skipped: report.totals.skipped,
        first,
        interrupted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_selected_by_a_command_a_shell_reads_as_printed() {
        let schemas = TargetSource::Schemas("tenant_*".into());
        assert_eq!(
            selecting(&schemas, "tenant_05").unwrap(),
            "--schemas tenant_05"
        );
        assert_eq!(
            selecting(&schemas, "it's").unwrap(),
            r"--schemas 'tenant_*' --target 'it'\''s'"
        );
        let query = TargetSource::Query("SELECT name, url FROM tenants".into());
        assert_eq!(
            selecting(&query, "acme").unwrap(),
            "--targets-sql 'SELECT name, url FROM tenants' --target acme"
        );
        let file = TargetSource::File("/etc/dirthara/tenants.txt".into());
        assert_eq!(
            selecting(&file, "acme").unwrap(),
            "--targets /etc/dirthara/tenants.txt --target acme"
        );
        assert_eq!(shell_word(""), "''");
    }
}
