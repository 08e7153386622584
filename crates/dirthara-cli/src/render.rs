//! Rendering: results to stdout, everything else (notices, progress, warnings, errors) to
//! stderr, so `--output json` prints exactly one JSON document on stdout.

use std::io::Write;

use dirthara::report::{
    ForceUnlockReport, LockReport, LockState, Preview, RunReport, StatusReport,
};
use dirthara::{Direction, Error, Event, EventSink};
use serde::Serialize;

use crate::cli::OutputFormat;

#[derive(Debug, Clone, Copy)]
pub struct Renderer {
    pub format: OutputFormat,
    pub quiet: bool,
    pub verbose: u8,
}

fn stdout_line(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) is not worth a panic.
    let _ = writeln!(out, "{line}");
}

fn stderr_line(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

impl Renderer {
    /// The sink the engine reports to while a command runs.
    pub fn events(self) -> EventSink {
        EventSink::new(move |event| self.event(event))
    }

    fn event(&self, event: &Event) {
        if self.format == OutputFormat::Ndjson {
            if let Ok(line) = serde_json::to_string(event) {
                stdout_line(&line);
            }
            // Warnings also reach stderr, where people and CI logs look for them.
            if let Event::Warning(w) = event {
                stderr_line(&w.to_string());
            }
            return;
        }
        match event {
            Event::Warning(w) => stderr_line(&w.to_string()),
            _ if self.quiet => {}
            Event::ConnectionWaiting {
                connection,
                target,
                reason,
            } => stderr_line(&format!(
                "waiting for database `{connection}` at {target} to accept connections ({reason})"
            )),
            Event::Unlocked { connection } => stderr_line(&format!(
                "notice: running WITHOUT the migration lock on `{connection}` (locking is off); \
                 nothing stops another runner from migrating at the same time"
            )),
            Event::LockWaiting {
                lock,
                connection,
                holder,
                waited,
            } => {
                let holder = holder
                    .as_ref()
                    .map(|h| h.to_string())
                    .unwrap_or_else(|| "another session".to_string());
                stderr_line(&format!(
                    "waiting for lock `{lock}` on `{connection}`, held by {holder} (waited {:.0}s)",
                    waited.as_secs_f64()
                ))
            }
            // Worth a line only when we had to wait (or the user asked for detail).
            Event::LockAcquired {
                lock,
                connection,
                waited,
            } if self.verbose > 0 || waited.as_millis() >= 100 => stderr_line(&format!(
                "acquired lock `{lock}` on `{connection}` after {:.1}s",
                waited.as_secs_f64()
            )),
            Event::LockReleased { lock, connection } if self.verbose > 0 => {
                stderr_line(&format!("released lock `{lock}` on `{connection}`"))
            }
            Event::MigrationStarted {
                version,
                name,
                direction,
                connection,
            } if self.verbose > 0 => stderr_line(&format!(
                "running {direction} {version} {name} on `{connection}`..."
            )),
            Event::MigrationFinished {
                version,
                name,
                direction,
                duration,
            } if self.format == OutputFormat::Human => {
                let verb = match direction {
                    Direction::Up => "applied ",
                    Direction::Down => "reverted",
                };
                stdout_line(&format!(
                    "{verb} {version} {name} ({})",
                    format_duration(duration.as_millis() as u64)
                ))
            }
            Event::Dropped {
                connection,
                objects,
            } if self.format == OutputFormat::Human => stdout_line(&format!(
                "dropped {} object(s) on `{connection}`{}",
                objects.len(),
                if objects.is_empty() {
                    String::new()
                } else {
                    format!(": {}", objects.join(", "))
                }
            )),
            _ => {}
        }
    }

    fn json<T: Serialize>(&self, value: &T) {
        match serde_json::to_string_pretty(value) {
            Ok(text) => stdout_line(&text),
            Err(e) => stderr_line(&format!("cannot serialise the result: {e}")),
        }
    }

    fn ndjson_result<T: Serialize>(&self, value: &T) {
        let mut doc = serde_json::to_value(value).unwrap_or_default();
        if let Some(map) = doc.as_object_mut() {
            map.insert("event".into(), "result".into());
        }
        stdout_line(&doc.to_string());
    }

    pub fn run(&self, report: &RunReport) {
        match self.format {
            OutputFormat::Json => return self.json(report),
            OutputFormat::Ndjson => return self.ndjson_result(report),
            OutputFormat::Human => {}
        }
        for step in &report.recorded {
            let what = match (report.operation.as_str(), step.direction) {
                ("resolve", Direction::Down) => "recorded as rolled back",
                ("resolve", Direction::Up) => "resolved",
                _ => "recorded as applied (not run)",
            };
            stdout_line(&format!("{what} {} {}", step.version, step.name));
        }
        let summary = match (
            report.applied.len(),
            report.reverted.len(),
            report.recorded.len(),
        ) {
            (0, 0, 0) => match report.operation.as_str() {
                "migrate" | "to" => "Nothing to migrate: the database is up to date.".to_string(),
                "rollback" => "Nothing to roll back.".to_string(),
                _ => "Nothing to do.".to_string(),
            },
            (applied, reverted, recorded) => {
                let mut parts = Vec::new();
                if reverted > 0 {
                    parts.push(format!("reverted {reverted}"));
                }
                if applied > 0 {
                    parts.push(format!(
                        "applied {applied} in batch {}",
                        report.batch.unwrap_or_default()
                    ));
                }
                if recorded > 0 {
                    parts.push(format!("recorded {recorded}"));
                }
                let mut text = parts.join(", ");
                text[..1].make_ascii_uppercase();
                format!("{text}.")
            }
        };
        if !self.quiet {
            stdout_line(&summary);
        }
    }

    pub fn preview(&self, preview: &Preview) {
        match self.format {
            OutputFormat::Json => return self.json(preview),
            OutputFormat::Ndjson => return self.ndjson_result(preview),
            OutputFormat::Human => {}
        }
        stderr_line(
            "note: this preview took no lock; another runner may change the database before you act on it",
        );
        if preview.drop_all {
            stdout_line(
                "-- drop every table, view and sequence of the history connection's database",
            );
        }
        if preview.steps.is_empty() && !preview.drop_all {
            stdout_line(&format!("`{}` would do nothing.", preview.operation));
            return;
        }
        for step in &preview.steps {
            let mut notes = vec![format!("connection {}", step.connection)];
            notes.push(if step.transactional {
                "in a transaction".into()
            } else {
                "no transaction".into()
            });
            if step.out_of_order {
                notes.push("OUT OF ORDER".into());
            }
            stdout_line(&format!(
                "-- {} {} {} ({})",
                step.direction,
                step.version,
                step.name,
                notes.join(", ")
            ));
            stdout_line(step.sql.trim_end());
            stdout_line("");
        }
    }

    pub fn status(&self, status: &StatusReport) {
        match self.format {
            OutputFormat::Json => return self.json(status),
            OutputFormat::Ndjson => return self.ndjson_result(status),
            OutputFormat::Human => {}
        }
        if status.migrations.is_empty() {
            stdout_line("No migrations found.");
        } else {
            let rows: Vec<[String; 5]> = status
                .migrations
                .iter()
                .map(|m| {
                    let mut state = serde_json::to_value(m.state)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default();
                    if m.out_of_order {
                        state.push_str(" (out of order)");
                    }
                    [
                        m.version.to_string(),
                        m.name.clone(),
                        state,
                        m.batch.map(|b| b.to_string()).unwrap_or_default(),
                        m.applied_at.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            let header = ["VERSION", "NAME", "STATE", "BATCH", "APPLIED AT"].map(String::from);
            let mut widths = header.clone().map(|h| h.len());
            for row in &rows {
                for (w, cell) in widths.iter_mut().zip(row) {
                    *w = (*w).max(cell.len());
                }
            }
            for row in std::iter::once(&header).chain(&rows) {
                let cells: Vec<String> = row
                    .iter()
                    .zip(widths)
                    .map(|(cell, w)| format!("{cell:<w$}"))
                    .collect();
                stdout_line(cells.join("  ").trim_end());
            }
        }
        stdout_line("");
        stdout_line(&lock_line(&status.lock));
    }

    pub fn lock(&self, lock: &LockReport) {
        match self.format {
            OutputFormat::Json => self.json(lock),
            OutputFormat::Ndjson => self.ndjson_result(lock),
            OutputFormat::Human => stdout_line(&lock_line(lock)),
        }
    }

    pub fn force_unlock(&self, report: &ForceUnlockReport) {
        match self.format {
            OutputFormat::Json => return self.json(report),
            OutputFormat::Ndjson => return self.ndjson_result(report),
            OutputFormat::Human => {}
        }
        if report.released.is_empty() {
            stdout_line(&format!("{}\nNothing to release.", lock_line(&report.lock)));
        } else {
            for what in &report.released {
                stdout_line(&format!("released lock `{}`: {what}", report.lock.name));
            }
        }
    }

    pub fn created(&self, paths: &[std::path::PathBuf]) {
        let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        match self.format {
            OutputFormat::Human => {
                for p in &paths {
                    stdout_line(&format!("created {p}"));
                }
            }
            _ => stdout_line(&serde_json::json!({ "created": paths }).to_string()),
        }
    }

    /// `Error [CODE]: message`, with any secondary failure under it.
    pub fn error(&self, error: &Error) {
        let mut text = format!("Error [{}]: {error}", error.code());
        let mut secondary = error.secondary();
        while let Some(next) = secondary {
            text.push_str(&format!(
                "\n  while cleaning up, also: Error [{}]: {next}",
                next.code()
            ));
            secondary = next.secondary();
        }
        if !error.completed().is_empty() {
            let done: Vec<String> = error
                .completed()
                .iter()
                .map(|s| format!("{} {} {}", s.direction, s.version, s.name))
                .collect();
            text.push_str(&format!(
                "\n  completed and recorded before the error: {}",
                done.join(", ")
            ));
        }
        stderr_line(&text);
    }
}

fn lock_line(lock: &LockReport) -> String {
    let head = format!(
        "lock `{}` on `{}` ({}):",
        lock.name, lock.connection, lock.strategy
    );
    match &lock.state {
        LockState::Free => format!("{head} free"),
        LockState::Held { holder, .. } => format!("{head} held by {holder}"),
        LockState::Stale { holder } => {
            format!("{head} stale (lease expired), last held by {holder}")
        }
        LockState::Unsupported { reason } => format!("{head} none: {reason}"),
        LockState::Off => format!("{head} off (locking = false)"),
    }
}

fn format_duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.2} s", ms as f64 / 1000.0)
    }
}
