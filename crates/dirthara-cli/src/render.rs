//! Rendering: results to stdout, everything else (notices, progress, warnings, errors) to
//! stderr, so `--output json` prints exactly one JSON document on stdout.

mod events;
mod fleet;
mod progress;
mod reports;
mod schema;

use std::io::Write;

use anstyle::Style;
use serde::Serialize;

use crate::cli::OutputFormat;
use crate::error::CliError;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Renderer {
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

/// A table on stdout: the header, then each row, columns as wide as their widest cell.
fn table<const N: usize>(header: [&str; N], rows: &[[String; N]]) {
    let mut widths = header.map(str::len);
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header = header.map(String::from);
    for row in std::iter::once(&header).chain(rows) {
        let cells: Vec<String> = (row.iter().zip(widths))
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        stdout_line(cells.join("  ").trim_end());
    }
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

/// `warning: ...` on stderr, for what has no code of its own: said in every output format.
fn uncoded_warning(message: impl std::fmt::Display) {
    stderr_line(&format!("{}: {message}", paint("warning", WARNING_STYLE)));
}

impl Renderer {
    /// `warning: environment variable DIRTHARA_X is not a dirthara setting; ...`: said in every
    /// output format (it is stderr), and under `-q`, since it means a setting was not applied.
    pub(crate) fn unknown_setting(&self, unknown: &dirthara::cli_support::UnknownVariable) {
        uncoded_warning(unknown);
    }

    /// `warning: OpenTelemetry ...`: an `OTEL_*` variable that could not be followed, or a
    /// run's telemetry that could not be sent. On stderr in every format; the run goes on.
    #[cfg(feature = "otel")]
    pub(crate) fn telemetry_warning(&self, message: &str) {
        uncoded_warning(message);
    }

    fn json<T: Serialize>(&self, value: &T) {
        match serde_json::to_string_pretty(value) {
            Ok(text) => stdout_line(&text),
            Err(e) => stderr_line(&format!("cannot serialise the result: {e}")),
        }
    }

    fn ndjson_result<T: Serialize>(&self, value: &T) {
        ndjson_line("result", serde_json::to_value(value).unwrap_or_default());
    }

    /// `Error [CODE]: message` on stderr only, in every output format: a failure after the
    /// command's own result or error was printed (writing `--summary-file`), which stdout's
    /// one document must not be followed by.
    pub(crate) fn error_line(&self, error: &CliError) {
        let mut text = format!(
            "{} [{}]: {error}",
            paint("Error", ERROR_STYLE),
            error.code()
        );
        if let CliError::Library(error) = error {
            text.push_str(&library_error_details(error));
        }
        stderr_line(&text);
    }

    /// `Error [CODE]: message`, with any secondary failure and what was completed under it.
    pub(crate) fn error(&self, error: &CliError) {
        self.error_line(error);
        // Programs get the same facts as fields: one document, in place of the result. A
        // fleet's report, already printed, is that document: each target's error is in it.
        match self.format {
            OutputFormat::Json
                if matches!(
                    error,
                    CliError::FleetIncomplete(_) | CliError::LintFindings { .. }
                ) => {}
            // `dump --check`'s and `drift`'s differences, already printed, are their one
            // document.
            OutputFormat::Json
                if [dirthara::Code::SchemaMismatch, dirthara::Code::SchemaDrift]
                    .iter()
                    .any(|code| error.code() == code.as_str()) => {}
            OutputFormat::Json => self.json(&serde_json::json!({ "error": error })),
            OutputFormat::Ndjson => {
                let at = dirthara::format_timestamp(std::time::SystemTime::now());
                let line = serde_json::json!({ "event": "error", "at": at, "error": error });
                stdout_line(&line.to_string());
            }
            OutputFormat::Human => {}
        }
    }
}

/// One `--output ndjson` line that is not an engine event (the `result` that ends the
/// stream): `event` names it, and `at` is stamped as the engine stamps its events.
fn ndjson_line(event: &str, mut doc: serde_json::Value) {
    if let Some(map) = doc.as_object_mut() {
        map.insert("event".into(), event.into());
        let at = dirthara::format_timestamp(std::time::SystemTime::now());
        map.insert("at".into(), at.into());
    }
    stdout_line(&doc.to_string());
}

/// The lines under a library error: failures while cleaning up, and the steps completed
/// before it.
fn library_error_details(error: &dirthara::Error) -> String {
    let mut text = String::new();
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
    text
}
