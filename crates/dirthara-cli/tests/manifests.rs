//! The manifests and CI files the docs ship (every `yaml` block of README.md and docs/*.md,
//! which the examples test leaves as templates) hold dirthara command lines this build takes,
//! and retry policies that mean what they say:
//!
//! - every flag of every dirthara command line is one `dirthara <command> --help` lists, and
//!   the whole line is read by the CLI without a usage error (run in a scratch directory with
//!   the manifest's own `DIRTHARA_*` values and no database, so it stops at "no database URL";
//!   `--summary-file` is pointed into the scratch directory), with no variable taken for a typo;
//! - every exit code a `podFailurePolicy` names is one dirthara exits with (shown by running it,
//!   or for a signal by `src/exit.rs`), and only exit 2 — the one code that never means a
//!   retry could help — fails a Job or an index at once;
//! - the Kubernetes rules those policies depend on hold: `restartPolicy: Never`, `FailIndex`
//!   only in an Indexed Job with `backoffLimitPerIndex`, the container named where the policy
//!   names it, and `DIRTHARA_SHARD_COUNT` equal to `completions` where `--shard auto` reads it.
//!
//! What is read of YAML: in a Kubernetes manifest, each container's `args:` (a block list, or a
//! flow list over one or more lines; the image's entry point is dirthara, as in
//! docs/recipes.md's image), its `env:` literal `value:`s, and `podFailurePolicy` rules; in a
//! CI file, each `dirthara ...` line of a `run:` script (up to a pipe or a redirection). A
//! form the test cannot read (a `command:` list) fails it, rather than being skipped.

mod support;

// The examples test's reader of pages; this test reads only the blocks it finds.
#[allow(dead_code)]
#[path = "doc_examples/markdown.rs"]
mod markdown;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Output;

use markdown::{parse, Item};
use support::{dirthara_command, scratch_dir, text};

/// Exit 2: the command line is wrong. The only code a retry can never help.
const USAGE: i32 = 2;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `yaml` block of the docs: (where, text).
fn yaml_blocks() -> Vec<(String, String)> {
    let mut pages = vec!["README.md".to_string()];
    for entry in std::fs::read_dir(repo_root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            pages.push(format!("docs/{name}"));
        }
    }
    let mut blocks = Vec::new();
    for page in pages {
        let markdown = std::fs::read_to_string(repo_root().join(&page)).unwrap();
        for item in parse(&markdown) {
            if let Item::Block {
                lang, text, line, ..
            } = item
            {
                if lang == "yaml" {
                    blocks.push((format!("{page}:{line}"), text));
                }
            }
        }
    }
    blocks
}

// ---------------------------------------------------------------------------------------
// Reading the YAML the docs write
// ---------------------------------------------------------------------------------------

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// `line` without a trailing ` # comment` (outside quotes).
fn uncommented(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if i == 0 || line[..i].ends_with(' ') => return line[..i].trim_end(),
            _ => {}
        }
    }
    line.trim_end()
}

fn unquoted(value: &str) -> String {
    let value = value.trim();
    for q in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(q).and_then(|v| v.strip_suffix(q)) {
            return inner.to_string();
        }
    }
    value.to_string()
}

/// The list that is the value of `key:` on line `at` of `lines`: a flow list (`[a, "b"]`,
/// over as many lines as it takes) or a block list below it (`- a` lines).
fn list_at(lines: &[&str], at: usize, key: &str) -> Vec<String> {
    let own = uncommented(lines[at]);
    let rest = own
        .trim_start()
        .strip_prefix("- ")
        .unwrap_or(own.trim_start());
    let rest = rest.strip_prefix(&format!("{key}:")).unwrap().trim();
    if rest.starts_with('[') {
        let mut flow = rest.to_string();
        let mut next = at + 1;
        while !flow.contains(']') {
            flow.push(' ');
            flow.push_str(uncommented(lines[next]).trim());
            next += 1;
        }
        let inner = &flow[1..flow.find(']').unwrap()];
        return (inner.split(','))
            .map(unquoted)
            .filter(|v| !v.is_empty())
            .collect();
    }
    assert!(
        rest.is_empty(),
        "`{key}: {rest}` is neither a flow nor a block list"
    );
    let base = indent(lines[at]);
    let mut items = Vec::new();
    for line in &lines[at + 1..] {
        let line = uncommented(line);
        match line.trim_start().strip_prefix("- ") {
            Some(item) if indent(line) >= base => items.push(unquoted(item)),
            _ => break,
        }
    }
    items
}

