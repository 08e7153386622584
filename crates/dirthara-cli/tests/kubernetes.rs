//! Kubernetes without glue: `--shard auto` takes the shard a Job's 0-based
//! `JOB_COMPLETION_INDEX` (or Nomad's `NOMAD_ALLOC_INDEX`) names, counted by
//! `DIRTHARA_SHARD_COUNT` or `auto/N`, on real fleets of PostgreSQL and MariaDB databases;
//! `--summary-file` leaves one line of JSON saying how the run ended (for
//! `/dev/termination-log`) on success, failure and SIGTERM, with no password in it, and a
//! summary that cannot be written is said without hiding the run's own error.

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::project::Project;
use support::servers::{Server, TestDb};
use support::{dirthara_command, scratch_dir, text, Migrations};

crate::scenario_tests! {
    postgres => Server::Postgres => [
        shard_auto_takes_the_targets_of_the_shard_its_index_names,
        a_dirty_target_of_a_targets_file_gets_a_hint_that_selects_it_alone,
        the_summary_of_a_fleet_run_names_its_failed_targets_and_no_password,
    ],
    mariadb => Server::Mysql => [
        shard_auto_takes_the_targets_of_the_shard_its_index_names,
        a_dirty_target_of_a_targets_file_gets_a_hint_that_selects_it_alone,
        the_summary_of_a_fleet_run_names_its_failed_targets_and_no_password,
    ],
}

/// Tenant databases beside a test database, listed in a targets file by these names (fixed
/// names, so the split into two shards is known: neither shard is empty).
const NAMES: [&str; 6] = ["acme", "globex", "hooli", "soylent", "tyrell", "wayne"];

struct Fleet {
    db: TestDb,
    tenants: Vec<(String, TestDb)>,
    /// Holds the targets file and the summary files.
    dir: tempfile::TempDir,
}

impl Fleet {
    async fn new(server: Server, names: &[&str]) -> Option<Fleet> {
        let db = TestDb::create(server).await?;
        let mut tenants = Vec::new();
        for name in names {
            tenants.push((
                name.to_string(),
                db.sibling(&format!("tenant_{name}")).await,
            ));
        }
        let fleet = Fleet {
            db,
            tenants,
            dir: scratch_dir(),
        };
        fleet.write_targets(&[]);
        Some(fleet)
    }

    /// The targets file: every tenant, then `extra` lines.
    fn write_targets(&self, extra: &[String]) {
        let mut lines: Vec<String> = (self.tenants.iter())
            .map(|(name, db)| format!("{name} {}", db.url))
            .collect();
        lines.extend(extra.iter().cloned());
        std::fs::write(self.path("targets.txt"), lines.join("\n") + "\n").unwrap();
    }

    fn path(&self, file: &str) -> std::path::PathBuf {
        self.dir.path().join(file)
    }

    fn tenant(&self, name: &str) -> &TestDb {
        &(self.tenants.iter().find(|(n, _)| n == name).unwrap()).1
    }

    /// `dirthara --targets <file> <args>` with exactly `env` set besides a clean environment.
    fn run(&self, m: &Migrations, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = dirthara_command();
        cmd.arg("-d").arg(&self.db.url).arg("--dir").arg(m.path());
        cmd.arg("--targets")
            .arg(self.path("targets.txt"))
            .args(args);
        cmd.envs(env.iter().copied());
        cmd.output().unwrap()
    }
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {:?}", text(output)))
}

