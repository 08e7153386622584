//! One scenario's examples, in page order: the comments that prepare them and the blocks
//! they run or check (what each kind of block means: `page.rs`).

use std::path::Path;

use super::compare::mismatch;
use super::markdown::Item;
use super::scenario::Scenario;

/// What running one scenario's examples found.
#[derive(Default)]
pub(crate) struct Outcome {
    /// Commands run (a `console` block may hold several).
    pub ran: usize,
    /// Blocks run or checked without a comment before them.
    pub checked: usize,
    /// Each example that printed what the page does not show, as a report.
    pub mismatches: Vec<String>,
    /// (first line, line count, prefix, what it printed) of each such block, for blessing.
    pub blessed: Vec<(usize, usize, String, String)>,
}

enum Next {
    File(String),
    Run(String),
    Output(String),
    NotRun,
}

/// The text a `console` block shows for one run: stdout, then `# stderr` and stderr.
fn shown(stdout: &str, stderr: &str) -> String {
    if stderr.is_empty() {
        stdout.to_string()
    } else {
        format!("{stdout}# stderr\n{stderr}")
    }
}

/// Splits what a block shows into (stdout, stderr) at its `# stderr` line.
fn expected_streams(shown: &str) -> (String, String) {
    match shown.split_once("# stderr\n") {
        Some((out, err)) => (out.to_string(), err.to_string()),
        None => (shown.to_string(), String::new()),
    }
}

/// Whether the run printed what the block shows; a mismatch is added to `mismatches`.
fn check(
    mismatches: &mut Vec<String>,
    at: &str,
    what: &str,
    (expected, stdout, stderr): (&str, &str, &str),
    is_new: bool,
) -> bool {
    let (want_out, want_err) = expected_streams(expected);
    for (stream, want, got) in [("stdout", &want_out, stdout), ("stderr", &want_err, stderr)] {
        if let Some((want, got)) = mismatch(want, got, is_new) {
            let report = format!(
                "{at}: `{what}` printed on {stream} what the docs do not show.\n\
                 --- the docs (normalised):\n{want}\n--- the run (normalised):\n{got}\n---\n\
                 everything it printed:\n{}",
                shown(stdout, stderr)
            );
            mismatches.push(report);
            return false;
        }
    }
    true
}

fn is_new(command: &str) -> bool {
    command.split_whitespace().any(|word| word == "new")
}

/// Runs the items of one scenario (a fresh one, or every part of a named one), in order.
pub(crate) fn run_scenario(page: &str, items: Vec<Item>) -> Outcome {
    let mut scenario = Scenario::new();
    let mut outcome = Outcome::default();
    let mut next: Option<Next> = None;
    for item in items {
        match item {
            Item::Directive {
                kind,
                arg,
                body,
                line,
            } => {
                let at = format!("{page}:{line}");
                assert!(
                    next.is_none(),
                    "{at}: a doctest comment between another and its block"
                );
                match kind.as_str() {
                    _ if scenario.skipped.is_some() => {}
                    "database" => {
                        let (server, name) = arg.split_once(' ').expect("database KIND NAME");
                        scenario.database(server, name);
                    }
                    "pgbouncer" => scenario.pgbouncer(&arg),
                    "setup" => scenario.setup(&format!("{arg}\n{body}"), &at),
                    "spawn" => scenario.spawn(&arg, &body),
                    "file" => next = Some(Next::File(arg)),
                    "run" => next = Some(Next::Run(format!("{arg}\n{body}").trim().to_string())),
                    "output" => next = Some(Next::Output(arg)),
                    "not-run" => {
                        assert!(!arg.is_empty(), "{at}: not-run needs a reason");
                        next = Some(Next::NotRun);
                    }
                    other => panic!("{at}: unknown doctest comment `{other}`"),
                }
            }
            Item::Block {
                lang,
                text,
                line,
                prefix,
            } => {
                let at = format!("{page}:{line}");
                let todo = next.take();
                if let Some(why) = &scenario.skipped {
                    eprintln!("SKIPPED: {at} ({why})");
                    continue;
                }
                let (ran, printed) = match todo {
                    Some(Next::NotRun) => (0, None),
                    Some(Next::File(file)) => {
                        if lang == "toml" {
                            super::checks::toml(&at, &text);
                        }
                        write(scenario.path(), &file, &text);
                        (0, None)
                    }
                    Some(Next::Run(command)) => {
                        let out = scenario.command(&command);
                        let (stdout, stderr) = streams(&scenario, &out);
                        let streams = (text.as_str(), stdout.as_str(), stderr.as_str());
                        let shows = check(
                            &mut outcome.mismatches,
                            &at,
                            &command,
                            streams,
                            is_new(&command),
                        );
                        (1, (!shows).then(|| shown(&stdout, &stderr)))
                    }
                    Some(Next::Output(name)) => {
                        let (stdout, stderr) = scenario.finish(&name);
                        let (stdout, stderr) = (
                            scenario.as_documented(&stdout),
                            scenario.as_documented(&stderr),
                        );
                        let streams = (text.as_str(), stdout.as_str(), stderr.as_str());
                        let shows = check(&mut outcome.mismatches, &at, &name, streams, false);
                        (1, (!shows).then(|| shown(&stdout, &stderr)))
                    }
                    None => {
                        outcome.checked += 1;
                        block(&scenario, &mut outcome.mismatches, &at, page, &lang, &text)
                    }
                };
                outcome.ran += ran;
                if let Some(printed) = printed {
                    outcome
                        .blessed
                        .push((line, text.lines().count(), prefix, printed));
                }
            }
        }
    }
    assert!(
        next.is_none(),
        "{page}: a doctest comment with no block after it"
    );
    outcome
}

