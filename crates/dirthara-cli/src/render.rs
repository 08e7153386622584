//! Rendering: results to stdout, everything else (notices, progress, warnings, errors) to
//! stderr, so `--output json` prints exactly one JSON document on stdout.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anstyle::Style;
use dirthara::report::{
    ForceUnlockReport, LockReport, LockState, Operation, Preview, RunReport, StatusReport,
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

/// Through `anstream`, which keeps colour only where it belongs: on a terminal, never with
/// `NO_COLOR` (<https://no-color.org>) or `TERM=dumb`, always with `CLICOLOR_FORCE`.
fn stderr_line(line: &str) {
    let _ = writeln!(anstream::stderr().lock(), "{line}");
}

const ERROR_STYLE: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(anstyle::AnsiColor::Red)));
const WARNING_STYLE: Style = Style::new()
    .bold()
    .fg_color(Some(anstyle::Color::Ansi(anstyle::AnsiColor::Yellow)));

fn paint(text: &str, style: Style) -> String {
    format!("{style}{text}{style:#}")
}

/// `warning [CODE]: message`, the prefix coloured on a terminal.
fn warning_line(w: &dirthara::Warning) -> String {
    format!(
        "{} [{}]: {}",
        paint("warning", WARNING_STYLE),
        w.code,
        w.message
    )
}

/// More steps than this get a progress line on a terminal; fewer read fine as plain lines.
const PROGRESS_THRESHOLD: usize = 5;

/// A one-line progress display on stderr, redrawn in place; plain logs never see it.
struct Progress {
    total: usize,
    done: usize,
    current: Option<String>,
    started: Instant,
    step_started: Instant,
    visible: bool,
}

impl Progress {
    fn draw(&mut self) {
        const WIDTH: usize = 24;
        let filled = (self.done * WIDTH).checked_div(self.total).unwrap_or(0);
        let bar: String = "=".repeat(filled) + &" ".repeat(WIDTH - filled);
        let current = self.current.as_deref().unwrap_or("");
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[2K[{bar}] {}/{} {current} ({:.1}s, total {:.1}s)",
            self.done,
            self.total,
            self.step_started.elapsed().as_secs_f64(),
            self.started.elapsed().as_secs_f64()
        );
        let _ = err.flush();
        self.visible = true;
    }

    fn clear(&mut self) {
        if self.visible {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
            self.visible = false;
        }
    }
}

impl Renderer {
    /// The sink the engine reports to while a command runs.
    pub fn events(self) -> EventSink {
        let progress: Arc<Mutex<Option<Progress>>> = Arc::new(Mutex::new(None));
        let interactive =
            self.format == OutputFormat::Human && !self.quiet && std::io::stderr().is_terminal();
        if interactive {
            // Keeps the elapsed time moving during a long migration.
            let ticker = Arc::downgrade(&progress);
            std::thread::spawn(move || loop {
                std::thread::sleep(Duration::from_millis(250));
                let Some(progress) = ticker.upgrade() else {
                    return;
                };
                let mut guard = progress.lock().unwrap();
                if let Some(p) = guard.as_mut().filter(|p| p.visible) {
                    p.draw();
                }
            });
        }
        EventSink::new(move |event| {
            if interactive {
                self.track(&progress, event);
            }
            self.event(event)
        })
    }

    /// Redraws the progress line around the plain output of `event`.
    fn track(&self, progress: &Mutex<Option<Progress>>, event: &Event) {
        let mut guard = progress.lock().unwrap();
        match event {
            Event::Planned { steps, .. } if *steps > PROGRESS_THRESHOLD => {
                *guard = Some(Progress {
                    total: *steps,
                    done: 0,
                    current: None,
                    started: Instant::now(),
                    step_started: Instant::now(),
                    visible: false,
                });
            }
            Event::MigrationStarted {
                version,
                name,
                direction,
                ..
            } => {
                if let Some(p) = guard.as_mut() {
                    p.current = Some(format!("{direction} {version} {name}"));
                    p.step_started = Instant::now();
                    p.draw();
                }
            }
            Event::MigrationFinished { .. } => {
                if let Some(p) = guard.as_mut() {
                    p.done += 1;
                    // The finished line goes to stdout; clear ours first so they do not mix.
                    p.clear();
                    if p.done == p.total {
                        *guard = None;
                    }
                }
            }
            _ => {
                if let Some(p) = guard.as_mut() {
                    p.clear();
                }
            }
        }
    }