/// The names of a fleet report's targets, in order.
fn names(report: &Value) -> Vec<String> {
    (report["targets"].as_array().unwrap().iter())
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// The summary file at `path`: exactly one line of JSON, which it returns parsed.
fn summary(path: &Path) -> Value {
    let written = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("no summary at {}: {e}", path.display()));
    let line = written.strip_suffix('\n').unwrap_or_else(|| {
        panic!("the summary does not end with a newline: {written:?}");
    });
    assert!(!line.contains('\n'), "more than one line: {written}");
    assert!(
        line.len() < 4096,
        "longer than Kubernetes keeps: {}",
        line.len()
    );
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

async fn shard_auto_takes_the_targets_of_the_shard_its_index_names(server: Server) {
    let Some(fleet) = Fleet::new(server, &NAMES).await else {
        return;
    };
    let m = Migrations::tables(1);
    let status = ["status", "--output", "json"];
    let mut shards = Vec::new();
    for (index, fixed) in [("0", "1/2"), ("1", "2/2")] {
        let env = [
            ("JOB_COMPLETION_INDEX", index),
            ("DIRTHARA_SHARD_COUNT", "2"),
        ];
        let auto = fleet.run(&m, &[&["--shard", "auto"][..], &status].concat(), &env);
        let by_hand = fleet.run(&m, &[&["--shard", fixed][..], &status].concat(), &[]);
        assert!(auto.status.success(), "{:?}", text(&auto));
        assert!(by_hand.status.success(), "{:?}", text(&by_hand));
        // No warning that DIRTHARA_SHARD_COUNT is no setting: it is one.
        assert_eq!(text(&auto).1, "", "index {index}");
        let (auto, by_hand) = (names(&json(&auto)), names(&json(&by_hand)));
        assert_eq!(
            auto, by_hand,
            "JOB_COMPLETION_INDEX={index} is --shard {fixed}"
        );
        assert!(!auto.is_empty(), "shard {fixed} of these names is empty");
        shards.push(auto);
    }
    assert_eq!(shards[0].len() + shards[1].len(), NAMES.len());
    // Nomad's index, and the count from auto/N.
    let nomad = fleet.run(
        &m,
        &[&["--shard", "auto/2"][..], &status].concat(),
        &[("NOMAD_ALLOC_INDEX", "1")],
    );
    assert!(nomad.status.success(), "{:?}", text(&nomad));
    assert_eq!(names(&json(&nomad)), shards[1]);
    // `[fleet] shard = "auto"` in dirthara.toml reads the same variables; `--shard` wins.
    let toml = fleet.path("dirthara.toml");
    std::fs::write(&toml, "[fleet]\nshard = \"auto\"\n").unwrap();
    let config = ["--config", toml.to_str().unwrap()];
    let env = [("JOB_COMPLETION_INDEX", "1"), ("DIRTHARA_SHARD_COUNT", "2")];
    let from_file = fleet.run(&m, &[&config[..], &status].concat(), &env);
    assert!(from_file.status.success(), "{:?}", text(&from_file));
    assert_eq!(names(&json(&from_file)), shards[1]);
    let flag = fleet.run(
        &m,
        &[&config[..], &["--shard", "1/2"], &status].concat(),
        &env,
    );
    assert_eq!(names(&json(&flag)), shards[0]);

    // Index 0 migrates shard 1/2's targets, and no other.
    let env = [("JOB_COMPLETION_INDEX", "0"), ("DIRTHARA_SHARD_COUNT", "2")];
    let migrate = fleet.run(
        &m,
        &["--shard", "auto", "migrate", "--output", "json"],
        &env,
    );
    assert!(migrate.status.success(), "{:?}", text(&migrate));
    assert_eq!(names(&json(&migrate)), shards[0]);
    for (name, db) in &fleet.tenants {
        let migrated = db.tables().await.contains(&"t1".to_string());
        assert_eq!(migrated, shards[0].contains(name), "{name}");
    }

    // Index 2 of 2 shards: refused before any target is touched, naming the variable.
    let env = [("JOB_COMPLETION_INDEX", "2"), ("DIRTHARA_SHARD_COUNT", "2")];
    let beyond = fleet.run(&m, &["--shard", "auto", "migrate"], &env);
    let (_, stderr) = text(&beyond);
    assert_eq!(beyond.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("Error [CONFIG_ERROR]: --shard auto: JOB_COMPLETION_INDEX is 2, but"),
        "{stderr}"
    );
    for name in &shards[1] {
        assert!(!fleet.tenant(name).tables().await.contains(&"t1".into()));
    }
}

/// A target of a targets file left dirty by a crash: the hint its error prints names the
/// file and `--target NAME`, so pasted as printed it resolves that target and no other;
/// `--target` naming no target is refused with the nearest name.
async fn a_dirty_target_of_a_targets_file_gets_a_hint_that_selects_it_alone(server: Server) {
    let Some(fleet) = Fleet::new(server, &NAMES[..3]).await else {
        return;
    };
    let migrate = fleet.run(&Migrations::tables(1), &["migrate"], &[]);
    assert!(migrate.status.success(), "{:?}", text(&migrate));
    (fleet.tenant("globex"))
        .execute("UPDATE dirthara_migrations SET state = 'running' WHERE version = 1")
        .await;
    let m = Migrations::tables(2);
    let run = fleet.run(&m, &["--keep-going", "migrate"], &[]);
    let (stdout, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(1), "{stdout}\n{stderr}");
    let hint = (stderr.split('`'))
        .find(|part| part.starts_with("dirthara ") && part.ends_with("resolve 1 --applied"))
        .unwrap_or_else(|| panic!("no resolve hint in: {stderr}"));
    let file = fleet.path("targets.txt");
    assert_eq!(
        hint,
        format!(
            "dirthara --targets {} --target globex resolve 1 --applied",
            file.display()
        )
    );
    // Pasted as printed (the path has no space), with the run's database and directory.
    let words: Vec<&str> = hint.split(' ').skip(1).collect();
    let mut pasted = dirthara_command();
    (pasted
        .arg("-d")
        .arg(&fleet.db.url)
        .arg("--dir")
        .arg(m.path()))
    .args(&words)
    .args(["--output", "json"]);
    let pasted = pasted.output().unwrap();
    assert!(pasted.status.success(), "{:?}", text(&pasted));
    let json = json(&pasted);
    assert_eq!(names(&json), ["globex"]);
    assert_eq!(fleet.tenant("globex").history().await[0].2, "applied");
    // --target naming no target: refused before any target is touched.
    let typo = fleet.run(&m, &["--target", "globx", "migrate"], &[]);
    let (_, stderr) = text(&typo);
    assert_eq!(typo.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--target: `globx` is not a target of --targets")
            && stderr.contains("(did you mean `globex`?)"),
        "{stderr}"
    );
    // globex, resolved, still has migration 2 pending: nothing ran.
    let globex = fleet.tenant("globex").tables().await;
    assert!(!globex.contains(&"t2".to_string()), "{globex:?}");
}

async fn the_summary_of_a_fleet_run_names_its_failed_targets_and_no_password(server: Server) {
    let Some(fleet) = Fleet::new(server, &NAMES[..3]).await else {
        return;
    };
    let m = Migrations::tables(1);
    // globex fails its migration; ghost, listed with a password, cannot be reached at all.
    fleet
        .tenant("globex")
        .execute("CREATE TABLE t1 (id INT)")
        .await;
    let scheme = match server {
        Server::Postgres => "postgres",
        _ => "mysql",
    };
    fleet.write_targets(&[format!("ghost {scheme}://app:s3cret@127.0.0.1:1/ghost")]);
    let file = fleet.path("summary.json");
    let file_arg = file.to_str().unwrap();
    let args = [
        "--shard",
        "auto",
        "--keep-going",
        "--connect-timeout",
        "1s",
        "--summary-file",
        file_arg,
        "--output",
        "json",
        "migrate",
    ];
    let env = [("JOB_COMPLETION_INDEX", "0"), ("DIRTHARA_SHARD_COUNT", "1")];
    let run = fleet.run(&m, &args, &env);
    let (stdout, stderr) = text(&run);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    // The report on stdout is as it always is: one document.
    assert_eq!(json(&run)["totals"]["failed"], 2);
    let doc = summary(&file);
    assert_eq!(doc["command"], "migrate");
    assert_eq!(doc["outcome"], "failed");
    assert_eq!(doc["exit_code"], 1);
    assert_eq!(doc["shard"], "1/1");
    assert_eq!(doc["totals"]["targets"], 4);
    assert_eq!(doc["totals"]["applied"], 2);
    assert_eq!(doc["totals"]["failed"], 2);
    let failed: Vec<(&str, &str)> = (doc["failed"].as_array().unwrap().iter())
        .map(|t| (t["name"].as_str().unwrap(), t["code"].as_str().unwrap()))
        .collect();
    assert_eq!(
        failed,
        [
            ("globex", "MIGRATION_FAILED"),
            ("ghost", "CONNECTION_ERROR")
        ]
    );
    assert_eq!(doc["error"]["code"], "MIGRATION_FAILED");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("2 of 4 target(s) failed"), "{message}");
    let written = std::fs::read_to_string(&file).unwrap();
    for printed in [&written, &stdout, &stderr] {
        assert!(!printed.contains("s3cret"), "a password printed: {printed}");
    }

    // Repaired and rerun: the same file now says every target succeeded.
    fleet.tenant("globex").execute("DROP TABLE t1").await;
    fleet.write_targets(&[]);
    let run = fleet.run(&m, &args, &env);
    assert!(run.status.success(), "{:?}", text(&run));
    let doc = summary(&file);
    assert_eq!(doc["outcome"], "succeeded");
    assert_eq!(doc["exit_code"], 0);
    assert_eq!(doc["error"], Value::Null);
    assert_eq!(doc["failed"], serde_json::json!([]));
    assert_eq!(doc["totals"]["applied"], 1);
    assert_eq!(doc["totals"]["up_to_date"], 2);
}

