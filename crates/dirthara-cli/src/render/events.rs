//! What the engine reports while a command runs: warnings, waits and lock changes on stderr,
//! finished steps on stdout (human mode), or every event as a JSON line (`--output ndjson`).

use std::io::IsTerminal;

use dirthara::{format_duration, Direction, Event, EventKind, EventSink};

use super::progress::Progress;
use super::{stderr_line, stdout_line, warning_line, Renderer};
use crate::cli::OutputFormat;

impl Renderer {
    /// The sink the engine reports to while a command runs.
    pub(crate) fn events(self) -> EventSink {
        let interactive =
            self.format == OutputFormat::Human && !self.quiet && std::io::stderr().is_terminal();
        if !interactive {
            return EventSink::new(move |event| self.event(event));
        }
        let progress = Progress::default();
        EventSink::new(move |event| progress.around(event, || self.event(event)))
    }

    /// A line for a target that ends is printed only when it failed (every target's with
    /// `-v`), on a terminal (where the bar shows how the fleet goes) or not: a no-op over
    /// 2,000 schemas in a CI log is its totals, not 2,000 lines.
    fn event(&self, event: &Event) {
        if let Some(target) = &event.target {
            if self.format == OutputFormat::Human {
                return self.target_event(target, event);
            }
        }
        self.run_event(event)
    }

    /// An event of one target of a fleet, for people: the target's name before the line, and
    /// only what tells how the fleet goes (its migrations one by one only with `-v`).
    fn target_event(&self, target: &str, event: &Event) {
        let line = |text: &str| stderr_line(&format!("[{target}] {text}"));
        match &event.kind {
            EventKind::Warning(w) => line(&warning_line(w)),
            EventKind::TableLockTimeout { .. } => line(&table_lock_line(&event.kind)),
            EventKind::LockChosen { .. } => line(&lock_chosen_line(&event.kind)),
            EventKind::Unlocked { .. } => line(
                "notice: running WITHOUT the migration lock (locking is off); nothing stops \
                 another runner from migrating at the same time",
            ),
            _ if self.quiet => {}
            EventKind::TargetDeferred { holder } => line(&format!(
                "its lock is held by {}; coming back to it at the end",
                holder.as_deref().unwrap_or("another runner")
            )),
            EventKind::TargetFinished {
                outcome,
                applied,
                reverted,
                error,
                duration,
            } if self.verbose > 0 || *outcome == dirthara::fleet::Outcome::Failed => {
                let mut done = Vec::new();
                if *applied > 0 {
                    done.push(format!("applied {applied}"));
                }
                if *reverted > 0 {
                    done.push(format!("reverted {reverted}"));
                }
                let mut text = match (outcome, done.is_empty()) {
                    (dirthara::fleet::Outcome::Applied, true) => "recorded".to_string(),
                    (dirthara::fleet::Outcome::Applied, false) => done.join(", "),
                    (outcome, true) => outcome.to_string().replace('_', " "),
                    (outcome, false) => format!("{outcome} after {}", done.join(", ")),
                };
                if let Some(code) = error {
                    text.push_str(&format!(" [{code}]"));
                }
                line(&format!("{text} ({})", format_duration(*duration)));
            }
            EventKind::MigrationFinished {
                version,
                name,
                direction,
                duration,
                ..
            } if self.verbose > 0 => line(&format!(
                "{direction} {version} {name} ({})",
                format_duration(*duration)
            )),
            EventKind::LockWaiting { holder, waited, .. } => line(&format!(
                "waiting for its lock, held by {} (waited {})",
                holder
                    .as_ref()
                    .map_or("another session".to_string(), |h| h.to_string()),
                format_duration(*waited)
            )),
            EventKind::WaitStarted { .. } if self.verbose > 0 => {
                line(&wait_started_line(&event.kind))
            }
            EventKind::HistoryWaiting { .. } => line(&history_waiting_line(&event.kind)),
            _ => {}
        }
    }

