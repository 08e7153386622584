//! Each form of the table-lock timeout — `dirthara.toml`, `DIRTHARA_TABLE_LOCK_TIMEOUT`,
//! `--table-lock-timeout`, the per-file `-- dirthara:table-lock-timeout` — and `off`, in
//! real runs against a held blocker: a short timeout is the one in force for a migration's
//! statements (migration 1 records it) and makes the blocked statement give way (with one
//! attempt allowed, the run fails); `off` makes it wait past the default 2 s, until the
//! blocker ends. Then the retry budget, from the file and the environment.

use std::process::Command;
use std::time::Duration;

use super::{columns, users, wait_until_waited, Blocker};
use crate::support::servers::{Server, TestDb};
use crate::support::Migrations;
use crate::support::{dirthara, dirthara_command, scratch_dir, spawn, text, wait_with_watchdog};

/// Where a setting is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    File,
    Environment,
    Flag,
    Directive,
}

/// A project whose migration 1 records the table-lock timeout in force for its statements
/// (table `seen`), and whose migration 2 alters `users`; the timeout given as `form`.
struct Project {
    dir: tempfile::TempDir,
    form: Form,
    value: &'static str,
}

impl Project {
    fn new(server: Server, form: Form, value: &'static str) -> Project {
        let dir = scratch_dir();
        let migrations = dir.path().join("migrations");
        std::fs::create_dir(&migrations).unwrap();
        let directive = match form {
            Form::Directive => format!("-- dirthara:table-lock-timeout {value}\n"),
            _ => String::new(),
        };
        let in_force = match server {
            Server::Postgres => "current_setting('lock_timeout')",
            _ => "CAST(@@SESSION.lock_wait_timeout AS CHAR)",
        };
        let write = |file: &str, text: String| std::fs::write(migrations.join(file), text).unwrap();
        write(
            "1_seen.sql",
            format!("{directive}CREATE TABLE seen AS SELECT {in_force} AS v;\n"),
        );
        write(
            "2_add_c.sql",
            format!("{directive}ALTER TABLE users ADD COLUMN c INT;\n"),
        );
        std::fs::write(
            dir.path().join("dirthara.toml"),
            format!("table_lock_timeout = \"{value}\"\n"),
        )
        .unwrap();
        Project { dir, form, value }
    }

    /// `dirthara migrate <args>` with the timeout given as the project's form (one attempt).
    fn migrate(&self, db: &TestDb) -> Command {
        let mut cmd = dirthara_command();
        cmd.arg("-d")
            .arg(&db.url)
            .arg("--dir")
            .arg(self.dir.path().join("migrations"));
        if self.form == Form::File {
            cmd.arg("--config")
                .arg(self.dir.path().join("dirthara.toml"));
        }
        if self.form == Form::Environment {
            cmd.env("DIRTHARA_TABLE_LOCK_TIMEOUT", self.value);
        }
        cmd.args(["migrate", "--table-lock-retry-for", "0"]);
        if self.form == Form::Flag {
            cmd.args(["--table-lock-timeout", self.value]);
        }
        cmd
    }
}

/// A short timeout given as `form` is the one in force, and the blocked statement gives way.
async fn a_short_timeout_gives_way(server: Server, form: Form) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    users(&db).await;
    let project = Project::new(server, form, "900ms");
    let blocker = Blocker::hold(&db).await;
    // Without a timeout the run would wait for the blocker, which outlives the watchdog.
    let out = wait_with_watchdog(spawn(project.migrate(&db)), Duration::from_secs(30));
    blocker.end().await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{form:?}: {stdout}\n{stderr}");
    assert!(
        stderr.contains("Error [TABLE_LOCK_TIMEOUT]: migration 2 (add_c)"),
        "{form:?}: {stderr}"
    );
    // MySQL counts whole seconds, rounded up.
    let in_force = match server {
        Server::Postgres => "900ms",
        _ => "1",
    };
    assert_eq!(
        db.strings("SELECT v FROM seen").await,
        [in_force],
        "{form:?}"
    );
    assert_eq!(columns(&db).await, ["id"], "{form:?}");
}

