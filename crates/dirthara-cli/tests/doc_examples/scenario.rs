//! Where a page's examples run: a scenario is an empty directory (the reader's project), a
//! shell state carried from one command to the next (`export`, `cd`, `$?`), the databases it
//! declared on the test servers, and the runners it started in the background. A page starts
//! with one; `<!-- doctest:fresh -->` starts the next.
//!
//! The commands are run by bash exactly as written, with this build's `dirthara` first on
//! `PATH` and nothing of the caller's environment but `PATH` and `HOME`. A database the
//! scenario declares (`<!-- doctest:database postgres app -->`) is a fresh one on the test
//! server; every URL the examples write for it (`postgres://postgres@127.0.0.1:5432/app`) is
//! pointed at it, and its real name is written back as `app` in what the commands print.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::support::pgbouncer::PgBouncer;
use crate::support::servers::{Server, TestDb};

/// Shell functions the hidden setup of an example may use, defined in every shell.
const HELPERS: &str = r#"
# Until `dirthara [ARGS] unlock` reports the lock held (a runner started in the background
# took it); fails after 20 s.
doctest_wait_held() {
  for _ in $(seq 400); do
    dirthara "$@" --output json unlock 2>/dev/null | grep -q '"state": "held"' && return 0
    sleep 0.05
  done
  echo "the lock was never held" >&2; return 1
}
# Until the shell condition given holds (a background runner got that far); fails after 20 s.
doctest_wait_until() {
  for _ in $(seq 400); do
    eval "$1" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "never true: $1" >&2; return 1
}
"#;

/// The server a doc names by its usual local address, and the address the docs write.
fn server(kind: &str) -> (Server, &'static str) {
    match kind {
        "postgres" => (Server::Postgres, "127.0.0.1:5432"),
        "mysql" => (Server::Mysql, "127.0.0.1:3306"),
        "mongodb" => (Server::Mongo, "127.0.0.1:27018"),
        other => panic!("unknown server `{other}` (postgres, mysql, mongodb)"),
    }
}

pub(crate) struct Scenario {
    sandbox: TempDir,
    /// The shell's state between commands, the background runners' output.
    state: TempDir,
    /// (what the docs write, what the commands must use instead).
    rewrites: Vec<(String, String)>,
    /// Each declared database: its name in the docs, the address the docs give its server.
    databases: Vec<(String, &'static str, TestDb)>,
    jobs: HashMap<String, Child>,
    bouncers: Vec<PgBouncer>,
    /// Set when a declared server is missing and servers are not required.
    pub skipped: Option<String>,
}

impl Scenario {
    pub(crate) fn new() -> Scenario {
        let scenario = Scenario {
            sandbox: crate::support::scratch_dir(),
            state: crate::support::scratch_dir(),
            rewrites: Vec::new(),
            databases: Vec::new(),
            jobs: HashMap::new(),
            bouncers: Vec::new(),
            skipped: None,
        };
        std::fs::write(scenario.state.path().join("env"), "").unwrap();
        std::fs::write(scenario.state.path().join("status"), "0").unwrap();
        let sandbox = scenario.sandbox.path().display().to_string();
        std::fs::write(scenario.state.path().join("cwd"), sandbox).unwrap();
        scenario
    }

    pub(crate) fn path(&self) -> &Path {
        self.sandbox.path()
    }

    /// A fresh database on `kind`'s test server, known to the examples as `name`.
    pub(crate) fn database(&mut self, kind: &str, name: &str) {
        let (server, doc_address) = server(kind);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let Some(db) = runtime.block_on(TestDb::create(server)) else {
            self.skipped = Some(format!("no {kind} server"));
            return;
        };
        let actual = format!("{}/{}", db.host_port(), db.name);
        self.rewrites
            .push((format!("{doc_address}/{name}"), actual));
        if db.host_port() != doc_address {
            self.rewrites
                .push((doc_address.to_string(), db.host_port().to_string()));
        }
        self.databases.push((name.to_string(), doc_address, db));
    }

    /// A transaction-pooling PgBouncer in front of the declared PostgreSQL database `name`,
    /// which the examples reach as `postgres://app@pgbouncer:6432/<name>`.
    pub(crate) fn pgbouncer(&mut self, name: &str) {
        let (_, _, db) = (self.databases.iter())
            .find(|(doc_name, _, db)| doc_name == name && db.server == Server::Postgres)
            .unwrap_or_else(|| panic!("no PostgreSQL database `{name}` declared"));
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let Some(bouncer) = runtime.block_on(PgBouncer::start(db, 2)) else {
            self.skipped = Some("no PgBouncer".into());
            return;
        };
        let actual = bouncer.url();
        let actual = actual.strip_prefix("postgres://").unwrap();
        self.rewrites.insert(
            0,
            (format!("app@pgbouncer:6432/{name}"), actual.to_string()),
        );
        self.bouncers.push(bouncer);
    }

