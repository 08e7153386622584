//! One function per command: build the configuration, call the library, render the result.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use clap::CommandFactory;
use clap_complete::Generator;
use dirthara::{Command as Plan, Migrator, Resolution, RollbackScope};
use tokio::sync::watch;

use crate::cli::{wait_timeout, Cli, Command, PreviewCommand};
use crate::error::{CliError, IoAction, NotConfirmed};
use crate::exit::{Failure, Signal};
use crate::render::Renderer;
use crate::scaffold::{create_migration, create_repeatable};
use crate::settings::{build_config, new_migration_dir};
use crate::summary::Facts;
use crate::telemetry::Export;
use dirthara_source::scaffold::Template;

/// Runs the command; what `--summary-file` says of it besides its error goes to `facts`.
pub(crate) async fn execute(
    cli: Cli,
    renderer: Renderer,
    export: &Export,
    facts: &mut Facts,
) -> Result<(), Failure> {
    let signal = Arc::new(AtomicU8::new(0));
    let result = run(cli, renderer, export, signal.clone(), facts).await;
    result.map_err(|error| Failure {
        error,
        signal: match signal.load(Ordering::SeqCst) {
            1 => Some(Signal::Interrupt),
            2 => Some(Signal::Terminate),
            _ => None,
        },
    })
}

async fn run(
    cli: Cli,
    renderer: Renderer,
    export: &Export,
    signal: Arc<AtomicU8>,
    facts: &mut Facts,
) -> Result<(), CliError> {
    match &cli.command {
        Command::Completions { shell } => {
            let mut command = Cli::command();
            command.set_bin_name("dirthara");
            command.build();
            return write_document("the completion script", |out| {
                shell.try_generate(&command, out)
            });
        }
        Command::Man => {
            let page = clap_mangen::Man::new(Cli::command());
            return write_document("the manual page", |out| page.render(out));
        }
        Command::New {
            name,
            irreversible,
            repeatable,
            mongo,
        } => {
            let config = build_config(&cli.global, &renderer)?;
            let kind = if *mongo {
                Template::Mongo
            } else {
                Template::Sql
            };
            let dir = new_migration_dir(&config)?;
            let layout = config.layouts.get(&dir).copied();
            let created = match repeatable {
                true => create_repeatable(&dir, name, kind)?,
                false => create_migration(&dir, layout, name, *irreversible, kind)?,
            };
            renderer.created(&created.paths, &created.notes);
            return Ok(());
        }
        _ => {}
    }

    let config = build_config(&cli.global, &renderer)?;
    let shutdown = watch_signals(signal);
    let migrator = Migrator::new(config)
        .with_events(export.events(renderer.events()))
        .with_shutdown(shutdown.clone());
    // Over the configured connections, never a fleet's targets: it judges files.
    if let Command::Lint(args) = &cli.command {
        return crate::lint::run(&migrator, args, renderer).await;
    }
    if let Some(source) = migrator.config().fleet.targets.clone() {
        return crate::fleet::run(cli.command, migrator, &source, renderer, &shutdown, facts).await;
    }
    if !migrator.config().fleet.options.only.is_empty() {
        return Err(dirthara::Error::config(
            "--target picks targets of a fleet, but this command runs on one database; name \
             the fleet too (--targets FILE, --targets-sql, --schemas or --databases, or \
             [fleet] in dirthara.toml)",
        )
        .into());
    }
    // The result of a run, printed and summed up.
    let mut ran = |report: &dirthara::RunReport| {
        renderer.run(report);
        facts.ran(report);
    };

    match cli.command {
        Command::Migrate => ran(&migrator.migrate().await?),
        Command::Rollback(args) => ran(&migrator.rollback(args.scope()).await?),
        Command::Down => ran(&migrator.rollback(RollbackScope::Steps(1)).await?),
        Command::To { target } => ran(&migrator.migrate_to(target).await?),
        Command::Refresh => ran(&migrator.refresh().await?),
        Command::Fresh { force } => {
            confirm_fresh(&migrator, force)?;
            ran(&migrator.fresh().await?)
        }
        Command::Preview { command } => {
            let plan = match command {
                PreviewCommand::Migrate => Plan::Migrate,
                PreviewCommand::Rollback(args) => Plan::Rollback(args.scope()),
                PreviewCommand::Down => Plan::Rollback(RollbackScope::Steps(1)),
                PreviewCommand::To { target } => Plan::MigrateTo(target),
                PreviewCommand::Refresh => Plan::Refresh,
                PreviewCommand::Fresh => Plan::Fresh,
                PreviewCommand::Baseline(args) => {
                    let source = adopt_source(&args.from, args.from_table.clone());
                    renderer.adoption(&migrator.preview_baseline_from(&source).await?);
                    return Ok(());
                }
            };
            renderer.preview(&migrator.preview(plan).await?)
        }
        Command::Status { dirty } => {
            let mut status = migrator.status().await?;
            if dirty {
                status
                    .migrations
                    .retain(|m| m.state == dirthara::MigrationState::Dirty);
                // A repeatable that failed is never dirty: the next `migrate` applies it again.
                status.repeatables.clear();
            }
            renderer.status(&status, dirty);
        }
        Command::Dump { check: None } => renderer.dump(&migrator.dump().await?),
        Command::Dump { check: Some(file) } => {
            let expected = crate::schema::read_dump(&file, "--check")?;
            let live = migrator.dump().await?;
            crate::schema::check(&renderer, &expected, &live, &file, migrator.config())?
        }
        Command::Drift { accept: true, .. } => {
            renderer.accepted(&migrator.accept_schema().await?, migrator.config())
        }
        Command::Drift { against, .. } => {
            let report = match &against {
                Some(file) => {
                    let dump = crate::schema::read_dump(file, "--against")?;
                    let name = file.display().to_string();
                    migrator.drift_against(&name, &dump).await?
                }
                None => migrator.drift().await?,
            };
            renderer.drift(&report);
            if let Some(error) = report.error() {
                return Err(error.into());
            }
        }
        Command::Squash { to } => renderer.squashed(&migrator.squash(to).await?),
        Command::Unlock { force: false } => renderer.lock(&migrator.lock_status().await?),
        Command::Unlock { force: true } => renderer.force_unlock(&migrator.force_unlock().await?),
        Command::Resolve {
            migration,
            applied,
            rolled_back,
            ..
        } => {
            let resolution = if applied {
                Resolution::Applied
            } else if rolled_back {
                Resolution::RolledBack
            } else {
                Resolution::AcceptChecksum
            };
            ran(&migrator.resolve(migration, resolution).await?)
        }
        Command::Baseline(args) => match (args.target, args.from.from) {
            (_, Some(tool)) => {
                let source = adopt_source(&tool, args.from.from_table);
                renderer.adoption(&migrator.baseline_from(&source).await?);
            }
            (Some(target), None) => ran(&migrator.baseline(target).await?),
            (None, None) => unreachable!("clap requires VERSION or --from"),
        },
        Command::Wait { until, timeout } => {
            let timeout = wait_timeout(timeout)?;
            renderer.waited(&migrator.wait(until, timeout).await?)
        }
        Command::Completions { .. } | Command::New { .. } | Command::Man | Command::Lint(_) => {
            unreachable!("handled above")
        }
    }
    Ok(())
}

