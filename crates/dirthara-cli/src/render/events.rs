//! What the engine reports while a command runs: warnings, waits and lock changes on stderr,
//! finished steps on stdout (human mode), or every event as a JSON line (`--output ndjson`).

use std::io::IsTerminal;

use dirthara::{Direction, Event, EventSink};

use super::progress::Progress;
use super::{stderr_line, stdout_line, warning_line, Renderer};
use crate::cli::OutputFormat;

impl Renderer {
    /// The sink the engine reports to while a command runs.
    pub fn events(self) -> EventSink {
        let interactive =
            self.format == OutputFormat::Human && !self.quiet && std::io::stderr().is_terminal();
        if !interactive {
            return EventSink::new(move |event| self.event(event));
        }
        let progress = Progress::default();
        EventSink::new(move |event| progress.around(event, || self.event(event)))
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
            // Like a warning, never silenced: `-q` must not hide that nothing protects the run.
            Event::Unlocked { connection } => stderr_line(&format!(
                "notice: running WITHOUT the migration lock on `{connection}` (locking is off); \
                 nothing stops another runner from migrating at the same time"
            )),
            _ if self.quiet => {}
            Event::ConnectionWaiting {
                connection,
                target,
                reason,
            } => stderr_line(&format!(
                "waiting for database `{connection}` at {target} to accept connections ({reason})"
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
}

fn format_duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.2} s", ms as f64 / 1000.0)
    }
}
