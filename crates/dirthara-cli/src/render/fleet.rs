//! A fleet run's result: one JSON document, a last `result` line, or for people a table of
//! every target that was not simply fine and a line of totals (or where the fleet stands).

use dirthara::fleet::{FleetCommand, FleetReport, Outcome, TargetReport, TargetSource};
use dirthara::{format_duration, WaitReport};

use super::{stdout_line, table, Renderer};
use crate::cli::OutputFormat;

impl Renderer {
    pub(crate) fn fleet(&self, report: &FleetReport, source: &TargetSource) {
        match self.format {
            OutputFormat::Json => return self.json(report),
            OutputFormat::Ndjson => return self.ndjson_result(report),
            OutputFormat::Human => {}
        }
        // `-q` keeps what a read-only command is for; of a changing one, only its errors.
        let reads = matches!(report.operation.name(), "status" | "preview" | "wait");
        if self.quiet && !reads {
            return;
        }
        let rows: Vec<[String; 3]> = (report.not_fine())
            .map(|t| [t.name.clone(), t.outcome.to_string(), detail(t, source)])
            .collect();
        if !rows.is_empty() {
            table(["TARGET", "OUTCOME", "DETAIL"], &rows);
        }
        let totals = &report.totals;
        let line = match &report.status {
            Some(status) => format!("{} target(s): {status}", totals.targets),
            // `drift`: 1,000 targets: 997 clean, 3 drifted.
            None if report.operation == FleetCommand::Drift => format!(
                "{} target(s): {} clean, {} drifted, {} failed, {} skipped",
                totals.targets,
                totals.up_to_date,
                totals.drifted,
                totals.failed - totals.drifted,
                totals.skipped
            ),
            None if report.operation == FleetCommand::AcceptSchema => format!(
                "{} target(s): {} took their schema as the reference, {} failed, {} skipped",
                totals.targets, totals.up_to_date, totals.failed, totals.skipped
            ),
            None => {
                let mut parts = vec![
                    format!("{} applied", totals.applied),
                    format!("{} up to date", totals.up_to_date),
                ];
                if totals.pending > 0 {
                    parts.push(format!("{} with something to do", totals.pending));
                }
                parts.push(format!("{} failed", totals.failed));
                parts.push(format!("{} skipped", totals.skipped));
                let mut line = format!("{} target(s): {}", totals.targets, parts.join(", "));
                if totals.migrations_applied > 0 {
                    line.push_str(&format!(
                        "; {} migration(s) applied",
                        totals.migrations_applied
                    ));
                }
                if totals.migrations_reverted > 0 {
                    line.push_str(&format!("; {} reverted", totals.migrations_reverted));
                }
                line
            }
        };
        stdout_line(&line);
    }

    pub(crate) fn waited(&self, report: &WaitReport) {
        match self.format {
            OutputFormat::Json => return self.json(report),
            OutputFormat::Ndjson => return self.ndjson_result(report),
            OutputFormat::Human => {}
        }
        if self.quiet {
            return;
        }
        let waited = format_duration(std::time::Duration::from_millis(report.waited_ms));
        stdout_line(&match report.until {
            // One migration waited for: `--until`, or the only one of the files.
            Some(version) if report.applied == 1 => {
                format!("The database has migration {version} applied (waited {waited}).")
            }
            Some(version) => format!(
                "The database has every migration up to {version} applied (waited {waited})."
            ),
            None => "There are no migrations to wait for.".to_string(),
        });
    }
}

/// What to say of a target that was not simply fine.
fn detail(target: &TargetReport, source: &TargetSource) -> String {
    let mut parts = Vec::new();
    if target.dirty_before_run {
        parts.push("dirty before this run (not counted toward --max-failures)".to_string());
    }
    if let Some(note) = &target.note {
        parts.push(note.clone());
    }
    if target.deferred {
        parts.push("its lock was held by another runner: done last".to_string());
    }
    if let Some(status) = &target.status {
        if let Some(newest) = status.newest {
            parts.push(format!("at {newest}"));
        }
        if status.pending > 0 {
            parts.push(format!("{} pending", status.pending));
        }
        match (&status.dirty_cause, status.dirty) {
            (Some(cause), _) => parts.push(format!("dirty: {cause}")),
            (None, true) => parts.push("dirty".into()),
            (None, false) => {}
        }
        if status.drifted > 0 {
            parts.push(format!("{} missing or changed", status.drifted));
        }
        if status.locked {
            parts.push("locked".into());
        }
    }
    if let Some(preview) = &target.preview {
        parts.push(format!("{} step(s) to run", preview.steps.len()));
        // Tenants differ in size: the verdict is this target's.
        let refusing: Vec<String> = (preview.steps.iter())
            .flat_map(|step| &step.findings)
            .filter(|finding| finding.refuses)
            .map(|finding| {
                let size = (finding.bytes).map_or_else(String::new, |bytes| {
                    format!(" ({})", dirthara::cli_support::human_bytes(bytes))
                });
                let table = finding.table.as_deref().unwrap_or("?");
                format!("{} on `{table}`{size}", finding.rule)
            })
            .collect();
        if !refusing.is_empty() {
            parts.push(format!(
                "would refuse (BLOCKING_DDL): {}",
                refusing.join(", ")
            ));
        }
    }
    if !target.applied.is_empty() {
        parts.push(format!("{} applied", target.applied.len()));
    }
    if let Some(drift) = &target.drift {
        let objects: Vec<String> = (drift.drift.iter())
            .map(|d| format!("{} {}", d.object, change_word(d.change)))
            .chain(
                drift
                    .versions
                    .as_ref()
                    .map(|_| "applied versions changed".into()),
            )
            .collect();
        if !objects.is_empty() {
            parts.push(objects.join(", "));
        }
    }
    match (&target.error, target.outcome) {
        (Some(error), _) => {
            let message = crate::fleet::for_target(source, &target.name, &error.to_string());
            let first = message.lines().next().unwrap_or_default();
            parts.push(format!("[{}] {first}", error.code()));
        }
        (None, Outcome::Skipped) => parts.push("not started".into()),
        _ => {}
    }
    parts.join("; ")
}

fn change_word(change: dirthara::Change) -> &'static str {
    match change {
        dirthara::Change::Added => "added",
        dirthara::Change::Missing => "missing",
        dirthara::Change::Changed => "changed",
    }
}