/// Writes a generated document (manual page, completion script) to stdout.
fn write_document(
    what: &'static str,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    // Flushed here, so a failure of the last bytes is reported too, not lost at exit.
    match write(&mut out).and_then(|()| out.flush()) {
        // `dirthara man | head` closes the pipe early: not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::io(IoAction::WriteStdout(what))(e))
        }
        _ => Ok(()),
    }
}

/// SIGINT/SIGTERM set the shutdown flag: the running migration finishes and is recorded,
/// the rest is left undone. A second signal aborts at once.
fn watch_signals(signal: Arc<AtomicU8>) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal as unix_signal, SignalKind};
            let (Ok(mut int), Ok(mut term)) = (
                unix_signal(SignalKind::interrupt()),
                unix_signal(SignalKind::terminate()),
            ) else {
                return;
            };
            let mut received = 0;
            loop {
                let kind = tokio::select! {
                    _ = int.recv() => 1u8,
                    _ = term.recv() => 2u8,
                };
                received += 1;
                if received > 1 {
                    eprintln!("Error [INTERRUPTED]: aborted by a second signal; the running step was cut off");
                    crate::exit::abort(if kind == 2 {
                        Signal::Terminate
                    } else {
                        Signal::Interrupt
                    });
                }
                signal.store(kind, Ordering::SeqCst);
                eprintln!(
                    "stopping: finishing the running migration (if one has started), then \
                     releasing the lock (signal again to abort at once)"
                );
                let _ = tx.send(true);
            }
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_ok() {
                signal.store(1, Ordering::SeqCst);
                let _ = tx.send(true);
            }
        }
    });
    rx
}

/// `fresh` destroys data: ask on a terminal, insist on --force elsewhere.
fn confirm_fresh(migrator: &Migrator, force: bool) -> Result<(), NotConfirmed> {
    if force {
        return Ok(());
    }
    let config = migrator.config();
    let database = config
        .connection_url(&config.history_connection)
        .map(dirthara::redact_url)
        .unwrap_or_else(|_| config.history_connection.clone());
    if !std::io::stdin().is_terminal() {
        return Err(NotConfirmed::NoTerminal { database });
    }
    eprint!("`fresh` drops EVERY table of {database}, then migrates from scratch. Type `yes` to continue: ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if answer.trim() == "yes" {
        Ok(())
    } else {
        Err(NotConfirmed::Declined)
    }
}

pub(crate) fn adopt_source(tool: &str, table: Option<String>) -> dirthara::AdoptSource {
    let tool = dirthara::Tool::parse(tool).expect("clap only accepts known tools");
    let source = dirthara::AdoptSource::new(tool);
    match table {
        Some(table) => source.with_table(table),
        None => source,
    }
}
