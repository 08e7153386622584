//! The session lock against real servers, with real `dirthara` processes: contention,
//! bounded waits, crashed holders, the holder forced out, a lock lost inside the session.
//! Each scenario runs on every server with a session lock, one row each (the table below);
//! after it, what only PostgreSQL has (CREATE INDEX CONCURRENTLY, named connections, TLS)
//! and connecting. One file (one test binary, one link) for every session-lock scenario.

mod lock_scenarios;
mod support;

use std::process::{Child, Output};
use std::time::{Duration, Instant};

use lock_scenarios::{assert_held, lock_released_by_a_migration};
use support::servers::{Server, TestDb};
use support::watch::Watched;
use support::{
    applied_versions, dirthara, dirthara_command, spawn, text, wait_until_held, wait_with_watchdog,
    Migrations,
};

/// A server with a session lock, and how dirthara speaks of its sessions there.
#[derive(Clone, Copy)]
struct SessionRow {
    server: Server,
    /// How `MIGRATION_LOCK_HELD` names a holder busy with a sleep: every fragment appears.
    names_the_holder: &'static [&'static str],
    /// How `unlock` shows the holder.
    held_by: &'static str,
    /// What `unlock --force` says it did to the holder.
    forced: &'static str,
}

const POSTGRES: SessionRow = SessionRow {
    server: Server::Postgres,
    // PostgreSQL names the runner (application_name).
    names_the_holder: &["`dirthara migrate "],
    held_by: "held by `dirthara migrate",
    forced: "terminated session",
};

const MYSQL: SessionRow = SessionRow {
    server: Server::Mysql,
    // MySQL names the connection and what it is doing.
    names_the_holder: &["session ", "busy with `SELECT SLEEP(3)`"],
    held_by: "held by session",
    forced: "terminated connection",
};

/// Every session-lock scenario on each row.
macro_rules! session_lock_tests {
    ($($row:ident => $value:expr),* $(,)?) => {
        crate::scenario_tests! {
            $($row => $value => [
                eight_runners_at_once_apply_each_migration_exactly_once,
                a_bounded_wait_fails_with_lock_held_and_the_default_wait_succeeds,
                a_runner_killed_mid_migration_frees_the_lock_and_the_next_run_finds_what_stayed,
                unlock_force_mid_migration_terminates_the_holder_which_runs_nothing_more,
                a_lock_lost_inside_the_session_stops_the_run_before_the_next_migration,
            ]),*
        }
    };
}

session_lock_tests! {
    postgres => POSTGRES,
    mysql => MYSQL,
}

/// Eight runners at once, five rounds: exactly one applies everything, the others wait and
/// find nothing left to do.
async fn eight_runners_at_once_apply_each_migration_exactly_once(row: SessionRow) {
    for round in 0..5 {
        let Some(db) = TestDb::create(row.server).await else {
            return;
        };
        let m = Migrations::tables(50);
        let runners: Vec<Child> = (0..8)
            .map(|_| {
                spawn(dirthara(
                    &db.url,
                    m.path(),
                    &["migrate", "--output", "json"],
                ))
            })
            .collect();
        let outputs: Vec<Output> = runners
            .into_iter()
            .map(|c| wait_with_watchdog(c, Duration::from_secs(120)))
            .collect();
        let mut winners = 0;
        for output in &outputs {
            assert!(output.status.success(), "round {round}: {:?}", text(output));
            match applied_versions(output).len() {
                50 => winners += 1,
                0 => {}
                n => panic!(
                    "round {round}: a runner applied {n} of 50: {:?}",
                    text(output)
                ),
            }
        }
        assert_eq!(
            winners, 1,
            "round {round}: exactly one runner applies everything"
        );
        let history = db.history().await;
        assert_eq!(history.len(), 50);
        assert!(history
            .iter()
            .all(|(_, batch, state)| *batch == 1 && state == "applied"));
    }
}

