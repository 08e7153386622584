//! Support shared by every test binary of the CLI and by the bench: one way to start the
//! `dirthara` binary with a clean environment, one scratch directory, one watchdog and one
//! wait for the lock. The parts:
//!
//! - this file: the binary and its environment, scratch directories, child processes;
//! - [`run`]: the captured result of one run, with assertions (`Run`);
//! - [`project`]: a project directory to run SQLite commands in (`Project`);
//! - [`servers`]: throwaway databases on the test servers (`Server`, `TestDb`), from the
//!   workspace's test kit (`dirthara-test-kit`), which the library's tests share;
//! - [`pgbouncer`]: a PgBouncer of the test's own in front of one of them;
//! - [`pgpool`]: a pgpool-II of the test's own in front of one of them;
//! - [`odyssey`]: an Odyssey of the test's own (from a Debian sid chroot) in front of one;
//! - [`private_server`]: a PostgreSQL or MariaDB of the test's own, to stop and restart;
//! - [`watch`]: an `--output ndjson` run watched while it runs;
//! - [`scenarios`]: lock scenarios as tables, one row per backend (`scenario_tests!`).
//!
//! Include it with `mod support;` from a file directly under `tests/`, with
//! `#[path = "../support/mod.rs"] mod support;` from a test in a directory of its own, and
//! with `#[path = "../tests/support/mod.rs"] mod support;` from a bench.

// Every test binary (and the bench) uses a different subset of these helpers: what one of
// them leaves unused, another uses.
#![allow(dead_code)]

pub(crate) mod odyssey;
pub(crate) mod pgbouncer;
pub(crate) mod pgpool;
pub(crate) mod private_server;
pub(crate) mod project;
pub(crate) mod run;
pub(crate) mod scenarios;
pub(crate) use dirthara_test_kit::servers;
pub(crate) mod watch;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

// ---------------------------------------------------------------------------------------
// The binary and its environment
// ---------------------------------------------------------------------------------------

/// The `dirthara` binary cargo built for this test (or bench) target, unless
/// `DIRTHARA_TEST_BIN` names another. CI runs the planted faults with a copy of the
/// `failpoints` build beside other suites: cargo links each build's binary to the same
/// `target/debug/dirthara`, and a cargo run for another suite would swap it under them.
pub(crate) fn dirthara_bin() -> PathBuf {
    match std::env::var_os("DIRTHARA_TEST_BIN") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from(env!("CARGO_BIN_EXE_dirthara")),
    }
}

/// Variables that change what dirthara does or how it prints, besides the `DIRTHARA_*` ones
/// (`FAILPOINTS`: the planted faults of a build with the `failpoints` feature; the index
/// `--shard auto` reads, set where the tests themselves run in a Kubernetes or Nomad job).
const SETTINGS: [&str; 8] = [
    "DATABASE_URL",
    "FAILPOINTS",
    "NO_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "RUST_BACKTRACE",
    "JOB_COMPLETION_INDEX",
    "NOMAD_ALLOC_INDEX",
];

/// Removes from `cmd`'s environment every setting the developer's shell or CI may carry:
/// `DATABASE_URL`, every `DIRTHARA_*` variable, the colour switches, `RUST_BACKTRACE`,
/// `FAILPOINTS`, the job indexes of `--shard auto`, and OpenTelemetry's `OTEL_*`,
/// `TRACEPARENT` and `TRACESTATE` (a developer's collector would get every test's traces).
/// A test that needs one sets it afterwards, so what it sets is all the child sees.
pub(crate) fn scrub_env(cmd: &mut Command) -> &mut Command {
    for key in SETTINGS {
        cmd.env_remove(key);
    }
    for (key, _) in std::env::vars_os() {
        let key_text = key.to_string_lossy();
        if key_text.starts_with("DIRTHARA_")
            || key_text.starts_with("OTEL_")
            || key_text == "TRACEPARENT"
            || key_text == "TRACESTATE"
        {
            cmd.env_remove(&key);
        }
    }
    cmd
}

/// `program` with a scrubbed environment (see [`scrub_env`]) and `NO_COLOR=1`, so that what
/// it prints is plain text whatever the caller's terminal.
pub(crate) fn clean_command(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    scrub_env(&mut cmd).env("NO_COLOR", "1");
    cmd
}

/// This target's `dirthara`, with a clean environment and no arguments yet.
pub(crate) fn dirthara_command() -> Command {
    clean_command(&dirthara_bin())
}