    fn run_event(&self, event: &Event) {
        if self.format == OutputFormat::Ndjson {
            if let Ok(line) = serde_json::to_string(event) {
                stdout_line(&line);
            }
            // Warnings also reach stderr, where people and CI logs look for them.
            match &event.kind {
                EventKind::Warning(w) => stderr_line(&warning_line(w)),
                EventKind::TableLockTimeout { .. } => stderr_line(&table_lock_line(&event.kind)),
                _ => {}
            }
            return;
        }
        if let Some(line) = never_silenced(&event.kind) {
            return stderr_line(&line);
        }
        match &event.kind {
            _ if self.quiet => {}
            EventKind::ConnectionWaiting {
                connection,
                url,
                reason,
            } => stderr_line(&format!(
                "waiting for database `{connection}` at {url} to accept connections ({reason})"
            )),
            EventKind::LockWaiting {
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
                    "waiting for lock `{lock}` on `{connection}`, held by {holder} (waited {})",
                    format_duration(*waited)
                ))
            }
            // Worth a line only when we had to wait (or the user asked for detail).
            EventKind::LockAcquired {
                lock,
                connection,
                waited,
            } if self.verbose > 0 || waited.as_millis() >= 100 => stderr_line(&format!(
                "acquired lock `{lock}` on `{connection}` after {}",
                format_duration(*waited)
            )),
            EventKind::LockReleased { lock, connection } if self.verbose > 0 => {
                stderr_line(&format!("released lock `{lock}` on `{connection}`"))
            }
            EventKind::WaitStarted { .. } => stderr_line(&wait_started_line(&event.kind)),
            EventKind::HistoryWaiting { .. } => stderr_line(&history_waiting_line(&event.kind)),
            EventKind::TableLockFreed { .. } => stderr_line(&table_lock_freed_line(&event.kind)),
            EventKind::Planned {
                by_digest: true, ..
            } if self.verbose > 0 => stderr_line(
                "nothing to do: the history's digest matches the migrations (every one applied, \
                 unchanged; its records were not read)",
            ),
            EventKind::MigrationStarted {
                version,
                name,
                direction,
                connection,
            } if self.verbose > 0 => stderr_line(&format!(
                "running {direction} {version} {name} on `{connection}`..."
            )),
            EventKind::MigrationFinished {
                version,
                name,
                direction,
                duration,
                reverses_nothing,
                repeatable,
                ..
            } if self.format == OutputFormat::Human => {
                let verb = match direction {
                    Direction::Up => "applied ",
                    Direction::Down => "reverted",
                };
                if *repeatable {
                    let took = format_duration(*duration);
                    return stdout_line(&format!("{verb} R__{name} (repeatable, {took})"));
                }
                let name = if *reverses_nothing {
                    format!("{name}, an empty down step: nothing sent")
                } else {
                    name.clone()
                };
                stdout_line(&format!(
                    "{verb} {version} {name} ({})",
                    format_duration(*duration)
                ))
            }
            EventKind::Dropped {
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

/// `warning [TABLE_LOCK_TIMEOUT]: ...`: one line per attempt that gave way.
fn table_lock_line(event: &EventKind) -> String {
    event.gave_way_message().map_or_else(String::new, |m| {
        format!("warning [TABLE_LOCK_TIMEOUT]: {m}")
    })
}

/// The line of an event that `-q` never hides: warnings, and what a run's operator must not
/// miss — that nothing protects the run, or that it took another lock than the usual one.
fn never_silenced(kind: &EventKind) -> Option<String> {
    match kind {
        EventKind::Warning(w) => Some(warning_line(w)),
        EventKind::TableLockTimeout { .. } => Some(table_lock_line(kind)),
        EventKind::LockChosen { .. } => Some(lock_chosen_line(kind)),
        EventKind::Unlocked { connection } => Some(format!(
            "notice: running WITHOUT the migration lock on `{connection}` (locking is off); \
             nothing stops another runner from migrating at the same time"
        )),
        _ => None,
    }
}

/// `locking = true` took another lock than the database's usual one, and why.
fn lock_chosen_line(event: &EventKind) -> String {
    let EventKind::LockChosen {
        connection, reason, ..
    } = event
    else {
        return String::new();
    };
    format!("notice: on `{connection}`, {reason}")
}

/// `wait`'s first word: what it waits for, and where.
fn wait_started_line(event: &EventKind) -> String {
    let EventKind::WaitStarted {
        version,
        name,
        others,
        url,
        timeout,
    } = event
    else {
        return String::new();
    };
    let others = match others {
        0 => String::new(),
        1 => " and 1 other".to_string(),
        n => format!(" and {n} others"),
    };
    let until = timeout.map_or_else(
        || " (no timeout)".to_string(),
        |t| format!(" (for at most {})", format_duration(t)),
    );
    format!("waiting for migration {version} ({name}){others} on {url}{until}")
}

/// `wait`'s periodic word: how far the history is.
fn history_waiting_line(event: &EventKind) -> String {
    let EventKind::HistoryWaiting {
        applied,
        wanted,
        seen,
        waited,
    } = event
    else {
        return String::new();
    };
    format!(
        "waiting: {applied} of {wanted} migration(s) applied ({seen}); waited {}",
        format_duration(*waited)
    )
}

/// The session a step gave way to is done: the step is tried again before its pause ends.
fn table_lock_freed_line(event: &EventKind) -> String {
    let EventKind::TableLockFreed {
        version,
        name,
        direction,
        blocker,
        pause_left,
        wait,
    } = event
    else {
        return String::new();
    };
    let holder = match blocker.as_ref() {
        Some(b) if b.likely => b.session_id.map_or_else(
            || "the session, which probably held the lock,".to_string(),
            |id| format!("session {id}, which probably held the lock,"),
        ),
        _ => blocker.as_ref().and_then(|b| b.session_id).map_or_else(
            || "the session, which held the lock,".to_string(),
            |id| format!("session {id}, which held the lock,"),
        ),
    };
    let wait = match wait.is_zero() {
        true => "without waiting for the lock".to_string(),
        false => format!("waiting at most {} for the lock", format_duration(*wait)),
    };
    format!(
        "migration {version} ({name}) {direction}: {holder} is done; \
         trying again now, {} before the pause would have ended, {wait}",
        format_duration(*pause_left)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_chosen_instead_of_the_usual_one_is_said_even_under_quiet() {
        let chosen = EventKind::LockChosen {
            connection: "default".into(),
            strategy: dirthara::LockStrategy::Lease,
            reason: "the server is CockroachDB, and its advisory-lock functions are documented \
                     no-ops: taking the lease lock instead of the session lock"
                .into(),
        };
        let line = never_silenced(&chosen).expect("never silenced");
        assert!(
            line.starts_with("notice: on `default`, the server is CockroachDB"),
            "{line}"
        );
        let unlocked = EventKind::Unlocked {
            connection: "default".into(),
        };
        assert!(never_silenced(&unlocked)
            .unwrap()
            .contains("WITHOUT the migration lock"));
        let released = EventKind::LockReleased {
            lock: "dirthara:migrations".into(),
            connection: "default".into(),
        };
        assert_eq!(never_silenced(&released), None);
    }
}
