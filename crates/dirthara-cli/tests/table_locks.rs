//! Migrations that never stall production: a statement waits for its table (metadata) lock
//! at most `table_lock_timeout`, gives way to the application's queries, and the step is
//! tried again with backoff until the blocker is gone or `table_lock_retry_for` runs out —
//! on the real PostgreSQL and MariaDB, with a real blocker: a transaction that read the
//! table and stays open.

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use sqlx::{Connection, Executor};
use support::servers::{Server, TestDb};
use support::{dirthara, text, wait_with_watchdog, Migrations};

/// A transaction that read `users` and stays open for `hold`, as a report query or a
/// session left idle in transaction does; it names itself `report-job` (PostgreSQL).
async fn hold_users(db: &TestDb, hold: Duration) -> tokio::task::JoinHandle<()> {
    let url = match db.server {
        Server::Postgres => format!("{}?application_name=report-job", db.url),
        _ => db.url.clone(),
    };
    let (ready, started) = tokio::sync::oneshot::channel();
    let holder = tokio::spawn(async move {
        match db_kind(&url) {
            Server::Postgres => {
                let mut c = sqlx::PgConnection::connect(&url).await.unwrap();
                c.execute("BEGIN; SELECT count(*) FROM users")
                    .await
                    .unwrap();
                ready.send(()).unwrap();
                tokio::time::sleep(hold).await;
                c.execute("COMMIT").await.unwrap();
            }
            _ => {
                let mut c = sqlx::MySqlConnection::connect(&url).await.unwrap();
                c.execute("START TRANSACTION").await.unwrap();
                c.execute("SELECT count(*) FROM users").await.unwrap();
                ready.send(()).unwrap();
                tokio::time::sleep(hold).await;
                c.execute("COMMIT").await.unwrap();
            }
        }
    });
    started.await.unwrap();
    holder
}

fn db_kind(url: &str) -> Server {
    if url.starts_with("postgres") {
        Server::Postgres
    } else {
        Server::Mysql
    }
}

async fn users(db: &TestDb) {
    db.execute("CREATE TABLE users (id INT PRIMARY KEY)").await;
}

async fn columns(db: &TestDb) -> Vec<String> {
    let sql = match db.server {
        Server::Postgres => {
            "SELECT column_name::text FROM information_schema.columns \
                             WHERE table_name = 'users' ORDER BY 1"
        }
        _ => {
            "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
              WHERE table_schema = DATABASE() AND table_name = 'users' ORDER BY 1"
        }
    };
    db.strings(sql).await
}

fn ndjson(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The blocker ends after 3 s; each attempt waits 500 ms: the step gives way, is tried again,
/// and is applied once the blocker is gone. Each retry names the blocker, in ndjson too.
async fn a_migration_gives_way_and_is_applied_once_the_blocker_is_gone(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(1, "add_c", "ALTER TABLE users ADD COLUMN c INT;", None);
    let holder = hold_users(&db, Duration::from_secs(3)).await;
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
    assert!(
        blocker["session_id"].is_i64(),
        "the blocker is named: {first}"
    );
    if server == Server::Postgres {
        assert_eq!(first["table"], "users", "{first}");
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
    let holder = hold_users(&db, Duration::from_secs(6)).await;
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
    assert!(stderr.contains("the lock was held by session"), "{stderr}");
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
    let holder = hold_users(&db, Duration::from_secs(3)).await;
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

/// SIGTERM while the step waits between attempts: the run stops at once, with the step not
/// applied, its `running` marker taken back, and the lock released.
async fn a_signal_between_attempts_stops_with_nothing_applied(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    users(&db).await;
    let m = Migrations::new();
    m.add(1, "add_c", "ALTER TABLE users ADD COLUMN c INT;", None);
    let holder = hold_users(&db, Duration::from_secs(20)).await;
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
    std::thread::spawn(move || {
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
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = wait_with_watchdog(child, Duration::from_secs(10));
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(out.status.code(), Some(143));
    assert_eq!(columns(&db).await, ["id"]);
    assert_eq!(db.history().await, vec![], "no running marker left behind");
    holder.abort();
    // The lock was released: another run starts at once (and is blocked only by the table).
    let status = dirthara(&db.url, m.path(), &["unlock", "--output", "json"])
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(doc["state"], "free", "{doc}");
}

#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_signal_between_attempts_stops_with_nothing_applied() {
    a_signal_between_attempts_stops_with_nothing_applied(Server::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_a_signal_between_attempts_stops_with_nothing_applied() {
    a_signal_between_attempts_stops_with_nothing_applied(Server::Mysql).await;
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
    let preview = dirthara(
        &db.url,
        m.path(),
        &["preview", "migrate", "--output", "json"],
    )
    .output()
    .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&preview.stdout).unwrap();
    let step = &doc["steps"][0];
    assert!(step["table_lock_timeout_ms"].is_null(), "{doc}");
    assert!(
        step["retried"].as_str().unwrap().contains("CONCURRENTLY"),
        "{doc}"
    );
    let holder = hold_users(&db, Duration::from_secs(2)).await;
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