    /// `text` as the commands must run it: the docs' addresses pointed at the test databases.
    fn rewritten(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (doc, actual) in &self.rewrites {
            text = text.replace(doc, actual);
        }
        text
    }

    /// What a command printed, with the test databases' names and addresses as the docs
    /// write them.
    pub(crate) fn as_documented(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (doc_name, doc_address, db) in &self.databases {
            text = text.replace(&db.name, doc_name);
            let actual_address = db.host_port();
            if *doc_address != actual_address {
                text = text.replace(&actual_address, doc_address);
            }
        }
        text
    }

    /// bash running `script` in the scenario's shell state; with `keep_state`, the state it
    /// leaves (variables, directory, exit status) is what the next command starts from.
    fn shell(&self, script: &str, keep_state: bool) -> Command {
        let state = self.state.path();
        let bin_dir = crate::support::dirthara_bin()
            .parent()
            .unwrap()
            .to_path_buf();
        let mut wrapped = format!(
            "{HELPERS}\nsource \"$DOCTEST_STATE/env\"\ncd \"$(cat \"$DOCTEST_STATE/cwd\")\"\n"
        );
        if keep_state {
            wrapped.push_str("(exit \"$(cat \"$DOCTEST_STATE/status\")\")\n");
        }
        wrapped.push_str(&self.rewritten(script));
        if keep_state {
            wrapped.push_str(
                "\n__doctest_status=$?\nexport -p > \"$DOCTEST_STATE/env\"\n\
                 pwd > \"$DOCTEST_STATE/cwd\"\necho $__doctest_status > \"$DOCTEST_STATE/status\"\n\
                 exit $__doctest_status\n",
            );
        }
        let mut cmd = Command::new("bash");
        cmd.args(["--noprofile", "--norc", "-c", &wrapped])
            .current_dir(self.path())
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", bin_dir.display()),
            )
            .env("HOME", self.path())
            .env("LANG", "C.UTF-8")
            // `time` prints the one line the docs show.
            .env("TIMEFORMAT", "real\t%3lR")
            .env("DOCTEST_STATE", state)
            .env("DOCTEST_REPO", repo_root())
            .stdin(Stdio::null());
        cmd
    }

    /// Runs one command of an example, as a reader types it.
    pub(crate) fn command(&self, line: &str) -> Output {
        self.shell(line, true).output().unwrap()
    }

    /// Runs an example's hidden setup; it must succeed.
    pub(crate) fn setup(&self, script: &str, at: &str) {
        let out = self
            .shell(&format!("set -e\n{script}"), true)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{at}: the setup failed:\n{script}\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts `script` in the background as the runner `name`; its pid is in
    /// `$DOCTEST_STATE/<name>.pid`, and `exec` in the script makes it the command's own.
    pub(crate) fn spawn(&mut self, name: &str, script: &str) {
        use std::os::unix::process::CommandExt;
        let out = std::fs::File::create(self.state.path().join(format!("{name}.out"))).unwrap();
        let err = std::fs::File::create(self.state.path().join(format!("{name}.err"))).unwrap();
        let child = self
            .shell(script, false)
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .unwrap();
        std::fs::write(
            self.state.path().join(format!("{name}.pid")),
            child.id().to_string(),
        )
        .unwrap();
        self.jobs.insert(name.to_string(), child);
    }

    /// Waits (at most a minute) for the background runner `name` to end; its stdout and
    /// stderr.
    pub(crate) fn finish(&mut self, name: &str) -> (String, String) {
        let mut child = self
            .jobs
            .remove(name)
            .unwrap_or_else(|| panic!("no runner `{name}` was started"));
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "`{name}` did not end"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let read = |ext: &str| {
            std::fs::read_to_string(self.state.path().join(format!("{name}.{ext}"))).unwrap()
        };
        (read("out"), read("err"))
    }
}

impl Drop for Scenario {
    /// Runners still going at the end were the scenario's own: their whole process groups go.
    fn drop(&mut self) {
        for child in self.jobs.values_mut() {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = child.wait();
        }
    }
}

pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