fn streams(scenario: &Scenario, out: &std::process::Output) -> (String, String) {
    let text = |bytes: &[u8]| scenario.as_documented(&String::from_utf8_lossy(bytes));
    (text(&out.stdout), text(&out.stderr))
}

fn write(root: &Path, file: &str, text: &str) {
    let path = root.join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Runs or checks a block that has no comment before it: how many commands it ran, and
/// (a `console` block that printed otherwise) the block as the run printed it.
fn block(
    scenario: &Scenario,
    mismatches: &mut Vec<String>,
    at: &str,
    page: &str,
    lang: &str,
    text: &str,
) -> (usize, Option<String>) {
    let first = text.lines().next().unwrap_or("");
    match lang {
        "console" => return console(scenario, mismatches, at, text),
        "sh" => {
            scenario.setup(text, at);
            return (1, None);
        }
        "sql" => {
            let file = first.strip_prefix("-- ").filter(|f| f.ends_with(".sql"));
            let file = file.unwrap_or_else(|| panic!("{at}: an SQL block starts with `-- PATH`"));
            write(scenario.path(), file, text)
        }
        "toml" => super::checks::toml(at, text),
        "json" => super::checks::json_migration(at, text),
        "rust" => super::checks::rust_is_doctested(at, page),
        "" => panic!("{at}: a code block without a language; say what it is"),
        other => panic!("{at}: a `{other}` block is neither run nor checked; mark it not-run"),
    }
    (0, None)
}

/// Runs each `$ ` line of a `console` block and compares what it printed; the block as the
/// run printed it when that differs.
fn console(
    scenario: &Scenario,
    mismatches: &mut Vec<String>,
    at: &str,
    text: &str,
) -> (usize, Option<String>) {
    let mut commands: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(command) = line.strip_prefix("$ ") {
            commands.push((command.to_string(), String::new()));
        } else {
            let (_, shown) = commands
                .last_mut()
                .unwrap_or_else(|| panic!("{at}: a console block starts with `$ `"));
            shown.push_str(line);
            shown.push('\n');
        }
    }
    let mut as_run = String::new();
    let mut all_shown = true;
    for (command, expected) in &commands {
        let out = scenario.command(command);
        let (stdout, stderr) = streams(scenario, &out);
        let streams = (expected.as_str(), stdout.as_str(), stderr.as_str());
        all_shown &= check(mismatches, at, command, streams, is_new(command));
        // Blank lines between one command's output and the next command stay as written.
        let gap = &expected[expected.trim_end_matches('\n').len()..];
        let printed = shown(&stdout, &stderr);
        as_run.push_str(&format!("$ {command}\n{}", printed.trim_end_matches('\n')));
        as_run.push_str(if gap.len() > 1 { "\n\n" } else { "\n" });
    }
    (commands.len(), (!all_shown).then_some(as_run))
}