/// `dirthara -d URL --dir DIR <args>` with a clean environment.
pub(crate) fn dirthara(url: &str, dir: &Path, args: &[&str]) -> Command {
    dirthara_with(&dirthara_bin(), url, dir, args)
}

/// [`dirthara`] run from another binary (the bench runs the release build).
pub(crate) fn dirthara_with(bin: &Path, url: &str, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = clean_command(bin);
    cmd.arg("-d").arg(url).arg("--dir").arg(dir).args(args);
    cmd
}

// ---------------------------------------------------------------------------------------
// Scratch directories
// ---------------------------------------------------------------------------------------

/// A new temporary directory, removed on drop. The prefix makes one left behind by a killed
/// run recognisable.
pub(crate) fn scratch_dir() -> TempDir {
    tempfile::Builder::new()
        .prefix("dirthara-test-")
        .tempdir()
        .expect("create a temporary directory")
}

/// A temporary migrations directory, passed to runs with `--dir`.
pub(crate) struct Migrations {
    dir: TempDir,
}

impl Default for Migrations {
    fn default() -> Self {
        Self::new()
    }
}

impl Migrations {
    pub(crate) fn new() -> Self {
        Migrations { dir: scratch_dir() }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a SQL migration: `<version>_<name>.up.sql` and `.down.sql`, or with no `down`
    /// the irreversible `<version>_<name>.sql`.
    pub(crate) fn add(&self, version: i64, name: &str, up: &str, down: Option<&str>) -> &Self {
        self.add_as("sql", version, name, up, down)
    }

    /// Writes a migration with extension `ext` (`sql` or `json`).
    pub(crate) fn add_as(
        &self,
        ext: &str,
        version: i64,
        name: &str,
        up: &str,
        down: Option<&str>,
    ) -> &Self {
        let write = |file: String, contents: &str| {
            let path = self.path().join(file);
            std::fs::write(&path, contents)
                .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        };
        match down {
            Some(down) => {
                write(format!("{version}_{name}.up.{ext}"), up);
                write(format!("{version}_{name}.down.{ext}"), down);
            }
            None => write(format!("{version}_{name}.{ext}"), up),
        }
        self
    }

    /// `count` trivial MongoDB migrations, each creating its own collection.
    pub(crate) fn collections(count: i64) -> Self {
        let m = Migrations::new();
        for v in 1..=count {
            m.add_as(
                "json",
                v,
                &format!("c{v}"),
                &format!(r#"[{{"create": "c{v}"}}]"#),
                Some(&format!(r#"[{{"drop": "c{v}"}}]"#)),
            );
        }
        m
    }

    /// `count` trivial migrations, each creating its own table.
    pub(crate) fn tables(count: i64) -> Self {
        let m = Migrations::new();
        for v in 1..=count {
            m.add(
                v,
                &format!("t{v}"),
                &format!("CREATE TABLE t{v} (id INT)"),
                Some(&format!("DROP TABLE t{v}")),
            );
        }
        m
    }
}

// ---------------------------------------------------------------------------------------
// Child processes and what they printed
// ---------------------------------------------------------------------------------------

/// Stdout and stderr of a finished process, as text.
pub(crate) fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The `applied` versions of a `--output json` run, or why there are none to read.
pub(crate) fn try_applied_versions(output: &Output) -> Result<Vec<i64>, String> {
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("not one JSON document ({e}): {:?}", text(output)))?;
    doc["applied"]
        .as_array()
        .ok_or_else(|| format!("no `applied` array: {:?}", text(output)))?
        .iter()
        .map(|step| {
            step["version"]
                .as_i64()
                .ok_or_else(|| format!("an applied step without a version: {step}"))
        })
        .collect()
}

/// The `applied` versions of a `--output json` run.
#[track_caller]
pub(crate) fn applied_versions(output: &Output) -> Vec<i64> {
    try_applied_versions(output).unwrap_or_else(|e| panic!("{e}"))
}

/// Starts a runner with its output captured.
pub(crate) fn spawn(mut cmd: Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
}

/// Waits for a child, killing it (and failing) if it runs past `limit`: a deadlock watchdog.
pub(crate) fn wait_with_watchdog(mut child: Child, limit: Duration) -> Output {
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "runner still running after {limit:?} (deadlock?): {:?}",
                text(&output)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `unlock --output json` (built afresh by `unlock` for each try) until it reports the
/// lock held; panics after 20 s.
pub(crate) fn wait_until_held(mut unlock: impl FnMut() -> Command) {
    let started = Instant::now();
    loop {
        let out = unlock().output().unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if doc["state"] == "held" {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the first runner never took the lock: {:?}",
            text(&out)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
