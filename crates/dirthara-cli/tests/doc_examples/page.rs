//! One page's examples: each scenario's in page order, the scenarios side by side. What each
//! code block is, by its language and the
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
use std::sync::Mutex;

use super::examples::{run_scenario, Outcome};
use super::markdown::{parse, Item};
use super::scenario::repo_root;

/// How many of a page's scenarios run at once. They spend most of their time waiting (for a
/// runner in the background to take a lock, for a wait to run out), so a few overlap well
/// even on two cores.
const AT_ONCE: usize = 4;

/// The page's items split by the scenario they run in, in page order: the page's start and
/// each `fresh` begin a scenario of their own, and every part of a named one goes to it.
fn scenarios(items: Vec<Item>) -> Vec<Vec<Item>> {
    let mut order: Vec<String> = vec!["(page start)".into()];
    let mut by_name: HashMap<String, Vec<Item>> = HashMap::new();
    let mut current = order[0].clone();
    for item in items {
        if let Item::Directive {
            kind, arg, line, ..
        } = &item
        {
            let switch = match kind.as_str() {
                "fresh" => Some(format!("(fresh at line {line})")),
                "scenario" => Some(arg.clone()),
                _ => None,
            };
            if let Some(name) = switch {
                if !order.contains(&name) {
                    order.push(name.clone());
                }
                current = name;
                continue;
            }
        }
        by_name.entry(current.clone()).or_default().push(item);
    }
    (order.into_iter())
        .filter_map(|name| by_name.remove(&name))
        .collect()
}

/// With `DOCTEST_BLESS=1`, a block whose example printed something else is rewritten with
/// what it printed (for the author to read in `git diff` before committing).
fn blessing() -> bool {
    std::env::var("DOCTEST_BLESS").as_deref() == Ok("1")
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

/// Runs every example of `page` (its scenarios side by side, each in page order) and fails
/// with a report of every example that printed what the page does not show.
pub(crate) fn run_page(page: &str) {
    let path = repo_root().join(page);
    let text = std::fs::read_to_string(&path).unwrap();
    let started = std::time::Instant::now();
    let queue = Mutex::new(scenarios(parse(&text)));
    let outcomes = Mutex::new(Vec::<Outcome>::new());
    std::thread::scope(|threads| {
        let workers: Vec<_> = (0..AT_ONCE)
            .map(|_| {
                threads.spawn(|| loop {
                    let Some(items) = queue.lock().unwrap().pop() else {
                        return;
                    };
                    let outcome = run_scenario(page, items);
                    outcomes.lock().unwrap().push(outcome);
                })
            })
            .collect();
        // A worker's panic (a setup that failed, a block that cannot be run) is the page's.
        for worker in workers {
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    let mut all = Outcome::default();
    for outcome in outcomes.into_inner().unwrap() {
        all.ran += outcome.ran;
        all.checked += outcome.checked;
        all.mismatches.extend(outcome.mismatches);
        all.blessed.extend(outcome.blessed);
    }
    eprintln!(
        "{page}: {} examples run, {} blocks run or checked, in {:.1?}",
        all.ran,
        all.checked,
        started.elapsed()
    );
    if blessing() && !all.blessed.is_empty() {
        bless(&path, all.blessed);
    }
    if !all.mismatches.is_empty() {
        all.mismatches.sort();
        panic!(
            "{} example(s) of {page} do not show what they print:\n\n{}",
            all.mismatches.len(),
            all.mismatches.join("\n\n")
        );
    }
}
