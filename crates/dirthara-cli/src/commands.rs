//! One function per command: build the configuration, call the library, render the result.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use clap::CommandFactory;
use dirthara::{Command as Plan, Error, ErrorKind, Migrator, Resolution, RollbackScope};
use tokio::sync::watch;

use crate::cli::{Cli, Command, PreviewCommand, RollbackArgs};
use crate::render::Renderer;
use crate::settings::{build_config, new_migration_dir};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Interrupt,
    Terminate,
}

/// A failed command: its error, and the signal that stopped it, if one did.
pub struct Failure {
    pub error: Error,
    pub signal: Option<Signal>,
}

pub async fn execute(cli: Cli, renderer: Renderer) -> Result<(), Failure> {
    let signal = Arc::new(AtomicU8::new(0));
    let result = run(cli, renderer, signal.clone()).await;
    result.map_err(|error| Failure {
        error,
        signal: match signal.load(Ordering::SeqCst) {
            1 => Some(Signal::Interrupt),
            2 => Some(Signal::Terminate),
            _ => None,
        },
    })
}

async fn run(cli: Cli, renderer: Renderer, signal: Arc<AtomicU8>) -> Result<(), Error> {
    match &cli.command {
        Command::Completions { shell } => {
            let mut command = Cli::command();
            clap_complete::generate(*shell, &mut command, "dirthara", &mut std::io::stdout());
            return Ok(());
        }
        Command::Man => {
            let page = clap_mangen::Man::new(Cli::command());
            return match page.render(&mut std::io::stdout()) {
                // `dirthara man | head` closes the pipe early: not an error.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(Error::new(ErrorKind::Config {
                        message: format!("cannot write the manual page: {e}"),
                    }))
                }
                _ => Ok(()),
            };
        }
        Command::New {
            name,
            irreversible,
            mongo,
        } => {
            let config = build_config(&cli.global)?;
            let kind = if *mongo {
                Template::Mongo
            } else {
                Template::Sql
            };
            let created =
                create_migration(&new_migration_dir(&config)?, name, *irreversible, kind)?;
            renderer.created(&created);
            return Ok(());
        }
        _ => {}
    }

    let config = build_config(&cli.global)?;
    let migrator = Migrator::new(config)
        .with_events(renderer.events())
        .with_shutdown(watch_signals(signal));

    match cli.command {
        Command::Migrate => renderer.run(&migrator.migrate().await?),
        Command::Rollback(args) => renderer.run(&migrator.rollback(rollback_scope(&args)).await?),
        Command::Down => renderer.run(&migrator.rollback(RollbackScope::Steps(1)).await?),
        Command::To { target } => renderer.run(&migrator.migrate_to(target).await?),
        Command::Refresh => renderer.run(&migrator.refresh().await?),
        Command::Fresh { force } => {
            confirm_fresh(&migrator, force)?;
            renderer.run(&migrator.fresh().await?)
        }
        Command::Preview { command } => {
            let plan = match command {
                PreviewCommand::Migrate => Plan::Migrate,
                PreviewCommand::Rollback(args) => Plan::Rollback(rollback_scope(&args)),
                PreviewCommand::Down => Plan::Rollback(RollbackScope::Steps(1)),
                PreviewCommand::To { target } => Plan::MigrateTo(target),
                PreviewCommand::Refresh => Plan::Refresh,
                PreviewCommand::Fresh => Plan::Fresh,
            };
            renderer.preview(&migrator.preview(plan).await?)
        }
        Command::Status => renderer.status(&migrator.status().await?),
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
            renderer.run(&migrator.resolve(migration, resolution).await?)
        }
        Command::Baseline { target } => renderer.run(&migrator.baseline(target).await?),
        Command::Completions { .. } | Command::New { .. } | Command::Man => {
            unreachable!("handled above")
        }
    }
    Ok(())
}