/// A pod deleted mid-run gets SIGTERM: the summary says the run was interrupted, and the
/// exit code it gives is the process's, 143.
#[tokio::test]
async fn the_summary_of_a_run_stopped_by_sigterm_says_interrupted_and_143() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "slow",
        "CREATE TABLE first (id INT);\nSELECT pg_sleep(1.5);",
        None,
    );
    m.add(2, "second", "CREATE TABLE second (id INT)", None);
    let dir = scratch_dir();
    let file = dir.path().join("termination-log");
    let child = support::dirthara(&db.url, m.path(), &["migrate", "--summary-file"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let sleeping = "SELECT query FROM pg_stat_activity WHERE datname = current_database() \
                    AND query LIKE '%pg_sleep(1.5)%' AND pid <> pg_backend_pid()";
    while db.strings(sleeping).await.is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never reached the slow step"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{:?}", text(&out));
    let doc = summary(&file);
    assert_eq!(doc["outcome"], "interrupted");
    assert_eq!(doc["exit_code"], 143);
    assert_eq!(doc["error"]["code"], "INTERRUPTED");
    // What it finished and recorded before it stopped.
    assert_eq!(doc["applied"], 1);
}

#[test]
fn the_summary_of_a_single_database_run_says_how_it_ended_on_one_line() {
    let p = Project::new();
    p.table_migration(1, "create_users", "users");
    p.table_migration(2, "create_orders", "orders");
    p.unlocked("app.db", &["--summary-file", "summary.json", "migrate"])
        .success();
    let doc = summary(&p.join("summary.json"));
    assert_eq!(
        doc,
        serde_json::json!({
            "command": "migrate", "outcome": "succeeded", "exit_code": 0,
            "applied": 2, "reverted": 0, "recorded": 0, "batch": 1, "error": null
        })
    );
    // A failure: the error's code and message, on one line although the message has two.
    p.migration("3_broken.up.sql", "CREATE TABLE users (id INT);");
    p.unlocked("app.db", &["--summary-file", "summary.json", "migrate"])
        .error("MIGRATION_FAILED");
    let doc = summary(&p.join("summary.json"));
    assert_eq!(doc["outcome"], "failed");
    assert_eq!(doc["exit_code"], 1);
    assert_eq!(doc["error"]["code"], "MIGRATION_FAILED");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("migration 3 (broken) failed") && message.contains("\n  at line 1"),
        "{message}"
    );
    // A configuration error, before any database is touched, is summed up too.
    p.unlocked(
        "app.db",
        &[
            "--summary-file",
            "summary.json",
            "--shard",
            "auto",
            "migrate",
        ],
    )
    .error("CONFIG_ERROR")
    .stderr_has("neither JOB_COMPLETION_INDEX");
    let doc = summary(&p.join("summary.json"));
    assert_eq!(doc["error"]["code"], "CONFIG_ERROR");
    assert!(doc["error"]["message"]
        .as_str()
        .unwrap()
        .contains("JOB_COMPLETION_INDEX"));
}

