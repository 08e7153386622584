//! One page's examples, run in page order. What each code block is, by its language and the
//! `<!-- doctest:... -->` comment before it:
//!
//! | block | what the test does |
//! |---|---|
//! | `console` | runs each `$ ` line; the lines below it are its stdout, then after `# stderr` its stderr |
//! | `sh` | runs the block as one script, which must succeed |
//! | `sql` whose first line is `-- PATH` | writes the file |
//! | `toml` | read by dirthara's configuration parser, or, for a Cargo `[dependencies]` fragment, checked against the crate's features |
//! | `json` without a comment | checked as a MongoDB migration by dirthara's own parser |
//! | `rust` | compiled as a doctest of the library (`crates/dirthara/src/lib.rs` includes the page) |
//! | after `doctest:file PATH` | written to `PATH` (a `toml` block is also checked, as above) |
//! | after `doctest:run` + a command | the command's output, as a `console` block shows it |
//! | after `doctest:output NAME` | the output of the background runner `NAME`, once it ended |
//! | after `doctest:not-run REASON` | not run, for the reason given (a template to adapt) |
//!
//! Other comments: `doctest:fresh` (a new scenario), `doctest:scenario NAME` (go on in the
//! scenario of that name, made when first named), `doctest:database KIND NAME`,
//! `doctest:pgbouncer NAME` (a transaction-pooling PgBouncer in front of that database),
//! `doctest:setup` + a script (hidden preparation, which must succeed), `doctest:spawn NAME` +
//! a script (a runner in the background). A block of any other kind, or without a language,
//! fails the test: every block is run or checked, or says why not.

use std::collections::HashMap;
use std::path::Path;

use super::compare::mismatch;
use super::markdown::{parse, Item};
use super::scenario::{repo_root, Scenario};

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