async fn a_bounded_wait_fails_with_lock_held_and_the_default_wait_succeeds(row: SessionRow) {
    let server = row.server;
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "slow",
        &format!("CREATE TABLE slow (id INT);\n{}", server.sleep(3.0)),
        None,
    );
    let holder = spawn(dirthara(
        &db.url,
        m.path(),
        &["migrate", "--output", "json"],
    ));
    wait_until_held(|| dirthara(&db.url, m.path(), &["unlock", "--output", "json"]));

    let started = Instant::now();
    let out = dirthara(&db.url, m.path(), &["migrate", "--lock-wait", "1s"])
        .output()
        .unwrap();
    let waited = started.elapsed();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Error [MIGRATION_LOCK_HELD]"), "{stderr}");
    assert!(
        stderr.contains("dirthara:migrations") && stderr.contains("`default`"),
        "{stderr}"
    );
    assert!(
        row.names_the_holder.iter().all(|f| stderr.contains(f)),
        "names the holder ({:?}): {stderr}",
        row.names_the_holder
    );
    assert!(
        waited >= Duration::from_secs(1),
        "gave up before the wait ran out: {waited:?}"
    );

    // The default wait is forever: this one waits, then finds nothing left to do.
    let patient = spawn(dirthara(
        &db.url,
        m.path(),
        &["migrate", "--output", "json"],
    ));
    let first = wait_with_watchdog(holder, Duration::from_secs(60));
    assert_eq!(applied_versions(&first), vec![1]);
    let second = wait_with_watchdog(patient, Duration::from_secs(60));
    assert!(second.status.success(), "{:?}", text(&second));
    assert_eq!(applied_versions(&second), Vec::<i64>::new());
    let (_, stderr) = text(&second);
    assert!(
        stderr.contains("waiting for lock `dirthara:migrations`"),
        "{stderr}"
    );
    assert_eq!(db.history().await.len(), 1);
}

