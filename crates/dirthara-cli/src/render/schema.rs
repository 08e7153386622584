//! `dump` and `dump --check`: the schema file itself (or its objects as JSON), and what
//! differs from a dump.

use std::path::Path;

use dirthara::{Change, Drift, SchemaDump};

use super::{stdout_line, Renderer};
use crate::cli::OutputFormat;

impl Renderer {
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
        for d in drift {
            let how = match d.change {
                Change::Added => "in the database, not in the file",
                Change::Missing => "in the file, not in the database",
                Change::Changed => "changed",
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
}

fn prefixed(text: &str, mark: char) -> String {
    text.lines()
        .map(|line| format!("{mark}{line}"))
        .collect::<Vec<_>>()
        .join("\n")
}