    fn event(&self, event: &Event) {
        if self.format == OutputFormat::Ndjson {
            if let Ok(line) = serde_json::to_string(event) {
                stdout_line(&line);
            }
            // Warnings also reach stderr, where people and CI logs look for them.
            if let Event::Warning(w) = event {
                stderr_line(&warning_line(w));
            }
            return;
        }
        match event {
            Event::Warning(w) => stderr_line(&warning_line(w)),
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
                reverses_nothing,
                ..
            } if self.format == OutputFormat::Human => {
                let verb = match direction {
                    Direction::Up => "applied ",
                    Direction::Down => "reverted",
                };
                let name = if *reverses_nothing {
                    format!("{name}, an empty down step: nothing sent")
                } else {
                    name.clone()
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
        if self.quiet {
            return;
        }
        for step in &report.recorded {
            let what = match (report.operation, step.direction) {
                (Operation::Resolve, Direction::Down) => "recorded as rolled back",
                (Operation::Resolve, Direction::Up) => "resolved",
                _ => "recorded as applied (not run)",
            };
            stdout_line(&format!("{what} {} {}", step.version, step.name));
        }
        let summary = match (
            report.applied.len(),
            report.reverted.len(),
            report.recorded.len(),
        ) {
            (0, 0, 0) => match report.operation {
                Operation::Migrate | Operation::To => {
                    "Nothing to migrate: the database is up to date.".to_string()
                }
                Operation::Rollback => "Nothing to roll back.".to_string(),
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
        stdout_line(&summary);
    }

    pub fn preview(&self, preview: &Preview) {
        match self.format {
            OutputFormat::Json => return self.json(preview),
            OutputFormat::Ndjson => return self.ndjson_result(preview),
            OutputFormat::Human => {}
        }
        stderr_line(&format!("note: {}", preview.notice));
        for warning in &preview.warnings {
            stderr_line(&warning_line(warning));
        }
        for (connection, sql) in &preview.init_sql {
            stdout_line(&format!(
                "-- init_sql on every session of connection {connection}:\n{}\n",
                sql.trim_end()
            ));
        }
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
            notes.push(match &step.own_transaction {
                Some(control) => format!("manages its own transaction: {control}"),
                None if step.transactional => "in a transaction".into(),
                None => "no transaction".into(),
            });
            if step.reverses_nothing {
                notes.push("reverses nothing: empty down step".into());
            }
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
                    if m.own_transaction.is_some() {
                        state.push_str(" (manages its own transaction)");
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
            OutputFormat::Json => stdout_line(&serde_json::json!({ "created": paths }).to_string()),
            OutputFormat::Ndjson => {
                stdout_line(&serde_json::json!({ "event": "result", "created": paths }).to_string())
            }
        }
    }

    /// `Error [CODE]: message`, with any secondary failure under it.
    pub fn error(&self, error: &Error) {
        let mut text = format!(
            "{} [{}]: {error}",
            paint("Error", ERROR_STYLE),
            error.code()
        );
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
        // Programs get the same facts as fields: one document, in place of the result.
        match self.format {
            OutputFormat::Json => self.json(&serde_json::json!({ "error": error })),
            OutputFormat::Ndjson => {
                stdout_line(&serde_json::json!({ "event": "error", "error": error }).to_string())
            }
            OutputFormat::Human => {}
        }
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
        LockState::Unknown { reason } => format!("{head} state unknown: {reason}"),
    }
}

fn format_duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.2} s", ms as f64 / 1000.0)
    }
}