/// A runner killed (SIGKILL) inside a migration loses its lock with its session, and the
/// next runner finds what the database kept of the step: nothing where DDL is
/// transactional, so it runs the step again; else the half-done step, recorded `running`
/// (dirty), which it refuses until the operator resolves it.
async fn a_runner_killed_mid_migration_frees_the_lock_and_the_next_run_finds_what_stayed(
    row: SessionRow,
) {
    let server = row.server;
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    // PostgreSQL ends a dead client's session, lock and all, within its 1 s connection
    // check, while the sleep would go on for long; MySQL releases the lock only once the
    // orphaned statement ends (as does PostgreSQL before 14, which has no such check), so
    // there the sleep is short and the wait long.
    let orphans_run_on = db.orphaned_statements_run_on().await;
    let (seconds, lock_wait) = match orphans_run_on {
        true => (3.0, "30s"),
        false => (30.0, "5s"),
    };
    let sleep = server.sleep(seconds);
    let m = Migrations::new();
    m.add(1, "first", "CREATE TABLE first (id INT)", None);
    m.add(
        2,
        "slow",
        &format!("CREATE TABLE slow (id INT);\n{sleep};"),
        None,
    );
    let mut victim = spawn(dirthara(&db.url, m.path(), &["migrate"]));
    let started = Instant::now();
    while !db.is_running(&sleep).await {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never reached the slow migration"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    victim.kill().unwrap();
    victim.wait().unwrap();

    if server.transactional_ddl() && orphans_run_on {
        // PostgreSQL before 14 never notices the dead client while the sleep runs: the step's
        // statements, its history record and its COMMIT were sent together, so the server
        // finishes them all. Migration 2 is applied, once, and the next run has nothing to do.
        let out = dirthara(
            &db.url,
            m.path(),
            &["migrate", "--lock-wait", lock_wait, "--output", "json"],
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "{:?}", text(&out));
        assert_eq!(applied_versions(&out), Vec::<i64>::new());
        assert_eq!(
            db.history().await,
            db.history()
                .await
                .into_iter()
                .filter(|h| h.2 == "applied")
                .collect::<Vec<_>>()
        );
        assert_eq!(
            db.history().await.iter().map(|h| h.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
        return;
    }
    if server.transactional_ddl() {
        // Neither the table nor a record of migration 2 stayed: it runs again.
        let fixed = Migrations::new();
        fixed.add(1, "first", "CREATE TABLE first (id INT)", None);
        fixed.add(2, "slow", "CREATE TABLE slow (id INT)", None);
        let out = dirthara(
            &db.url,
            fixed.path(),
            &["migrate", "--lock-wait", lock_wait, "--output", "json"],
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "{:?}", text(&out));
        assert_eq!(applied_versions(&out), vec![2]);
        assert_eq!(
            db.history().await.iter().map(|h| h.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
        return;
    }
    // The next run sees the half-done migration instead of re-running or skipping it.
    let out = dirthara(&db.url, m.path(), &["migrate", "--lock-wait", lock_wait])
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Error [DIRTY_MIGRATION]"), "{stderr}");
    assert!(stderr.contains("migration 2 (slow)"), "{stderr}");
    assert!(stderr.contains("dirthara resolve 2 --applied"), "{stderr}");

    // The table is there and the sleep does not matter: the operator records it as applied.
    let out = dirthara(&db.url, m.path(), &["resolve", "2", "--applied"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    let out = dirthara(&db.url, m.path(), &["migrate", "--output", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(applied_versions(&out), Vec::<i64>::new());
    assert!(db.history().await.iter().all(|h| h.2 == "applied"));
}

/// `unlock --force` from another process while the holder is inside a slow migration: the
/// holder's session is terminated (PostgreSQL `pg_terminate_backend`, MySQL `KILL
/// CONNECTION`), its step is cut off with the connection (`MIGRATION_FAILED`, connection
/// lost), and it runs nothing after it. Transactional DDL rolls the step back; else it is
/// left `running` (dirty), as docs/locking.md documents.
async fn unlock_force_mid_migration_terminates_the_holder_which_runs_nothing_more(row: SessionRow) {
    let server = row.server;
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let sleep = server.sleep(3.0);
    let m = Migrations::new();
    m.add(1, "slow", &sleep, None);
    m.add(2, "next", "CREATE TABLE next_one (id INT)", None);
    let mut holder = Watched::spawn(dirthara(
        &db.url,
        m.path(),
        &["migrate", "--output", "ndjson"],
    ));
    holder.wait_for("migration_started", Some(1));
    // Inside the step: its sleep is running on the server.
    let started = Instant::now();
    while !db.is_running(&sleep).await {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never reached the sleep"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = dirthara(&db.url, m.path(), &["unlock"]).output().unwrap();
    let (stdout, _) = text(&out);
    assert!(stdout.contains(row.held_by), "{stdout}");
    let out = dirthara(&db.url, m.path(), &["unlock", "--force"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains(row.forced), "{stdout}");

    let ended = holder.finish(Duration::from_secs(30));
    assert_eq!(ended.code, Some(1), "{}", ended.stderr);
    let error = ended.error();
    assert_eq!(error["code"], "MIGRATION_FAILED", "{}", ended.stderr);
    assert_eq!(error["database"]["connection_lost"], true, "{error}");
    assert_eq!(error["migration"]["version"], 1, "{error}");
    let dirty = !server.transactional_ddl();
    assert_eq!(error["migration"]["left_dirty"], dirty, "{error}");
    assert_eq!(ended.finished(), Vec::<u64>::new());
    assert!(!db.tables().await.contains(&"next_one".to_string()));
    let history = if dirty {
        vec![(1, 1, "running".to_string())]
    } else {
        vec![]
    };
    assert_eq!(db.history().await, history);
    // On a free lock, --force is a no-op that succeeds.
    let out = dirthara(&db.url, m.path(), &["unlock", "--force"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(text(&out).0.contains("Nothing to release"));
}

/// A lock released from inside the session (here by a migration itself) is noticed before the
/// next migration: on PostgreSQL by the guard that leads each step's message, on MySQL by the
/// confirmation before each migration.
async fn a_lock_lost_inside_the_session_stops_the_run_before_the_next_migration(row: SessionRow) {
    // Written once in `lock_scenarios`, where the planted-fault tests run it too.
    assert_held(lock_released_by_a_migration(row.server, "").await);
}

#[tokio::test(flavor = "multi_thread")]
async fn create_index_concurrently_while_another_runner_waits_does_not_deadlock() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(
        1,
        "big",
        "CREATE TABLE big (id INT);\nINSERT INTO big SELECT generate_series(1, 20000);",
        None,
    );
    // Give the second runner time to start waiting before the index build begins.
    m.add(2, "pause", "SELECT pg_sleep(1.5)", None);
    m.add(
        3,
        "index",
        "-- dirthara:no-transaction\nCREATE INDEX CONCURRENTLY big_id ON big (id)",
        None,
    );
    let first = spawn(dirthara(
        &db.url,
        m.path(),
        &["migrate", "--output", "json"],
    ));
    wait_until_held(|| dirthara(&db.url, m.path(), &["unlock", "--output", "json"]));
    let second = spawn(dirthara(
        &db.url,
        m.path(),
        &["migrate", "--output", "json"],
    ));
    let first = wait_with_watchdog(first, Duration::from_secs(60));
    let second = wait_with_watchdog(second, Duration::from_secs(60));
    assert!(first.status.success(), "{:?}", text(&first));
    assert!(second.status.success(), "{:?}", text(&second));
    assert_eq!(applied_versions(&first), vec![1, 2, 3]);
    assert_eq!(applied_versions(&second), Vec::<i64>::new());
    assert_eq!(
        db.strings("SELECT indexname::text FROM pg_indexes WHERE tablename = 'big'")
            .await,
        vec!["big_id".to_string()]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_migration_on_a_named_connection_runs_there_while_history_and_lock_stay_home() {
    let Some(home) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let Some(analytics) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(1, "users", "CREATE TABLE users (id INT)", None);
    m.add(
        2,
        "facts",
        "-- dirthara:connection analytics\nCREATE TABLE facts (id INT)",
        None,
    );
    let config = m.path().join("dirthara.toml");
    std::fs::write(
        &config,
        format!(
            "[connections]\ndefault = \"{}\"\nanalytics = \"{}\"\n",
            home.url, analytics.url
        ),
    )
    .unwrap();
    let mut cmd = dirthara_command();
    cmd.args(["--config"])
        .arg(&config)
        .arg("--dir")
        .arg(m.path())
        .args(["migrate", "--output", "json"]);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(applied_versions(&out), vec![1, 2]);
    assert!(analytics.tables().await.contains(&"facts".to_string()));
    assert!(!analytics
        .tables()
        .await
        .contains(&"dirthara_migrations".to_string()));
    assert!(!home.tables().await.contains(&"facts".to_string()));
    // Migration 2 ran elsewhere, so it was bracketed by a `running` record that completed.
    assert_eq!(
        home.history().await,
        vec![(1, 1, "applied".into()), (2, 1, "applied".into())]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_that_comes_up_late_is_retried_until_it_accepts_connections() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    // A port nobody listens on yet; a forwarder to the real server opens it a second later.
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let server = db.host_port();
    let late_url = db.url.replace(&server, &format!("127.0.0.1:{port}"));
    assert_ne!(late_url, db.url, "no host:port in {}", db.url);
    let m = Migrations::tables(1);
    let runner = spawn(dirthara(
        &late_url,
        m.path(),
        &["migrate", "--connect-timeout", "20s", "--output", "json"],
    ));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let forwarder = tokio::spawn(async move {
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                return;
            };
            let server = server.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(server.as_str()).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    let out =
        tokio::task::spawn_blocking(move || wait_with_watchdog(runner, Duration::from_secs(30)))
            .await
            .unwrap();
    forwarder.abort();
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("waiting for database `default`"),
        "{stderr}"
    );
    assert_eq!(applied_versions(&out), vec![1]);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_database_fails_with_connection_error_after_the_timeout() {
    let m = Migrations::tables(1);
    let out = dirthara(
        "postgres://u:hunter2@127.0.0.1:1/x",
        m.path(),
        &["migrate", "--connect-timeout", "1s"],
    )
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("Error [CONNECTION_ERROR]"), "{stderr}");
    assert!(stderr.contains("raise --connect-timeout"), "{stderr}");
    assert!(!stdout.contains("hunter2") && !stderr.contains("hunter2"));
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_is_negotiated_when_the_url_requires_it() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    if db.strings("SHOW ssl").await != vec!["on".to_string()] {
        eprintln!("SKIPPED: the test PostgreSQL server has ssl = off");
        return;
    }
    let m = Migrations::tables(1);
    let url = format!("{}?sslmode=require", db.url);
    let out = dirthara(&url, m.path(), &["migrate", "--output", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    // `sslmode=require` refuses to run over a plain connection, so success means TLS was used.
    assert_eq!(applied_versions(&out), vec![1]);
}