/// `off` given as `form`: the blocked statement waits past the default timeout, until the
/// blocker ends, and is applied.
async fn off_waits_for_the_blocker(server: Server, form: Form) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    users(&db).await;
    let project = Project::new(server, form, "off");
    let blocker = Blocker::hold(&db).await;
    let child = spawn(project.migrate(&db));
    wait_until_waited(&db, "ALTER TABLE users", Duration::from_millis(2500)).await;
    blocker.end().await;
    let out = wait_with_watchdog(child, Duration::from_secs(30));
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{form:?}: {stdout}\n{stderr}");
    assert!(!stderr.contains("TABLE_LOCK_TIMEOUT"), "{form:?}: {stderr}");
    assert_eq!(columns(&db).await, ["c", "id"], "{form:?}");
    // No timeout of ours: the session's own.
    let own = match server {
        Server::Postgres => "SELECT current_setting('lock_timeout')",
        _ => "SELECT CAST(@@SESSION.lock_wait_timeout AS CHAR)",
    };
    let own = db.strings(own).await;
    assert_eq!(db.strings("SELECT v FROM seen").await, own, "{form:?}");
}

async fn each_way_takes_effect(server: Server, form: Form) {
    a_short_timeout_gives_way(server, form).await;
    off_waits_for_the_blocker(server, form).await;
}

macro_rules! forms {
    ($($test:ident: $server:expr, $form:expr;)*) => {$(
        #[tokio::test(flavor = "multi_thread")]
        async fn $test() {
            each_way_takes_effect($server, $form).await;
        }
    )*};
}

forms! {
    postgres_the_timeout_from_the_file_takes_effect: Server::Postgres, Form::File;
    postgres_the_timeout_from_the_environment_takes_effect: Server::Postgres, Form::Environment;
    postgres_the_timeout_from_the_flag_takes_effect: Server::Postgres, Form::Flag;
    postgres_the_timeout_from_the_directive_takes_effect: Server::Postgres, Form::Directive;
    mariadb_the_timeout_from_the_file_takes_effect: Server::Mysql, Form::File;
    mariadb_the_timeout_from_the_environment_takes_effect: Server::Mysql, Form::Environment;
    mariadb_the_timeout_from_the_flag_takes_effect: Server::Mysql, Form::Flag;
    mariadb_the_timeout_from_the_directive_takes_effect: Server::Mysql, Form::Directive;
}

/// The attempts a TABLE_LOCK_TIMEOUT error says were made.
fn attempts(stderr: &str) -> usize {
    let line = (stderr.lines())
        .find(|l| l.starts_with("Error [TABLE_LOCK_TIMEOUT]"))
        .unwrap_or_else(|| panic!("no TABLE_LOCK_TIMEOUT error: {stderr}"));
    let (before, _) = line
        .split_once(" time(s)")
        .unwrap_or_else(|| panic!("no attempt count: {line}"));
    let count = before.rsplit(' ').next().unwrap_or_default();
    count
        .parse()
        .unwrap_or_else(|_| panic!("no attempt count: {line}"))
}

/// `table_lock_retry_for` from `dirthara.toml` (`0`: one attempt), and
/// `DIRTHARA_TABLE_LOCK_RETRY_FOR` over it (a budget that leaves room for a second one).
#[tokio::test(flavor = "multi_thread")]
async fn the_retry_budget_is_set_by_file_and_environment() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(1, "add_c", "ALTER TABLE users ADD COLUMN c INT;", None);
    let dir = scratch_dir();
    let config = dir.path().join("dirthara.toml");
    std::fs::write(&config, "table_lock_retry_for = \"0\"\n").unwrap();
    let run = |env: Option<&str>| {
        let mut cmd = dirthara(&db.url, m.path(), &[]);
        cmd.arg("--config")
            .arg(&config)
            .args(["migrate", "--table-lock-timeout", "300ms"]);
        if let Some(budget) = env {
            cmd.env("DIRTHARA_TABLE_LOCK_RETRY_FOR", budget);
        }
        // A budget not read would retry for the default 10 minutes: a hang, and a failure.
        wait_with_watchdog(spawn(cmd), Duration::from_secs(30))
    };
    let blocker = Blocker::hold(&db).await;
    let from_file = run(None);
    let from_env = run(Some("3s"));
    blocker.end().await;
    let (_, stderr) = text(&from_file);
    assert_eq!(from_file.status.code(), Some(1), "{stderr}");
    assert_eq!(attempts(&stderr), 1, "{stderr}");
    assert!(!stderr.contains("warning [TABLE_LOCK_TIMEOUT]"), "{stderr}");
    // A first pause of at most six timeouts (1.8 s) fits in 3 s: at least two attempts.
    let (_, stderr) = text(&from_env);
    assert_eq!(from_env.status.code(), Some(1), "{stderr}");
    assert!(attempts(&stderr) >= 2, "{stderr}");
    assert!(stderr.contains("warning [TABLE_LOCK_TIMEOUT]"), "{stderr}");
    assert_eq!(columns(&db).await, ["id"]);
    assert_eq!(db.history().await, vec![]);
}