/// The lines of `text` whose key (after any `- `) is `key`.
fn keyed(lines: &[&str], key: &str) -> Vec<usize> {
    (0..lines.len())
        .filter(|&i| {
            let line = lines[i].trim_start();
            let line = line.strip_prefix("- ").unwrap_or(line);
            line.starts_with(&format!("{key}:"))
        })
        .collect()
}

/// The scalar value of the first `key:` in `lines`.
fn scalar(lines: &[&str], key: &str) -> Option<String> {
    let at = *keyed(lines, key).first()?;
    let line = uncommented(lines[at]).trim_start();
    let line = line.strip_prefix("- ").unwrap_or(line);
    Some(unquoted(&line[key.len() + 1..]))
}

/// The literal `env:` values of a manifest: `- name: X` followed by `value: Y`.
fn env_values(lines: &[&str]) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    for at in keyed(lines, "name") {
        let name = scalar(&lines[at..=at], "name").unwrap();
        if let Some(value) = lines.get(at + 1).and_then(|l| scalar(&[l], "value")) {
            values.insert(name, value);
        }
    }
    values
}

/// One `podFailurePolicy` rule: its action, and the exit codes and container it names.
#[derive(Debug)]
struct Rule {
    action: String,
    codes: Vec<i32>,
    container: Option<String>,
}

fn rules(lines: &[&str]) -> Vec<Rule> {
    let starts = keyed(lines, "action");
    let mut rules = Vec::new();
    for (n, &start) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(lines.len());
        // The rule ends where the indentation falls back below its `- action:` item.
        let end = (start + 1..end)
            .find(|&i| !lines[i].trim().is_empty() && indent(lines[i]) <= indent(lines[start]))
            .unwrap_or(end);
        let rule = &lines[start..end];
        let codes = keyed(rule, "values")
            .first()
            .map(|&at| list_at(rule, at, "values"))
            .unwrap_or_default();
        rules.push(Rule {
            action: scalar(rule, "action").unwrap(),
            codes: (codes.iter())
                .map(|c| c.parse().unwrap_or_else(|_| panic!("exit code `{c}`")))
                .collect(),
            container: scalar(rule, "containerName"),
        });
    }
    rules
}

/// The scripts of a CI file: each `run:` value, inline or the block (`run: |`) below it.
fn scripts(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut scripts = Vec::new();
    for at in keyed(&lines, "run") {
        let line = lines[at].trim_start();
        let rest = line.strip_prefix("- ").unwrap_or(line)["run:".len()..].trim();
        if !["|", ">"].contains(&rest) {
            scripts.push(rest.to_string());
            continue;
        }
        let block = (lines[at + 1..].iter())
            .take_while(|l| l.trim().is_empty() || indent(l) > indent(lines[at]))
            .map(|l| format!("{}\n", l.trim()))
            .collect();
        scripts.push(block);
    }
    scripts
}

/// The dirthara command lines of a CI file: each `dirthara ...` of a `run:` script (lines
/// joined at a trailing `\`), up to a pipe, a redirection or the end of the shell command.
fn script_command_lines(text: &str) -> Vec<Vec<String>> {
    let joined = scripts(text).join("\n").replace("\\\n", " ");
    let mut found = Vec::new();
    for line in joined.lines() {
        let words = shell_words(line);
        let Some(start) = words.iter().position(|w| w == "dirthara") else {
            continue;
        };
        let args: Vec<String> = (words[start + 1..].iter())
            .take_while(|w| !["|", ">", "2>", "&&", ";", "||"].contains(&w.as_str()))
            .cloned()
            .collect();
        found.push(args);
    }
    found
}

/// Words of a shell line, quotes removed; a `${{ ... }}` expression kept as one word.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut chars = line.chars().peekable();
    let mut quote = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '$') if chars.peek() == Some(&'{') => {
                word.push(c);
                for c in chars.by_ref() {
                    word.push(c);
                    if word.ends_with("}}") {
                        break;
                    }
                }
            }
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            (_, c) => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

// ---------------------------------------------------------------------------------------
// What the CLI takes
// ---------------------------------------------------------------------------------------