thread_local! {
    /// Every example of the page that printed what the page does not show: all are reported
    /// at the end, so one run lists every example to fix.
    static MISMATCHES: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// With `DOCTEST_BLESS=1`, a block whose example printed something else is rewritten with
/// what it printed (for the author to read in `git diff` before committing).
fn blessing() -> bool {
    std::env::var("DOCTEST_BLESS").as_deref() == Ok("1")
}

/// Whether the run printed what the block shows; a mismatch is recorded for the report.
fn check(at: &str, what: &str, expected: &str, stdout: &str, stderr: &str, is_new: bool) -> bool {
    let (want_out, want_err) = expected_streams(expected);
    for (stream, want, got) in [("stdout", &want_out, stdout), ("stderr", &want_err, stderr)] {
        if let Some((want, got)) = mismatch(want, got, is_new) {
            let report = format!(
                "{at}: `{what}` printed on {stream} what the docs do not show.\n\
                 --- the docs (normalised):\n{want}\n--- the run (normalised):\n{got}\n---\n\
                 everything it printed:\n{}",
                shown(stdout, stderr)
            );
            MISMATCHES.with(|m| m.borrow_mut().push(report));
            return false;
        }
    }
    true
}

/// Rewrites the page's blocks with what their examples printed, last first so that the
/// line numbers of the earlier ones still hold.
fn bless(path: &Path, mut blocks: Vec<(usize, usize, String, String)>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    blocks.sort_by_key(|(line, ..)| std::cmp::Reverse(*line));
    for (line, count, prefix, printed) in blocks {
        let new: Vec<String> = (printed.trim_end_matches('\n').lines())
            .map(|l| format!("{prefix}{l}").trim_end().to_string())
            .collect();
        lines.splice(line - 1..line - 1 + count, new);
    }
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn is_new(command: &str) -> bool {
    command.split_whitespace().any(|word| word == "new")
}

pub fn run_page(page: &str) {
    let path = repo_root().join(page);
    let text = std::fs::read_to_string(&path).unwrap();
    // The scenarios by name; `current` is the one the examples run in.
    let mut scenarios: HashMap<String, Scenario> = HashMap::new();
    let mut current = String::from("(page start)");
    scenarios.insert(current.clone(), Scenario::new());
    let mut next: Option<Next> = None;
    let (mut ran, mut checked) = (0, 0);
    // (first line, line count, prefix, what it printed) of each block that showed otherwise.
    let mut blessed: Vec<(usize, usize, String, String)> = Vec::new();
    // Where the time goes: each item that took more than a second is named.
    let mut last = (std::time::Instant::now(), 0);
    for item in parse(&text) {
        let line = match &item {
            Item::Directive { line, .. } | Item::Block { line, .. } => *line,
        };
        if last.0.elapsed() > std::time::Duration::from_secs(1) {
            eprintln!("{page}:{}: took {:.1?}", last.1, last.0.elapsed());
        }
        last = (std::time::Instant::now(), line);
        match item {
            Item::Directive {
                kind,
                arg,
                body,
                line,
            } => {
                let at = format!("{page}:{line}");
                assert!(next.is_none(), "{at}: a doctest comment between another and its block");
                match kind.as_str() {
                    "fresh" => {
                        // An unnamed scenario cannot be gone back to: end it (its runners,
                        // its databases) before the next begins.
                        if current.starts_with('(') {
                            scenarios.remove(&current);
                        }
                        current = format!("(fresh at line {line})");
                        scenarios.insert(current.clone(), Scenario::new());
                        continue;
                    }
                    "scenario" => {
                        current = arg.clone();
                        scenarios.entry(arg).or_insert_with(Scenario::new);
                        continue;
                    }
                    _ => {}
                }
                let scenario = scenarios.get_mut(&current).unwrap();
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
                let scenario = scenarios.get_mut(&current).unwrap();
                if let Some(why) = &scenario.skipped {
                    eprintln!("SKIPPED: {at} ({why})");
                    continue;
                }
                match todo {
                    Some(Next::NotRun) => {}
                    Some(Next::File(file)) => {
                        if lang == "toml" {
                            super::checks::toml(&at, &text);
                        }
                        write(scenario.path(), &file, &text)
                    }
                    Some(Next::Run(command)) => {
                        let out = scenario.command(&command);
                        let (stdout, stderr) = streams(scenario, &out);
                        if !check(&at, &command, &text, &stdout, &stderr, is_new(&command)) {
                            blessed.push((line, text.lines().count(), prefix, shown(&stdout, &stderr)));
                        }
                        ran += 1;
                    }
                    Some(Next::Output(name)) => {
                        let (stdout, stderr) = scenario.finish(&name);
                        let (stdout, stderr) = (
                            scenario.as_documented(&stdout),
                            scenario.as_documented(&stderr),
                        );
                        if !check(&at, &name, &text, &stdout, &stderr, false) {
                            blessed.push((line, text.lines().count(), prefix, shown(&stdout, &stderr)));
                        }
                        ran += 1;
                    }
                    None => {
                        let (commands, printed) = block(scenario, &at, page, &lang, &text);
                        ran += commands;
                        if let Some(printed) = printed {
                            blessed.push((line, text.lines().count(), prefix, printed));
                        }
                        checked += 1;
                    }
                }

            }
        }
    }
    assert!(next.is_none(), "{page}: a doctest comment at the end with no block");
    let ending = std::time::Instant::now();
    drop(scenarios);
    eprintln!("{page}: the scenarios ended in {:.1?}", ending.elapsed());
    eprintln!("{page}: {ran} examples run, {checked} blocks run or checked");
    if blessing() && !blessed.is_empty() {
        bless(&path, blessed);
    }
    let mismatches = MISMATCHES.with(|m| std::mem::take(&mut *m.borrow_mut()));
    if !mismatches.is_empty() {
        panic!(
            "{} example(s) of {page} do not show what they print:\n\n{}",
            mismatches.len(),
            mismatches.join("\n\n")
        );
    }
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
    at: &str,
    page: &str,
    lang: &str,
    text: &str,
) -> (usize, Option<String>) {
    let first = text.lines().next().unwrap_or("");
    let checked = match lang {
        "console" => return console(scenario, at, text),
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
    };
    let () = checked;
    (0, None)
}

/// Runs each `$ ` line of a `console` block and compares what it printed; the block as the
/// run printed it when that differs.
fn console(scenario: &Scenario, at: &str, text: &str) -> (usize, Option<String>) {
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
        all_shown &= check(at, command, expected, &stdout, &stderr, is_new(command));
        // Blank lines between one command's output and the next command stay as written.
        let gap = &expected[expected.trim_end_matches('\n').len()..];
        let printed = shown(&stdout, &stderr);
        as_run.push_str(&format!("$ {command}\n{}", printed.trim_end_matches('\n')));
        as_run.push_str(if gap.len() > 1 { "\n\n" } else { "\n" });
    }
    (commands.len(), (!all_shown).then_some(as_run))
}
