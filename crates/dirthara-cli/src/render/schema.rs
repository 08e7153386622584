//! `dump`, `dump --check` and `drift`: the schema file itself (or its objects as JSON), and
//! what differs from a dump or a snapshot.

use std::path::Path;

use dirthara::{Change, Config, Drift, DriftReport, SchemaDump, SchemaSnapshot, SquashReport};

use super::{stderr_line, stdout_line, Renderer};
use crate::cli::OutputFormat;

impl Renderer {
    /// The baseline `squash` wrote, and what it means for the files it stands for.
    pub(crate) fn squashed(&self, report: &SquashReport) {
        match self.format {
            OutputFormat::Json => return self.json(report),
            OutputFormat::Ndjson => return self.ndjson_result(report),
            OutputFormat::Human => {}
        }
        stdout_line(&format!(
            "Wrote {}: the baseline of migrations {} ({} schema objects).",
            report.file.display(),
            dirthara::format_squashed_range(&report.squashes),
            report.objects
        ));
        stdout_line(&format!(
            "A new database runs it in one step instead of them, then the migrations after {}. \
             A database that applied them goes on from its own history, so their files may now \
             be archived (moved out of the migration directories; keep them in version control).",
            report.version
        ));
        stdout_line(
            "It holds no rows: data the migrations inserted (seed or reference rows) is not in \
             it; put it in a migration after the baseline if new databases need it.",
        );
    }

    pub(crate) fn dump(&self, dump: &SchemaDump) {
        match self.format {
            OutputFormat::Json => self.json(dump),
            OutputFormat::Ndjson => self.ndjson_result(dump),
            // The file as it is written: its last line ends it.
            OutputFormat::Human => stdout_line(dump.render().trim_end_matches('\n')),
        }
    }

    /// Each object that differs, with its lines (`-` as in the file, `+` as in the
    /// database), and the lines of the applied versions when they differ.
    pub(crate) fn schema_check(&self, file: &Path, drift: &[Drift], versions_diff: Option<&str>) {
        let matches = drift.is_empty() && versions_diff.is_none();
        let result = serde_json::json!({
            "file": file.display().to_string(),
            "matches": matches,
            "drift": drift,
            "versions": versions_diff,
        });
        match self.format {
            OutputFormat::Json => return self.json(&result),
            OutputFormat::Ndjson => return self.ndjson_result(&result),
            OutputFormat::Human => {}
        }
        if matches {
            stdout_line(&format!("The schema matches {}.", file.display()));
            return;
        }
        differences(drift, versions_diff, "the file");
    }

    /// What `drift` found: nothing, or each object that is not as in the reference.
    pub(crate) fn drift(&self, report: &DriftReport) {
        let result = serde_json::json!({
            "connection": report.connection,
            "clean": report.is_clean(),
            "reference": report.reference,
            "drift": report.drift,
            "versions": report.versions,
            "server_now": report.server_now,
        });
        match self.format {
            OutputFormat::Json => return self.json(&result),
            OutputFormat::Ndjson => return self.ndjson_result(&result),
            OutputFormat::Human => {}
        }
        if let (Some(now), dirthara::DriftReference::Snapshot { server, .. }) =
            (&report.server_now, &report.reference)
        {
            stderr_line(&format!(
                "warning: the server is {now}; the snapshot was taken on {server}. A server \
                 renders views and defaults in its own way: what differs may be that alone. \
                 Once checked, `dirthara drift --accept` takes the schema as it is now."
            ));
        }
        if report.is_clean() {
            stdout_line(&format!(
                "No drift: the schema of `{}` is {}.",
                report.connection,
                match &report.reference {
                    dirthara::DriftReference::Dump { name } => format!("the one in {name}"),
                    reference => format!("as {reference} says"),
                }
            ));
            return;
        }
        let expected = match &report.reference {
            dirthara::DriftReference::Dump { .. } => "the file",
            _ => "the snapshot",
        };
        differences(&report.drift, report.versions.as_deref(), expected);
    }

    /// `drift --accept`: the snapshot taken.
    pub(crate) fn accepted(&self, snapshot: &SchemaSnapshot, config: &Config) {
        let result = serde_json::json!({
            "connection": config.history_connection,
            "version": snapshot.version,
            "taken_at": snapshot.taken_at,
            "objects": snapshot.dump.objects().len(),
        });
        match self.format {
            OutputFormat::Json => return self.json(&result),
            OutputFormat::Ndjson => return self.ndjson_result(&result),
            OutputFormat::Human => {}
        }
        let at = match snapshot.version {
            Some(version) => format!("at version {version}"),
            None => "with no migration applied".to_string(),
        };
        let objects = match snapshot.dump.objects().len() {
            1 => "1 object".to_string(),
            n => format!("{n} objects"),
        };
        stdout_line(&format!(
            "Took the schema of `{}` ({objects}, {at}) as the reference `drift` compares with.",
            config.history_connection
        ));
    }
}

/// Each object that differs, `-` as `expected` has it and `+` as the database has it, then
/// the applied versions' lines when they differ.
fn differences(drift: &[Drift], versions_diff: Option<&str>, expected: &str) {
    for d in drift {
        let how = match d.change {
            Change::Added => format!("in the database, not in {expected}"),
            Change::Missing => format!("in {expected}, not in the database"),
            Change::Changed => "changed".to_string(),
        };
        stdout_line(&format!("{}: {how}", d.object));
        let marked = match d.change {
            Change::Added => prefixed(&d.detail, '+'),
            Change::Missing => prefixed(&d.detail, '-'),
            Change::Changed => d.detail.trim_end().to_string(),
        };
        stdout_line(&marked);
        stdout_line("");
    }
    if let Some(diff) = versions_diff {
        stdout_line("applied versions: changed");
        stdout_line(diff.trim_end());
    }
}

fn prefixed(text: &str, mark: char) -> String {
    text.lines()
        .map(|line| format!("{mark}{line}"))
        .collect::<Vec<_>>()
        .join("\n")
}