fn rollback_scope(args: &RollbackArgs) -> RollbackScope {
    match (args.steps, args.to, args.all) {
        (Some(n), _, _) => RollbackScope::Steps(n as usize),
        (_, Some(v), _) => RollbackScope::To(v),
        (_, _, true) => RollbackScope::All,
        _ => RollbackScope::LastBatch,
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
                    std::process::exit(if kind == 2 { 143 } else { 130 });
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
fn confirm_fresh(migrator: &Migrator, force: bool) -> Result<(), Error> {
    if force {
        return Ok(());
    }
    let config = migrator.config();
    let target = config
        .connection_url(&config.history_connection)
        .map(dirthara::backend::redact_url)
        .unwrap_or_else(|_| config.history_connection.clone());
    if !std::io::stdin().is_terminal() {
        return Err(Error::new(ErrorKind::Config {
            message: format!(
                "`fresh` drops every table of {target}; there is no terminal to confirm on, so pass \
                 --force to confirm"
            ),
        }));
    }
    eprint!("`fresh` drops EVERY table of {target}, then migrates from scratch. Type `yes` to continue: ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if answer.trim() == "yes" {
        Ok(())
    } else {
        Err(Error::new(ErrorKind::Config {
            message: "`fresh` was not confirmed; nothing was changed".into(),
        }))
    }
}

/// What `new` writes.
#[derive(Clone, Copy)]
enum Template {
    Sql,
    Mongo,
}

impl Template {
    fn ext(self) -> &'static str {
        match self {
            Template::Sql => "sql",
            Template::Mongo => "json",
        }
    }

    fn body(self, name: &str, what: &str) -> String {
        match self {
            Template::Sql => format!("-- {name}: {what}\n"),
            // JSON has no comments; an empty command list is refused until it is filled in.
            Template::Mongo => "[]\n".to_string(),
        }
    }
}

/// Writes `<timestamp>_<name>.up.<ext>` (and `.down.<ext>`) into `dir`, creating it if needed.
fn create_migration(
    dir: &std::path::Path,
    name: &str,
    irreversible: bool,
    template: Template,
) -> Result<Vec<PathBuf>, Error> {
    dirthara::source::check_name(name).map_err(|reason| {
        Error::new(ErrorKind::Config {
            message: format!("`new {name}`: {reason}"),
        })
    })?;
    std::fs::create_dir_all(dir).map_err(|e| {
        Error::new(ErrorKind::Config {
            message: format!("cannot create migration directory {}: {e}", dir.display()),
        })
    })?;
    // Two `new` in one second: take the next second, so the version stays a valid time.
    let taken = existing_versions(dir);
    let now = unix_seconds();
    let version = (0..)
        .map(|offset| timestamp_version(now + offset))
        .find(|v| !taken.contains(v))
        .expect("some second is free");
    let ext = template.ext();
    let files: Vec<(PathBuf, String)> = if irreversible {
        vec![(
            dir.join(format!("{version}_{name}.{ext}")),
            template.body(name, "irreversible (no down step)"),
        )]
    } else {
        vec![
            (
                dir.join(format!("{version}_{name}.up.{ext}")),
                template.body(name, "write the change here"),
            ),
            (
                dir.join(format!("{version}_{name}.down.{ext}")),
                template.body(name, "write what reverses the up step here"),
            ),
        ]
    };
    for (path, text) in &files {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| {
                Error::new(ErrorKind::Config {
                    message: format!("cannot create {}: {e}", path.display()),
                })
            })?;
        file.write_all(text.as_bytes()).map_err(|e| {
            Error::new(ErrorKind::Config {
                message: format!("cannot write {}: {e}", path.display()),
            })
        })?;
    }
    Ok(files.into_iter().map(|(path, _)| path).collect())
}

fn existing_versions(dir: &std::path::Path) -> Vec<i64> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.split('_').next()?.parse().ok()
        })
        .collect()
}

fn unix_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// `YYYYMMDDHHMMSS` in UTC for a Unix time (no time-zone database needed).
fn timestamp_version(secs: i64) -> i64 {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    ((year * 100 + month) * 100 + day) * 1_000_000
        + (rem / 3600) * 10_000
        + (rem % 3600 / 60) * 100
        + rem % 60
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_versions_are_valid_times_across_minute_boundaries() {
        // 2024-01-01T00:00:59Z and the next second.
        assert_eq!(timestamp_version(1_704_067_259), 20240101000059);
        assert_eq!(timestamp_version(1_704_067_260), 20240101000100);
    }

    #[test]
    fn civil_dates_are_right() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_513), (2026, 3, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
