//! Completions, help, version, and usage errors.

use crate::support::project::Project;
use crate::{three, DB};

#[test]
fn completions_bash_prints_a_completion_script() {
    let p = Project::new();
    let run = p.run(&["completions", "bash"]);
    run.success().stdout_has("_dirthara").stdout_has("complete");
    p.run(&["completions", "nosuchshell"]).code(2);
}

#[test]
fn help_and_version_exit_0_on_stdout() {
    let p = Project::new();
    let run = p.run(&["--help"]);
    run.success().stdout_has("Usage:").stdout_has("migrate");
    p.run(&["help"]).success().stdout_has("Usage:");
    p.run(&["migrate", "--help"]).success().stdout_has("Usage:");
    p.run(&["rollback", "--help"])
        .success()
        .stdout_has("--steps");
    p.run(&["-h"]).success();
    let run = p.run(&["--version"]);
    run.success()
        .stdout_has(env!("CARGO_PKG_VERSION"))
        .stdout_has("dirthara");
    p.run(&["-V"]).success();
}

#[test]
fn unknown_flags_and_subcommands_are_usage_errors_with_exit_2() {
    let p = Project::new();
    three(&p);
    for args in [
        &["migrate", "--bogus"][..],
        &["--bogus", "status"],
        &["status", "extra"],
        &["frobnicate"],
        &["--output", "yaml", "status"],
        &[],
    ] {
        let run = p.sqlite(DB, args);
        run.code(2);
        assert!(
            run.stdout.is_empty(),
            "{args:?}: usage errors go to stderr: {run:?}"
        );
        assert!(!run.stderr.is_empty(), "{args:?}");
    }
    assert!(!p.exists(DB));
}

#[test]
fn unknown_flag_without_a_subcommand_exits_2() {
    let p = Project::new();
    let run = p.run(&["--bogus"]);
    run.code(2).stderr_has("--bogus");
    p.run(&["to", "--help"]).success();
}
