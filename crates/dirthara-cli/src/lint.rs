//! `dirthara lint`: the library's [`Migrator::lint`], written for people, for CI (GitHub
//! Actions annotations, SARIF 2.1.0) or as one JSON document; exit 1 when a finding is not
//! allowed.

use dirthara::{LintAgainst, LintReport, Migrator, SqlDialect, StepFinding};

use crate::cli::{LintArgs, LintFormat, OutputFormat};
use crate::error::CliError;
use crate::render::Renderer;

pub(crate) async fn run(
    migrator: &Migrator,
    args: &LintArgs,
    renderer: Renderer,
) -> Result<(), CliError> {
    if args.rules {
        rules(renderer.format);
        return Ok(());
    }
    let configured = migrator
        .config()
        .connection_url(&migrator.config().history_connection)
        .is_ok();
    let against = match (args.offline, configured) {
        (false, true) => LintAgainst::Live,
        _ => LintAgainst::Offline {
            dialect: match args.dialect.as_deref() {
                Some("mysql") => Some(SqlDialect::MySql),
                Some(_) => Some(SqlDialect::Postgres),
                None => None,
            },
        },
    };
    let report = migrator.lint(against).await?;
    match (renderer.format, args.format) {
        (OutputFormat::Json | OutputFormat::Ndjson, _) => json(&report),
        (_, LintFormat::Github) => github(&report),
        (_, LintFormat::Sarif) => sarif(&report),
        (_, LintFormat::Human) => human(&report, renderer.verbose > 0),
    }
    match report.not_allowed().count() {
        0 => Ok(()),
        not_allowed => Err(CliError::LintFindings { not_allowed }),
    }
}

fn json(report: &LintReport) {
    println!(
        "{}",
        serde_json::to_string_pretty(report).expect("a report serialises")
    );
}

fn human(report: &LintReport, verbose: bool) {
    for finding in &report.findings {
        let verdict = match (finding.refuses, &finding.allowed) {
            (_, Some(reason)) => format!("allowed ({reason})"),
            (true, None) => "not allowed".to_string(),
            (false, None) => finding.severity.as_str().to_string(),
        };
        println!("{finding}");
        println!("  {verdict}; lock {}", finding.lock);
        println!("  fix: {}", finding.fix);
    }
    let not_allowed = report.not_allowed().count();
    let where_ = match report.live {
        true => "on the live databases",
        false => "offline, by the oldest supported server",
    };
    println!(
        "{} finding(s) in {} migration(s), judged {where_}; {not_allowed} not allowed.",
        report.findings.len(),
        report.migrations
    );
    if !report.not_analysed.is_empty() {
        match verbose {
            true => {
                for unread in &report.not_analysed {
                    println!(
                        "note: {}:{}:{}: not analysed: {} ({})",
                        unread.file, unread.line, unread.column, unread.statement, unread.reason
                    );
                }
            }
            false => println!(
                "note: {} statement(s) the parser does not read were not analysed (-v lists them).",
                report.not_analysed.len()
            ),
        }
    }
}

/// `::error file=…,line=…,col=…,title=…::message`: GitHub Actions turns each line into an
/// annotation on the file.
fn github(report: &LintReport) {
    for finding in &report.findings {
        let level = match finding.refuses {
            true => "error",
            false => "warning",
        };
        println!(
            "::{level} file={},line={},col={},title={}::{}",
            escape_property(&finding.file),
            finding.line,
            finding.column,
            escape_property(finding.rule),
            escape_data(&format!("{}. Fix: {}", finding.described(), finding.fix)),
        );
    }
}

/// GitHub's workflow-command escaping of a message.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// ... and of a property (`file=`, `title=`).
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// SARIF 2.1.0, as code-scanning tools read it: one run, the rules that fired, a result per
/// finding.
fn sarif(report: &LintReport) {
    let mut fired: Vec<&StepFinding> = report.findings.iter().collect();
    fired.sort_by_key(|f| f.rule);
    fired.dedup_by_key(|f| f.rule);
    let rules: Vec<serde_json::Value> = (fired.iter())
        .filter_map(|f| dirthara::rules::rule_named(f.rule))
        .map(|rule| {
            serde_json::json!({
                "id": rule.name,
                "shortDescription": { "text": rule.why },
                "help": { "text": rule.fix },
                "properties": { "lock": rule.lock, "severity": rule.severity.as_str() },
            })
        })
        .collect();
    let results: Vec<serde_json::Value> = (report.findings.iter())
        .map(|f| {
            serde_json::json!({
                "ruleId": f.rule,
                "level": match f.refuses {
                    true => "error",
                    false => "warning",
                },
                "message": { "text": f.described() },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": f.file },
                        "region": { "startLine": f.line, "startColumn": f.column },
                    }
                }],
            })
        })
        .collect();
    let document = serde_json::json!({
        "version": "2.1.0",
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "runs": [{
            "tool": { "driver": { "name": "dirthara", "version": env!("CARGO_PKG_VERSION"), "rules": rules } },
            "results": results,
        }],
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&document).expect("SARIF serialises")
    );
}

/// `--rules`: every rule, one a line (or as JSON).
fn rules(format: OutputFormat) {
    match format {
        OutputFormat::Human => {
            for rule in dirthara::rules::RULES {
                println!(
                    "{:<46} {:<8} {}: {}",
                    rule.name,
                    rule.severity.as_str(),
                    rule.lock,
                    rule.why
                );
            }
        }
        _ => println!(
            "{}",
            serde_json::to_string_pretty(&dirthara::rules::RULES).expect("rules serialise")
        ),
    }
}