fn run(args: &[String], env: &BTreeMap<String, String>) -> Output {
    let dir = scratch_dir();
    let mut cmd = dirthara_command();
    cmd.current_dir(dir.path()).args(args).envs(env);
    cmd.output().unwrap()
}

fn help(path: &[String]) -> String {
    let mut args = path.to_vec();
    args.push("--help".into());
    let out = run(&args, &BTreeMap::new());
    assert!(out.status.success(), "{args:?}: {:?}", text(&out));
    text(&out).0
}

/// The commands a help text lists, aliases included.
fn commands_in(help: &str) -> BTreeSet<String> {
    let Some(start) = help.find("\nCommands:\n") else {
        return BTreeSet::new();
    };
    let mut names = BTreeSet::new();
    for line in help[start + 11..]
        .lines()
        .take_while(|l| l.starts_with("  "))
    {
        names.insert(line.split_whitespace().next().unwrap().to_string());
        if let Some(alias) = line.split("[alias: ").nth(1) {
            names.insert(alias.trim_end_matches(']').to_string());
        }
    }
    names
}

/// The flags a help text defines (`-d`, `--database-url`, ...), from its option lines only.
fn flags_in(help: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    for line in help.lines().map(str::trim_start) {
        if !line.starts_with('-') {
            continue;
        }
        for word in line.split_whitespace() {
            let word = word.trim_end_matches(',');
            if !word.starts_with('-') {
                break;
            }
            flags.insert(word.to_string());
        }
    }
    flags
}

/// Checks one command line against the CLI: its command, each flag, the whole line read
/// without a usage error; returns its command path (`["wait"]`, `["preview", "migrate"]`).
fn check_command_line(at: &str, args: &[String], env: &BTreeMap<String, String>) -> Vec<String> {
    let mut path: Vec<String> = Vec::new();
    let mut commands = commands_in(&help(&path));
    for arg in args {
        if !arg.starts_with('-') && commands.contains(arg) {
            path.push(arg.clone());
            commands = commands_in(&help(&path));
        }
    }
    assert!(!path.is_empty(), "{at}: no dirthara command in {args:?}");
    let flags = flags_in(&help(&path));
    for arg in args.iter().filter(|a| a.starts_with('-')) {
        let flag = arg.split('=').next().unwrap();
        assert!(
            flags.contains(flag),
            "{at}: `dirthara {}` has no flag {flag} (in {args:?})",
            path.join(" ")
        );
    }
    if args.iter().any(|a| a.contains("${{")) {
        return path; // a CI expression: its value is known only where it runs
    }
    // The whole line, as the CLI reads it: nothing it refuses as a usage error, no variable
    // it takes for a typo. The summary goes to the scratch directory, not /dev.
    let args: Vec<String> = (args.iter())
        .map(|a| match a.split_once('=') {
            Some(("--summary-file", _)) => "--summary-file=summary.json".to_string(),
            _ => a.clone(),
        })
        .collect();
    let out = run(&args, env);
    let (_, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(USAGE), "{at}: {args:?}: {stderr}");
    assert!(
        !stderr.contains("is not a dirthara setting"),
        "{at}: {stderr}"
    );
    assert!(!stderr.contains("--shard auto:"), "{at}: {stderr}");
    path
}

/// Every exit code dirthara has, shown: by running a command line that ends with it, or for
/// a signal's, by `src/exit.rs`.
fn check_exit_code(at: &str, code: i32) {
    let signal = match code {
        130 => Some("Signal::Interrupt => 130"),
        143 => Some("Signal::Terminate => 143"),
        _ => None,
    };
    if let Some(arm) = signal {
        let exit = std::fs::read_to_string(repo_root().join("crates/dirthara-cli/src/exit.rs"));
        assert!(exit.unwrap().contains(arm), "{at}: exit.rs has no `{arm}`");
        return;
    }
    let args: &[&str] = match code {
        0 => &["completions", "bash"],
        1 => &["status"], // no database URL: CONFIG_ERROR
        USAGE => &["--no-such-flag", "status"],
        other => panic!("{at}: dirthara never exits with {other} (src/exit.rs)"),
    };
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let out = run(&args, &BTreeMap::new());
    assert_eq!(
        out.status.code(),
        Some(code),
        "{at}: {args:?}: {:?}",
        text(&out)
    );
}

