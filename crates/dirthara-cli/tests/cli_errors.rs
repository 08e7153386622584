//! The CLI's own failures (not the library's): each printed as `Error [CODE]: message` on
//! stderr, and as the JSON error document on stdout with `--output json`, exit code 1.

mod support;

use std::process::{Command, Stdio};

use support::dirthara_bin;
use support::project::{Project, RUN_TIMEOUT};
use support::run::run_command;

const NO_TERMINAL: &str = "`fresh` drops every table of sqlite:app.db; there is no terminal to \
                           confirm on, so pass --force to confirm";

#[test]
fn fresh_without_a_terminal_or_force_is_a_config_error_in_human_mode() {
    let p = Project::new();
    let run = p.unlocked("app.db", &["fresh"]);
    run.error("CONFIG_ERROR")
        .stderr_has(&format!("Error [CONFIG_ERROR]: {NO_TERMINAL}\n"));
    assert_eq!(run.stdout, "", "a failed human run prints no result");
    assert!(!p.exists("app.db"), "nothing was changed, or even created");
}

#[test]
fn fresh_without_a_terminal_or_force_prints_the_json_error_document() {
    let p = Project::new();
    let run = p.unlocked("app.db", &["--output", "json", "fresh"]);
    run.error("CONFIG_ERROR");
    assert_eq!(
        run.json(),
        serde_json::json!({ "error": { "code": "CONFIG_ERROR", "message": NO_TERMINAL } })
    );
}

#[test]
fn fresh_answered_with_anything_but_yes_on_a_terminal_is_not_confirmed() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: util-linux `script` is not installed, so no pseudo-terminal");
        return;
    }
    let p = Project::new();
    // `script` gives dirthara a terminal on stdin and passes it what we write: `no`.
    let run = run_command(
        assert_cmd::Command::new("script")
            .current_dir(p.path())
            .env("NO_COLOR", "1")
            .timeout(RUN_TIMEOUT)
            .args([
                "-qec",
                &format!(
                    "{} -d sqlite:app.db --no-lock --output json fresh",
                    dirthara_bin().display()
                ),
                "/dev/null",
            ])
            .write_stdin("no\n"),
    );
    // The terminal joins both streams, so the prompt, the error line and the document
    // all arrive on stdout.
    run.code(1)
        .stdout_has("Type `yes` to continue: ")
        .stdout_has("Error [CONFIG_ERROR]: `fresh` was not confirmed; nothing was changed")
        .stdout_has("\"message\": \"`fresh` was not confirmed; nothing was changed\"");
    assert!(!p.exists("app.db"), "nothing was changed, or even created");
}

#[test]
fn new_into_a_path_that_is_a_file_is_an_io_error_naming_the_directory() {
    let p = Project::new();
    p.write("not_a_dir", "");
    let run = p.run(&["--dir", "not_a_dir", "new", "create_users"]);
    run.error("IO_ERROR")
        .stderr_has("Error [IO_ERROR]: cannot create migration directory not_a_dir: ");

    let run = p.run(&[
        "--dir",
        "not_a_dir",
        "--output",
        "json",
        "new",
        "create_users",
    ]);
    run.error("IO_ERROR");
    let error = &run.json()["error"];
    assert_eq!(error["code"], "IO_ERROR");
    let message = error["message"].as_str().expect("a message");
    assert!(
        message.starts_with("cannot create migration directory not_a_dir: "),
        "{message}"
    );
}

#[test]
fn a_bad_name_for_new_stays_a_config_error() {
    let p = Project::new();
    p.run(&["new", "bad name"])
        .error("CONFIG_ERROR")
        .stderr_has("Error [CONFIG_ERROR]: `new bad name`: ");
}

/// The generated documents must survive a reader that stops early (`dirthara man | head`).
#[cfg(unix)]
#[test]
fn man_into_a_closed_pipe_is_still_ok() {
    // A socket whose other end is already closed: the first write fails with EPIPE, as it
    // does for a pipe whose reader has gone, but without racing a reader that might still
    // be reading.
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    drop(ours);
    let out = Command::new(dirthara_bin())
        .arg("man")
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn completions_into_a_closed_pipe_are_still_ok() {
    // The script is larger than a pipe holds (64 KiB), so the write fails with EPIPE once
    // the reader is gone, whenever that happens.
    let mut child = Command::new(dirthara_bin())
        .args(["completions", "powershell"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[cfg(target_os = "linux")]
#[test]
fn the_manual_page_into_a_full_device_is_an_io_error() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = Command::new(dirthara_bin())
        .arg("man")
        .env("NO_COLOR", "1")
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("Error [IO_ERROR]: cannot write the manual page: "),
        "{stderr}"
    );
}

#[test]
fn target_without_a_fleet_is_a_config_error_and_changes_nothing() {
    let p = Project::new();
    let run = p.unlocked("app.db", &["--target", "acme", "migrate"]);
    run.error("CONFIG_ERROR")
        .stderr_has("Error [CONFIG_ERROR]: --target picks targets of a fleet");
    assert!(!p.exists("app.db"), "nothing was changed, or even created");
}
