//! `--summary-file FILE`: how the command ended, as one line of JSON written to FILE when it
//! ends, whether it succeeded or failed. Made for a Kubernetes Job's
//! `/dev/termination-log`, which `kubectl describe pod` and the pod's status show.
//!
//! The line is a summary, not the `--output json` document: Kubernetes keeps only the last
//! 4096 bytes of a termination message, and a fleet's document (or a run of hundreds of
//! migrations) is longer; a JSON line cut at its start cannot be read at all. So the line
//! holds the counts (a run's, a fleet's `totals` as `--output json` has them), the error's
//! `code` and `message` as `--output json` prints them (messages cut to a length), and the
//! failed targets of a fleet as long as they fit; it is never longer than [`MAX_LINE`].
//! Nothing in it can hold a password: messages and target names are the ones printed, with
//! every URL masked.

use std::path::Path;

use dirthara::fleet::{FleetReport, FleetTotals, Outcome};
use dirthara::RunReport;
use serde::Serialize;

use crate::cli::Command;
use crate::error::{CliError, IoAction};
use crate::exit::Failure;
use crate::render::Renderer;

/// The longest line written: what Kubernetes keeps of a termination message (it reads the
/// file's last 4096 bytes), with room for the newline.
pub(crate) const MAX_LINE: usize = 4095;

/// The longest error message kept, in characters; a longer one ends with `…`.
const MAX_MESSAGE: usize = 400;

/// The commands whose result is a run's report (`baseline` without `--from`).
const RUNS: [&str; 8] = [
    "migrate", "rollback", "down", "to", "refresh", "fresh", "baseline", "resolve",
];

/// What the command found besides its error, recorded as results come in.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    details: Option<Details>,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Details {
    Run {
        applied: usize,
        reverted: usize,
        recorded: usize,
        batch: Option<i64>,
    },
    Fleet {
        #[serde(skip_serializing_if = "Option::is_none")]
        shard: Option<String>,
        totals: FleetTotals,
        /// The failed targets, in the order given, as many as fit.
        failed: Vec<FailedTarget>,
        /// Failed targets left out of `failed` to keep the line short.
        #[serde(skip_serializing_if = "is_zero")]
        failed_not_listed: usize,
    },
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Serialize)]
struct FailedTarget {
    name: String,
    code: &'static str,
    message: String,
}

/// The error as `--output json` names it: its code and its message (cut to a length).
#[derive(Debug, Serialize)]
struct ErrorLine {
    code: &'static str,
    message: String,
}

impl Facts {
    /// A single run's counts.
    pub(crate) fn ran(&mut self, report: &RunReport) {
        self.details = Some(Details::Run {
            applied: report.applied.len(),
            reverted: report.reverted.len(),
            recorded: report.recorded.len(),
            batch: report.batch,
        });
    }

    /// A fleet's totals and failed targets, on success and failure alike.
    pub(crate) fn fleet(&mut self, report: &FleetReport, shard: Option<dirthara::fleet::Shard>) {
        let failed = (report.targets.iter())
            .filter(|t| t.outcome == Outcome::Failed)
            .filter_map(|t| {
                let error = t.error.as_ref()?;
                Some(FailedTarget {
                    name: clip(&t.name),
                    code: error.code().as_str(),
                    message: clip(&error.to_string()),
                })
            })
            .collect();
        self.details = Some(Details::Fleet {
            shard: shard.map(|s| s.to_string()),
            totals: report.totals.clone(),
            failed,
            failed_not_listed: 0,
        });
    }
}

/// The summary line of `command`, which ended with `outcome` and exits with `exit_code`:
/// one line of JSON, at most [`MAX_LINE`] bytes, without its newline.
pub(crate) fn line(
    command: &str,
    outcome: &Result<(), Failure>,
    exit_code: u8,
    facts: Facts,
) -> String {
    let (state, error) = match outcome {
        Ok(()) => ("succeeded", None),
        Err(failure) => (
            if failure.error.is_interrupted() {
                "interrupted"
            } else {
                "failed"
            },
            Some(error_line(&failure.error)),
        ),
    };
    let mut details = facts.details;
    // A run that failed: what it completed and recorded before the error (nothing, when it
    // failed before its first step).
    if let (None, Err(failure)) = (&details, outcome) {
        if RUNS.contains(&command) {
            let completed = match &failure.error {
                CliError::Library(error) => error.completed(),
                _ => &[],
            };
            let up = (completed.iter())
                .filter(|step| step.direction == dirthara::Direction::Up)
                .count();
            details = Some(Details::Run {
                applied: up,
                reverted: completed.len() - up,
                recorded: 0,
                batch: None,
            });
        }
    }
    let mut summary = Summary {
        command,
        outcome: state,
        exit_code,
        details,
        error,
    };
    let mut text = summary.to_line();
    while text.len() > MAX_LINE {
        // Only a fleet's list of failed targets grows with the fleet: shorten it.
        let Some(Details::Fleet {
            failed,
            failed_not_listed,
            ..
        }) = &mut summary.details
        else {
            break;
        };
        if failed.pop().is_none() {
            break;
        }
        *failed_not_listed += 1;
        text = summary.to_line();
    }
    text
}

