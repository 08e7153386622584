//! Migrations that never stall production: a statement waits for its table (metadata) lock
//! at most `table_lock_timeout`, gives way to the application's queries, and the step is
//! tried again with backoff until the blocker is gone or `table_lock_retry_for` runs out —
//! on the real PostgreSQL and MariaDB, with a real blocker: a transaction that read the
//! table and stays open.
//!
//! Here: giving way and being applied once the blocker is gone, a spent budget, MySQL's
//! resumption at the statement that gave way, signals between attempts, `CONCURRENTLY`, and
//! what `preview` says. More in [`table_lock_cases`]: the settings' forms in real runs, who
//! is named as the blocker, the traps, PgBouncer, and the pause cut short.

mod support;
mod table_lock_cases;

use std::process::Stdio;
use std::time::{Duration, Instant};

use support::servers::{Server, TestDb};
use support::{dirthara, text, wait_with_watchdog, Migrations};
use table_lock_cases::{columns, ndjson, users, Blocker};

/// The blocker ends after 3 s; each attempt waits 500 ms: the step gives way, is tried again,
/// and is applied once the blocker is gone. Each retry names the blocker, in ndjson too.
async fn a_migration_gives_way_and_is_applied_once_the_blocker_is_gone(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(1, "add_c", "ALTER TABLE users ADD COLUMN c INT;", None);
    let blocker = Blocker::hold(&db).await;
    let session = blocker.session;
    let holder = blocker.end_after(Duration::from_secs(3));
    let out = dirthara(
        &db.url,
        m.path(),
        &[
            "migrate",
            "--table-lock-timeout",
            "500ms",
            "--output",
            "ndjson",
        ],
    )
    .output()
    .unwrap();
    holder.await.unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let events = ndjson(&stdout);
    let retries: Vec<&serde_json::Value> = (events.iter())
        .filter(|e| e["event"] == "table_lock_timeout")
        .collect();
    assert!(!retries.is_empty(), "never gave way: {stdout}");
    let first = retries[0];
    assert_eq!(first["version"], 1);
    assert_eq!(first["attempt"], 1);
    let blocker = &first["blocker"];
    assert_eq!(
        blocker["session_id"], session,
        "the blocker is named: {first}"
    );
    assert_eq!(first["table"], "users", "{first}");
    // The wait as the database bounded it: MySQL counts whole seconds, and says so.
    match server {
        Server::Postgres => {
            assert_eq!(first["waited_ms"], 500, "{first}");
            assert!(first.get("rounded_from_ms").is_none(), "{first}");
        }
        _ => {
            assert_eq!(first["waited_ms"], 1000, "{first}");
            assert_eq!(first["rounded_from_ms"], 500, "{first}");
        }
    }
    // MariaDB (no metadata-lock instrumentation on the test server) can only guess; Oracle
    // MySQL's performance_schema names the holder exactly.
    assert_eq!(blocker["likely"].as_bool().is_some(), db.is_mariadb().await);
    if server == Server::Postgres {
        assert_eq!(blocker["application"], "report-job", "{first}");
        assert_eq!(blocker["state"], "idle in transaction", "{first}");
    }
    assert!(
        stderr
            .contains("warning [TABLE_LOCK_TIMEOUT]: migration 1 (add_c) up, attempt 1, gave way"),
        "{stderr}"
    );
    assert_eq!(columns(&db).await, ["c", "id"]);
    assert_eq!(db.history().await, vec![(1, 1, "applied".to_string())]);
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_migration_gives_way_and_is_applied_once_the_blocker_is_gone() {
    a_migration_gives_way_and_is_applied_once_the_blocker_is_gone(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_a_migration_gives_way_and_is_applied_once_the_blocker_is_gone() {
    a_migration_gives_way_and_is_applied_once_the_blocker_is_gone(Server::Mysql).await;
}

/// The blocker outlives the budget: the run fails with TABLE_LOCK_TIMEOUT naming the table,
/// the blocker and the fixes; nothing is applied and the history is clean.
async fn a_spent_budget_leaves_nothing_applied_and_the_history_clean(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(1, "add_c", "ALTER TABLE users ADD COLUMN c INT;", None);
    let holder = Blocker::hold(&db).await.end_after(Duration::from_secs(6));
    let out = dirthara(
        &db.url,
        m.path(),
        &[
            "migrate",
            "--table-lock-timeout",
            "300ms",
            "--table-lock-retry-for",
            "1s",
        ],
    )
    .output()
    .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Error [TABLE_LOCK_TIMEOUT]"), "{stderr}");
    match db.is_mariadb().await {
        // PostgreSQL and Oracle MySQL (performance_schema) know the holder.
        false => {
            assert!(stderr.contains("the lock was held by session"), "{stderr}");
            assert!(
                stderr.contains("end the session holding the lock"),
                "{stderr}"
            );
        }
        // MariaDB without metadata-lock instrumentation only guesses: it says so, and
        // never advises ending the session it guessed.
        true => {
            assert!(
                stderr.contains("the lock was held by another session; a guess, not certain"),
                "{stderr}"
            );
            assert!(
                !stderr.contains("end the session") && stderr.contains("do not end it"),
                "{stderr}"
            );
        }
    }
    assert!(stderr.contains("Nothing was applied"), "{stderr}");
    assert!(stderr.contains("--table-lock-retry-for"), "{stderr}");
    assert!(
        stderr.contains("at line 1 of"),
        "names the statement: {stderr}"
    );
    holder.await.unwrap();
    assert_eq!(columns(&db).await, ["id"]);
    assert_eq!(
        db.history().await,
        vec![],
        "no record, not even a running one"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_spent_budget_leaves_nothing_applied_and_the_history_clean() {
    a_spent_budget_leaves_nothing_applied_and_the_history_clean(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_a_spent_budget_leaves_nothing_applied_and_the_history_clean() {
    a_spent_budget_leaves_nothing_applied_and_the_history_clean(Server::Mysql).await;
}

/// MariaDB commits each DDL statement at once: the statement that gave way is tried again,
/// and the one before it, committed, is not (a second `CREATE TABLE before_it` would fail).
#[tokio::test(flavor = "multi_thread")]
async fn mariadb_a_multi_statement_file_resumes_at_the_statement_that_gave_way() {
    let Some(db) = TestDb::create(Server::Mysql).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(
        1,
        "three",
        "CREATE TABLE before_it (id INT);\nALTER TABLE users ADD COLUMN c INT;\nCREATE TABLE after_it (id INT);\n",
        None,
    );
    let holder = Blocker::hold(&db).await.end_after(Duration::from_secs(3));
    let out = dirthara(
        &db.url,
        m.path(),
        &["migrate", "--table-lock-timeout", "1s"],
    )
    .output()
    .unwrap();
    holder.await.unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("TABLE_LOCK_TIMEOUT"),
        "it gave way: {stderr}"
    );
    assert_eq!(columns(&db).await, ["c", "id"]);
    let tables = db.tables().await;
    assert!(tables.contains(&"before_it".to_string()) && tables.contains(&"after_it".to_string()));
    assert_eq!(db.history().await, vec![(1, 1, "applied".to_string())]);
}

/// Ctrl-C (SIGINT, exit 130) or SIGTERM (143) while the step waits between attempts: the
/// run stops at once with `INTERRUPTED`, the step not applied, no record of it (not even
/// its `running` marker), and the lock released.
async fn a_signal_between_attempts_stops_with_nothing_applied(server: Server, signal: &str) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(1, "add_c", "ALTER TABLE users ADD COLUMN c INT;", None);
    let blocker = Blocker::hold(&db).await;
    let mut child = dirthara(
        &db.url,
        m.path(),
        &["migrate", "--table-lock-timeout", "300ms"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Wait for the first retry's warning, then signal.
    let started = Instant::now();
    let stderr = child.stderr.take().unwrap();
    let (seen_tx, seen_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("TABLE_LOCK_TIMEOUT") {
                let _ = seen_tx.send(());
            }
            lines.push(line);
        }
        lines
    });
    seen_rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = wait_with_watchdog(child, Duration::from_secs(10));
    let stderr = reader.join().unwrap().join("\n");
    assert!(started.elapsed() < Duration::from_secs(15));
    let code = match signal {
        "INT" => 130,
        _ => 143,
    };
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    let interrupted = (stderr.lines())
        .find(|l| l.starts_with("Error [INTERRUPTED]"))
        .unwrap_or_else(|| panic!("no INTERRUPTED error: {stderr}"));
    assert!(
        interrupted.contains("left undone: 1 add_c"),
        "the migration is named as not applied: {interrupted}"
    );
    assert_eq!(columns(&db).await, ["id"]);
    assert_eq!(db.history().await, vec![], "no running marker left behind");
    blocker.end().await;
    // The lock was released.
    let status = dirthara(&db.url, m.path(), &["unlock", "--output", "json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(doc["state"], "free", "{doc}");
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_ctrl_c_between_attempts_stops_with_nothing_applied() {
    a_signal_between_attempts_stops_with_nothing_applied(Server::Postgres, "INT").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_ctrl_c_between_attempts_stops_with_nothing_applied() {
    a_signal_between_attempts_stops_with_nothing_applied(Server::Mysql, "INT").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_sigterm_between_attempts_stops_with_nothing_applied() {
    a_signal_between_attempts_stops_with_nothing_applied(Server::Postgres, "TERM").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_sigterm_between_attempts_stops_with_nothing_applied() {
    a_signal_between_attempts_stops_with_nothing_applied(Server::Mysql, "TERM").await;
}

/// `CREATE INDEX CONCURRENTLY` is exempt from the timeout (a build cut short leaves an
/// INVALID index): it waits for the older transaction and is applied, never retried.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_concurrently_index_waits_instead_of_giving_way() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(
        1,
        "index",
        "-- dirthara:no-transaction\nCREATE INDEX CONCURRENTLY users_id ON users (id);\n",
        None,
    );
    let doc = table_lock_cases::preview(&db, m.path(), &[]);
    let step = &doc["steps"][0];
    assert!(step["table_lock_timeout_ms"].is_null(), "{doc}");
    assert!(
        step["retried"].as_str().unwrap().contains("CONCURRENTLY"),
        "{doc}"
    );
    let holder = Blocker::hold(&db).await.end_after(Duration::from_secs(2));
    let out = dirthara(
        &db.url,
        m.path(),
        &["migrate", "--table-lock-timeout", "300ms"],
    )
    .output()
    .unwrap();
    holder.await.unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("TABLE_LOCK_TIMEOUT"), "{stderr}");
    let valid = db
        .strings("SELECT indisvalid::text FROM pg_index WHERE indexrelid = 'users_id'::regclass")
        .await;
    assert_eq!(valid, ["true"]);
}

/// Every way of setting the timeout, and `off`, as `preview` reports them.
#[tokio::test(flavor = "multi_thread")]
async fn the_timeout_is_set_by_file_environment_flag_and_directive_and_off_turns_it_off() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    users(&db).await;
    let dir = support::scratch_dir();
    let migrations = dir.path().join("migrations");
    std::fs::create_dir(&migrations).unwrap();
    std::fs::write(
        migrations.join("1_plain.sql"),
        "ALTER TABLE users ADD COLUMN a INT;",
    )
    .unwrap();
    std::fs::write(
        migrations.join("2_own.sql"),
        "-- dirthara:table-lock-timeout 7s\nALTER TABLE users ADD COLUMN b INT;",
    )
    .unwrap();
    std::fs::write(
        migrations.join("3_waits.sql"),
        "-- dirthara:table-lock-timeout off\nALTER TABLE users ADD COLUMN c INT;",
    )
    .unwrap();
    let timeouts = |extra: &[&str], env: &[(&str, &str)], config: Option<&str>| {
        let mut cmd = support::dirthara_command();
        cmd.current_dir(dir.path()).arg("-d").arg(&db.url);
        if let Some(config) = config {
            std::fs::write(dir.path().join("dirthara.toml"), config).unwrap();
            cmd.arg("--config").arg(dir.path().join("dirthara.toml"));
        }
        cmd.args(["preview", "migrate", "--output", "json"])
            .args(extra);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let doc: serde_json::Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {:?}", text(&out)));
        (doc["steps"].as_array().unwrap().iter())
            .map(|s| s["table_lock_timeout_ms"].as_u64())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        timeouts(&[], &[], None),
        [Some(2000), Some(7000), None],
        "the default"
    );
    assert_eq!(
        timeouts(&[], &[], Some("table_lock_timeout = \"3s\"\n")),
        [Some(3000), Some(7000), None]
    );
    assert_eq!(
        timeouts(&[], &[("DIRTHARA_TABLE_LOCK_TIMEOUT", "4s")], None),
        [Some(4000), Some(7000), None]
    );
    assert_eq!(
        timeouts(&["--table-lock-timeout", "450ms"], &[], None),
        [Some(450), Some(7000), None]
    );
    assert_eq!(
        timeouts(&["--table-lock-timeout", "off"], &[], None),
        [None, Some(7000), None]
    );
    // A malformed directive is refused at load, naming the file.
    std::fs::write(
        migrations.join("4_bad.sql"),
        "-- dirthara:table-lock-timeout soon\nSELECT 1;",
    )
    .unwrap();
    let out = support::dirthara_command()
        .current_dir(dir.path())
        .args(["-d", &db.url, "migrate"])
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert!(stderr.contains("Error [INVALID_MIGRATION]"), "{stderr}");
    assert!(stderr.contains("4_bad.sql"), "{stderr}");
    // And a zero or an oversized flag is refused as CONFIG_ERROR.
    for bad in ["0", "31d"] {
        let out = support::dirthara_command()
            .current_dir(dir.path())
            .args(["-d", &db.url, "--table-lock-timeout", bad, "status"])
            .output()
            .unwrap();
        let (_, stderr) = text(&out);
        assert!(stderr.contains("CONFIG_ERROR"), "{bad}: {stderr}");
    }
}