#[test]
fn a_summary_that_cannot_be_written_is_an_error_naming_the_file_after_the_runs_own() {
    let p = Project::new();
    p.table_migration(1, "create_users", "users");
    let nowhere = p.join("no-such-directory/summary.json");
    let nowhere = nowhere.to_str().unwrap();
    // The run succeeded: it fails for want of its summary, and its result is still the one
    // document on stdout.
    let run = p.unlocked(
        "app.db",
        &["--summary-file", nowhere, "--output", "json", "migrate"],
    );
    run.error("IO_ERROR").stderr_has(&format!(
        "cannot write the summary file {nowhere} (--summary-file)"
    ));
    assert_eq!(run.json()["applied"][0]["version"], 1);
    // The run failed: its own error comes first and keeps its place on stdout and its code.
    p.migration("2_broken.up.sql", "CREATE TABLE users (id INT);");
    let run = p.unlocked(
        "app.db",
        &["--summary-file", nowhere, "--output", "json", "migrate"],
    );
    run.error("MIGRATION_FAILED");
    let errors: Vec<&str> = (run.stderr.lines())
        .filter(|l| l.starts_with("Error ["))
        .collect();
    assert_eq!(errors.len(), 2, "{}", run.stderr);
    assert!(errors[0].starts_with("Error [MIGRATION_FAILED]: migration 2 (broken)"));
    assert!(errors[1].starts_with("Error [IO_ERROR]: cannot write the summary file"));
    assert_eq!(run.json()["error"]["code"], "MIGRATION_FAILED");
}