#[derive(Debug, Serialize)]
struct Summary<'a> {
    command: &'a str,
    /// `succeeded`, `failed` or `interrupted`.
    outcome: &'static str,
    exit_code: u8,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    details: Option<Details>,
    error: Option<ErrorLine>,
}

impl Summary<'_> {
    fn to_line(&self) -> String {
        // Serialising these plain fields cannot fail; JSON strings escape every newline.
        serde_json::to_string(self).unwrap_or_default()
    }
}

fn error_line(error: &CliError) -> ErrorLine {
    ErrorLine {
        code: error.code(),
        message: clip(&error.to_string()),
    }
}

/// `text` cut to [`MAX_MESSAGE`] characters, ending with `…` when cut.
fn clip(text: &str) -> String {
    match text.char_indices().nth(MAX_MESSAGE) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

/// Writes the summary line of the command that ended with `outcome` to `path` (replacing
/// what it held), and returns the exit code. A file that cannot be written is an `IO_ERROR`
/// naming it, said after the command's own error, which keeps its exit code.
pub(crate) fn write_summary(
    path: &Path,
    command: &str,
    outcome: &Result<(), Failure>,
    code: u8,
    facts: Facts,
    renderer: &Renderer,
) -> u8 {
    let line = line(command, outcome, code, facts);
    match std::fs::write(path, format!("{line}\n")) {
        Ok(()) => code,
        Err(e) => {
            let action = IoAction::WriteSummary(path.to_path_buf());
            renderer.error_line(&CliError::io(action)(e));
            crate::exit::summary_not_written(code)
        }
    }
}

/// The command's name, as typed (`migrate` for `up` too).
pub(crate) fn command_name(command: &Command) -> &'static str {
    match command {
        Command::Migrate => "migrate",
        Command::Rollback(_) => "rollback",
        Command::Down => "down",
        Command::To { .. } => "to",
        Command::Refresh => "refresh",
        Command::Fresh { .. } => "fresh",
        Command::Preview { .. } => "preview",
        Command::Status { .. } => "status",
        Command::Unlock { .. } => "unlock",
        Command::Dump { .. } => "dump",
        Command::Drift { .. } => "drift",
        Command::Squash { .. } => "squash",
        Command::New { .. } => "new",
        Command::Resolve { .. } => "resolve",
        Command::Baseline(_) => "baseline",
        Command::Wait { .. } => "wait",
        Command::Lint(_) => "lint",
        Command::Completions { .. } => "completions",
        Command::Man => "man",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(message: &str) -> Result<(), Failure> {
        Err(Failure {
            error: CliError::from(dirthara::Error::new(dirthara::ErrorKind::Config {
                message: message.into(),
            })),
            signal: None,
        })
    }

    #[test]
    fn a_success_is_one_line_with_no_error() {
        let line = line("status", &Ok(()), 0, Facts::default());
        assert_eq!(
            line,
            r#"{"command":"status","outcome":"succeeded","exit_code":0,"error":null}"#
        );
    }

    #[test]
    fn a_failure_carries_the_code_and_a_message_cut_to_a_length_on_one_line() {
        let long = format!("first line\nsecond line {}", "é".repeat(1000));
        let line = line("migrate", &failure(&long), 1, Facts::default());
        assert!(!line.contains('\n'), "{line}");
        let doc: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(doc["outcome"], "failed");
        // Nothing was completed before the error.
        assert_eq!((&doc["applied"], &doc["reverted"]), (&0.into(), &0.into()));
        assert_eq!(doc["exit_code"], 1);
        assert_eq!(doc["error"]["code"], "CONFIG_ERROR");
        let message = doc["error"]["message"].as_str().unwrap();
        assert_eq!(message.chars().count(), MAX_MESSAGE + 1);
        assert!(message.starts_with("first line\nsecond line é") && message.ends_with('…'));
    }

    #[test]
    fn a_fleets_failed_targets_are_listed_as_long_as_the_line_fits_and_the_rest_counted() {
        let failed = (0..100)
            .map(|i| FailedTarget {
                name: format!("tenant_{i}"),
                code: "MIGRATION_FAILED",
                message: "x".repeat(MAX_MESSAGE),
            })
            .collect();
        let facts = Facts {
            details: Some(Details::Fleet {
                shard: Some("2/4".into()),
                totals: FleetTotals::default(),
                failed,
                failed_not_listed: 0,
            }),
        };
        let line = line("migrate", &failure(&"y".repeat(5000)), 1, facts);
        assert!(line.len() <= MAX_LINE, "{}", line.len());
        let doc: serde_json::Value = serde_json::from_str(&line).unwrap();
        let listed = doc["failed"].as_array().unwrap().len();
        assert!(listed > 0, "{line}");
        assert_eq!(doc["failed_not_listed"], 100 - listed);
        assert_eq!(doc["failed"][0]["name"], "tenant_0");
        assert_eq!(doc["shard"], "2/4");
    }

    #[test]
    fn clip_keeps_short_text_and_cuts_on_a_character_boundary() {
        assert_eq!(clip("short"), "short");
        let cut = clip(&"ü".repeat(MAX_MESSAGE + 5));
        assert_eq!(cut.chars().count(), MAX_MESSAGE + 1);
    }
}
