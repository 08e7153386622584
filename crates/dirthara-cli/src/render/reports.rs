//! The result of a command that succeeded: one JSON document (`--output json`), a last
//! `"event": "result"` line (`--output ndjson`), or lines and tables for people.

use dirthara::AdoptionReport;
use dirthara::Direction;
use dirthara::{
    ForceUnlockReport, LockReport, LockState, Operation, Preview, RunReport, StatusReport,
};

use super::{stderr_line, stdout_line, warning_line, Renderer};
use crate::cli::OutputFormat;

impl Renderer {
    pub(crate) fn run(&self, report: &RunReport) {
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
                let repeatables = report.applied.iter().filter(|s| s.repeatable).count();
                let versioned = applied - repeatables;
                if versioned > 0 {
                    parts.push(format!(
                        "applied {versioned} in batch {}",
                        report.batch.unwrap_or_default()
                    ));
                }
                match repeatables {
                    0 => {}
                    1 => parts.push("applied 1 repeatable".to_string()),
                    n => parts.push(format!("applied {n} repeatables")),
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

    pub(crate) fn preview(&self, preview: &Preview) {
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
            match (step.table_lock_timeout, &step.retried) {
                (Some(timeout), Some(retried)) => notes.push(format!(
                    "gives way after waiting {}{} for {}; retried {retried}",
                    dirthara::format_duration(timeout),
                    step.table_lock_timeout_rounded_from
                        .map_or_else(String::new, |asked| format!(
                            " (the {} asked for, rounded up: the database counts whole \
                             seconds)",
                            dirthara::format_duration(asked)
                        )),
                    match step.table_locks {
                        Some(locks) => format!("its {locks} table locks in all, each its share"),
                        None => "a table lock".to_string(),
                    }
                )),
                (None, Some(why)) => notes.push(why.clone()),
                _ => {}
            }
            let what = match step.repeatable {
                true => format!("R__{} (repeatable, after the versioned steps)", step.name),
                false => format!("{} {}", step.version, step.name),
            };
            stdout_line(&format!(
                "-- {} {what} ({})",
                step.direction,
                notes.join(", ")
            ));
            for finding in &step.findings {
                let verdict = match (&finding.allowed, finding.refuses) {
                    (Some(reason), _) => format!("allowed: {reason}"),
                    (None, true) => "WOULD REFUSE THE RUN (BLOCKING_DDL)".to_string(),
                    (None, false) => finding.severity.as_str().to_string(),
                };
                stdout_line(&format!("-- ! {finding} [{verdict}]"));
                stdout_line(&format!("--   fix: {}", finding.fix));
            }
            stdout_line(step.sql.trim_end());
            stdout_line("");
        }
    }

    /// `status`; with `dirty_only` (`--dirty`), `status` holds only the dirty migrations.
    pub(crate) fn status(&self, status: &StatusReport, dirty_only: bool) {
        match self.format {
            OutputFormat::Json => return self.json(status),
            OutputFormat::Ndjson => return self.ndjson_result(status),
            OutputFormat::Human => {}
        }
        if status.migrations.is_empty() && dirty_only {
            stdout_line("No migration is dirty.");
        } else if status.migrations.is_empty() {
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
                    if let Some(range) = &m.squashes {
                        state.push_str(&format!(" (baseline of {range})"));
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
            super::table(["VERSION", "NAME", "STATE", "BATCH", "APPLIED AT"], &rows);
            // Why each dirty migration is dirty, where the failing run could record it.
            for m in &status.migrations {
                if let Some(failure) = &m.failure {
                    stdout_line(&format!("  {} left dirty by: {failure}", m.version));
                }
            }
        }
        if !status.repeatables.is_empty() {
            stdout_line("");
            let rows: Vec<[String; 3]> = (status.repeatables.iter())
                .map(|r| {
                    [
                        format!("R__{}", r.name),
                        r.state.as_str().to_string(),
                        r.applied_at.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            super::table(["REPEATABLE", "STATE", "LAST APPLIED AT"], &rows);
            for r in &status.repeatables {
                let failed = r.state == dirthara::RepeatableState::Failed;
                if let Some(failure) = r.failure.as_ref().filter(|_| failed) {
                    stdout_line(&format!("  R__{} failed: {failure}", r.name));
                }
            }
        }
        stdout_line("");
        stdout_line(&lock_line(&status.lock));
    }

    pub(crate) fn lock(&self, lock: &LockReport) {
        match self.format {
            OutputFormat::Json => self.json(lock),
            OutputFormat::Ndjson => self.ndjson_result(lock),
            OutputFormat::Human => stdout_line(&lock_line(lock)),
        }
    }

    pub(crate) fn force_unlock(&self, report: &ForceUnlockReport) {
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

    /// `new`: the files written (stdout), and what to know about them (stderr).
    pub(crate) fn created(&self, paths: &[std::path::PathBuf], notes: &[String]) {
        let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        match self.format {
            OutputFormat::Human => {
                for p in &paths {
                    stdout_line(&format!("created {p}"));
                }
            }
            OutputFormat::Json => stdout_line(&serde_json::json!({ "created": paths }).to_string()),
            OutputFormat::Ndjson => {
                super::ndjson_line("result", serde_json::json!({ "created": paths }))
            }
        }
        if !self.quiet {
            for note in notes {
                stderr_line(&format!("note: {note}"));
            }
        }
    }

    /// `baseline --from` and its preview: the records, then the notes (stderr), then a summary.
    pub(crate) fn adoption(&self, report: &AdoptionReport) {
        match self.format {
            OutputFormat::Json => return self.json(report),
            OutputFormat::Ndjson => return self.ndjson_result(report),
            OutputFormat::Human => {}
        }
        // A preview is the answer itself, so it prints even with --quiet (as `preview` does).
        if self.quiet && !report.preview {
            return;
        }
        if let Some(notice) = &report.notice {
            stderr_line(&format!("note: {notice}"));
        }
        let what = if report.preview {
            "would record as applied"
        } else {
            "recorded as applied (not run)"
        };
        for record in &report.recorded {
            stdout_line(&format!("{what} {} {}", record.version, record.name));
        }
        for name in &report.repeatables {
            stdout_line(&format!(
                "{what} R__{name} (repeatable, unchanged since {} applied it)",
                report.from
            ));
        }
        for note in &report.notes {
            stderr_line(&format!("note: {note}"));
        }
        let source = format!("{}'s `{}`", report.from, report.table);
        let summary = match (report.recorded.len(), report.preview) {
            (0, _) if !report.repeatables.is_empty() => format!(
                "{} {} repeatable migration(s) from {source}.",
                if report.preview {
                    "Would adopt"
                } else {
                    "Adopted"
                },
                report.repeatables.len()
            ),
            (0, _) => format!("Nothing to adopt from {source}."),
            (n, true) => format!(
                "Would adopt {n} migration(s) from {source} as batch {}; nothing was changed.",
                report.batch.unwrap_or_default()
            ),
            (n, false) => format!(
                "Adopted {n} migration(s) from {source} as batch {}; {} was left as it was.",
                report.batch.unwrap_or_default(),
                report.table
            ),
        };
        stdout_line(&summary);
    }
}

fn lock_line(lock: &LockReport) -> String {
    let strategy = lock.strategy.map_or("none", |s| s.name());
    let head = format!(
        "lock `{}` on `{}` ({strategy}):",
        lock.name, lock.connection
    );
    let mut line = format!("{head} {}", state_words(&lock.state));
    for other in &lock.others {
        line.push_str(&format!(
            "\n  also: the {} is {} (taken by a runner configured with `locking = \"{}\"`)",
            match other.strategy {
                dirthara::LockStrategy::Lease => "lease",
                _ => "session lock",
            },
            state_words(&other.state),
            other.strategy.name()
        ));
    }
    line
}

/// A lock's state, after the head that names the lock.
fn state_words(state: &LockState) -> String {
    match state {
        LockState::Free => "free".to_string(),
        LockState::Held { holder, .. } => format!("held by {holder}"),
        LockState::Stale { holder } => format!("stale (lease expired), last held by {holder}"),
        LockState::Unsupported { reason } => format!("none: {reason}"),
        LockState::Off => "off (locking = false)".to_string(),
        LockState::Unknown { reason } => format!("state unknown: {reason}"),
        // A state a newer library reports that this renderer does not know by name.
        other => format!("{other:?}"),
    }
}
