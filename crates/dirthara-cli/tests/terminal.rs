//! What only happens on a terminal: the progress line and colour. Run under a real
//! pseudo-terminal with util-linux `script`.

mod support;

use std::path::Path;
use std::process::Command;

use support::project::Project;
use support::{dirthara_bin, dirthara_command, scrub_env};

/// Runs `dirthara args` with a terminal on stdin/stdout/stderr; returns what it printed.
fn on_terminal(dir: &Path, args: &str, no_color: bool) -> Option<String> {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: util-linux `script` is not installed, so no pseudo-terminal");
        return None;
    }
    let mut cmd = Command::new("script");
    scrub_env(&mut cmd).current_dir(dir).args([
        "-qec",
        &format!("{} {args}", dirthara_bin().display()),
        "/dev/null",
    ]);
    if no_color {
        cmd.env("NO_COLOR", "1");
    }
    let out = cmd.output().unwrap();
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A project with `count` irreversible migrations, each creating its own table.
fn project(count: i64) -> Project {
    let p = Project::new();
    for i in 1..=count {
        p.irreversible(i, &format!("t{i}"), &format!("CREATE TABLE t{i} (id INT)"));
    }
    p
}

#[test]
fn many_migrations_on_a_terminal_show_a_progress_line() {
    let dir = project(8);
    let Some(out) = on_terminal(dir.path(), "-d sqlite:t.db --no-lock migrate", false) else {
        return;
    };
    assert!(out.contains("[="), "progress bar: {out:?}");
    assert!(out.contains("/8 up "), "current migration: {out:?}");
    assert!(out.contains("Applied 8 in batch 1."), "{out:?}");
}

#[test]
fn a_few_migrations_get_plain_lines_even_on_a_terminal() {
    let dir = project(3);
    let Some(out) = on_terminal(dir.path(), "-d sqlite:t.db --no-lock migrate", false) else {
        return;
    };
    assert!(!out.contains("/3 up "), "{out:?}");
    assert!(out.contains("Applied 3 in batch 1."), "{out:?}");
}

#[test]
fn errors_are_coloured_on_a_terminal_but_never_with_no_color() {
    let dir = project(1);
    let Some(out) = on_terminal(dir.path(), "-d sqlite:t.db migrate", false) else {
        return;
    };
    assert!(
        out.contains("\x1b[1m\x1b[31mError\x1b[0m [MIGRATION_LOCK_FAILED]"),
        "{out:?}"
    );
    let Some(out) = on_terminal(dir.path(), "-d sqlite:t.db migrate", true) else {
        return;
    };
    assert!(
        out.contains("Error [MIGRATION_LOCK_FAILED]") && !out.contains('\x1b'),
        "{out:?}"
    );
}

#[test]
fn off_a_terminal_there_is_no_progress_line_and_no_colour() {
    let dir = project(8);
    let out = dirthara_command()
        .current_dir(dir.path())
        .env_remove("NO_COLOR")
        .args(["-d", "sqlite:t.db", "--no-lock", "migrate"])
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && !all.contains('\x1b'), "{all:?}");
}

#[test]
fn the_manual_page_is_generated_from_the_command_line_definition() {
    let out = dirthara_command().arg("man").output().unwrap();
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(page.contains(".TH dirthara 1"), "{page}");
    assert!(page.contains("lock\\-wait"), "documents the flags: {page}");
}

#[test]
fn clicolor_force_colours_errors_even_off_a_terminal_and_no_color_wins_otherwise() {
    let dir = project(1);
    let run = |force: bool| {
        let mut cmd = dirthara_command();
        cmd.current_dir(dir.path())
            .args(["-d", "sqlite:t.db", "migrate"]) // SQLite with locking on: refused
            .env_remove("NO_COLOR");
        if force {
            cmd.env("CLICOLOR_FORCE", "1");
        }
        String::from_utf8_lossy(&cmd.output().unwrap().stderr).into_owned()
    };
    assert!(
        run(true).contains("\x1b[1m\x1b[31mError\x1b[0m ["),
        "{:?}",
        run(true)
    );
    assert!(!run(false).contains('\x1b'), "{:?}", run(false));
}