#[test]
fn every_manifest_holds_command_lines_and_exit_codes_the_cli_has() {
    let mut seen = BTreeSet::new();
    for (at, text) in yaml_blocks() {
        let lines: Vec<&str> = text.lines().collect();
        if !text.contains("apiVersion:") {
            let scripts = script_command_lines(&text);
            for args in &scripts {
                let path = check_command_line(&at, args, &BTreeMap::new());
                seen.insert(format!("CI {}", path.join(" ")));
            }
            continue;
        }
        assert!(
            keyed(&lines, "command").is_empty(),
            "{at}: `command:` is not read here"
        );
        let env = env_values(&lines);
        let indexed = scalar(&lines, "completionMode").as_deref() == Some("Indexed");
        // What Kubernetes sets in each pod of an Indexed Job.
        let mut run_env = env.clone();
        if indexed {
            run_env.insert("JOB_COMPLETION_INDEX".into(), "0".into());
        }
        let command_lines: Vec<Vec<String>> = (keyed(&lines, "args").into_iter())
            .map(|i| list_at(&lines, i, "args"))
            .collect();
        assert!(
            !command_lines.is_empty(),
            "{at}: a manifest with no dirthara command line"
        );
        for args in &command_lines {
            let path = check_command_line(&at, args, &run_env);
            seen.insert(path.join(" "));
            let auto = args.iter().any(|a| a.starts_with("--shard=auto"))
                || (args.windows(2)).any(|w| w[0] == "--shard" && w[1].starts_with("auto"));
            if auto {
                assert!(indexed, "{at}: --shard auto outside an Indexed Job");
                assert_eq!(
                    env.get("DIRTHARA_SHARD_COUNT"),
                    scalar(&lines, "completions").as_ref(),
                    "{at}: DIRTHARA_SHARD_COUNT must be the Job's `completions`"
                );
                seen.insert("indexed --shard auto".into());
            }
        }
        let rules = rules(&lines);
        if !rules.is_empty() {
            seen.insert("podFailurePolicy".into());
            let restart = scalar(&lines, "restartPolicy");
            assert_eq!(
                restart.as_deref(),
                Some("Never"),
                "{at}: podFailurePolicy needs it"
            );
        }
        for rule in &rules {
            for &code in &rule.codes {
                check_exit_code(&at, code);
            }
            if let Some(container) = &rule.container {
                let named = format!("- name: {container}");
                assert!(text.contains(&named), "{at}: no container `{container}`");
            }
            match rule.action.as_str() {
                "FailJob" | "FailIndex" => assert!(
                    rule.codes.iter().all(|&c| c == USAGE),
                    "{at}: {} on {:?}, but only exit 2 never means a retry could help \
                     (exit 1 is also MIGRATION_LOCK_HELD, CONNECTION_ERROR, ...)",
                    rule.action,
                    rule.codes
                ),
                "Ignore" | "Count" => {}
                other => panic!("{at}: no podFailurePolicy action `{other}`"),
            }
            if rule.action == "FailIndex" {
                assert!(indexed, "{at}: FailIndex needs completionMode: Indexed");
                assert!(
                    text.contains("backoffLimitPerIndex:"),
                    "{at}: FailIndex needs it"
                );
            }
        }
    }
    eprintln!("command lines and policies read: {seen:?}");
    // What the recipes promise is there, and was read.
    for expected in [
        "migrate",
        "wait",
        "indexed --shard auto",
        "podFailurePolicy",
    ] {
        assert!(
            seen.contains(expected),
            "no {expected} found in the docs: {seen:?}"
        );
    }
}

#[test]
fn the_yaml_reader_reads_the_forms_the_docs_write() {
    let text = "      args: [\"a\", '--b=1',   # c\n             --c]\n      x:\n\
                \x20       args:\n          - migrate   # m\n          - \"--d=x y\"\n        y: 1\n";
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(list_at(&lines, 0, "args"), ["a", "--b=1", "--c"]);
    assert_eq!(list_at(&lines, 3, "args"), ["migrate", "--d=x y"]);
    let words = shell_words("dirthara --shard ${{ matrix.shard }}/4 --schemas 'tenant_*' x");
    assert_eq!(words[2], "${{ matrix.shard }}/4");
    assert_eq!(words[4], "tenant_*");
    let script = "run: |\n  dirthara --a 1 \\\n    --b migrate > out.json\n  jq . out.json\n";
    assert_eq!(
        script_command_lines(script),
        [["--a", "1", "--b", "migrate"]]
    );
}