#[test]
fn shard_auto_without_its_variables_is_a_config_error_naming_them() {
    let p = Project::new();
    p.table_migration(1, "create_users", "users");
    let run = |env: &[(&str, &str)], shard: &str| {
        support::run::run_command(p.cmd().envs(env.iter().copied()).args([
            "-d",
            "sqlite:app.db",
            "--no-lock",
            "--shard",
            shard,
            "migrate",
        ]))
    };
    run(&[("DIRTHARA_SHARD_COUNT", "2")], "auto")
        .error("CONFIG_ERROR")
        .stderr_has("neither JOB_COMPLETION_INDEX")
        .stderr_has("or pass --shard I/N");
    run(&[("JOB_COMPLETION_INDEX", "0")], "auto")
        .error("CONFIG_ERROR")
        .stderr_has("set DIRTHARA_SHARD_COUNT to the Job's `completions`");
    run(
        &[
            ("JOB_COMPLETION_INDEX", "first"),
            ("DIRTHARA_SHARD_COUNT", "2"),
        ],
        "auto",
    )
    .error("CONFIG_ERROR")
    .stderr_has("JOB_COMPLETION_INDEX is `first`, not a shard index");
    // A typo of the count's name is named, and the count then missing.
    run(
        &[("JOB_COMPLETION_INDEX", "0"), ("DIRTHARA_SHARD_CONT", "2")],
        "auto",
    )
    .error("CONFIG_ERROR")
    .stderr_has("did you mean `DIRTHARA_SHARD_COUNT`?");
    // Text that is no shard at all is a usage error, as before.
    run(&[], "auto/0").code(2).stderr_has("auto/N");
    // Nothing was migrated by any of them.
    assert!(!p.exists("app.db") || p.tables("app.db").iter().all(|t| t != "users"));
}
