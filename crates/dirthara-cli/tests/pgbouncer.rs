//! Through a real PgBouncer in `pool_mode = transaction`, started by each test in front of its
//! own database: the lease lock works, the session lock refuses before anything changes and
//! says why, and nothing dirthara sends leaves a prepared statement on a server session.

mod support;

use std::process::Output;
use std::time::Duration;

use sqlx::{Connection, Executor, PgConnection, Row};
use support::pgbouncer::PgBouncer;
use support::servers::{Server, TestDb};
use support::{applied_versions, dirthara, spawn, text, wait_with_watchdog, Migrations};

/// Nothing here waits for long; a hang is a bug.
fn finish(child: std::process::Child) -> Output {
    wait_with_watchdog(child, Duration::from_secs(120))
}

/// `count` migrations, each recording its own version in `applied_log` (the first creates it),
/// so a migration applied twice shows up as a duplicate row.
fn logged_migrations(count: i64) -> Migrations {
    let m = Migrations::new();
    m.add(
        1,
        "log",
        "CREATE TABLE applied_log (version INT NOT NULL);\nINSERT INTO applied_log VALUES (1);",
        None,
    );
    for v in 2..=count {
        m.add(
            v,
            &format!("m{v}"),
            &format!("INSERT INTO applied_log VALUES ({v});"),
            None,
        );
    }
    m
}

/// Runs `runners` copies of `dirthara <args>` at once and returns their outputs.
fn run_concurrently(url: &str, m: &Migrations, runners: usize, args: &[&str]) -> Vec<Output> {
    let children: Vec<_> = (0..runners)
        .map(|_| spawn(dirthara(url, m.path(), args)))
        .collect();
    children.into_iter().map(finish).collect()
}

/// Asserts that a run was refused as a session lock behind a transaction pooler.
fn assert_refused_as_pooled(output: &Output) {
    let (stdout, stderr) = text(output);
    assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("Error [MIGRATION_LOCK_FAILED]: "))
        .unwrap_or_else(|| panic!("no MIGRATION_LOCK_FAILED error on stderr:\n{stderr}"));
    for needle in [
        "PgBouncer",
        "pool_mode = transaction",
        "--locking lease",
        "Nothing was changed",
    ] {
        assert!(line.contains(needle), "`{needle}` missing from: {line}");
    }
}

/// Asserts that a run behind a transaction pooler changed nothing: refused as pooled, or —
/// when the bouncer happened to give its check's transactions one server session each time
/// (the check proves a session is shared only when it sees it, which a busy machine's
/// scheduling can hide) — stopped by the loss of the lock before its first migration.
fn assert_refused_or_stopped_before_the_first_migration(output: &Output) {
    let (stdout, stderr) = text(output);
    let stopped = "Error [LOCK_LEASE_LOST]: lock `dirthara:migrations` on connection `default` \
                   was lost during the run; stopped before migration 1 (log) was applied";
    if stderr.lines().any(|l| l.starts_with(stopped)) {
        assert_eq!(output.status.code(), Some(1), "{stdout}\n{stderr}");
        return;
    }
    assert_refused_as_pooled(output);
}

/// The tables of the test database (read directly, not through the bouncer).
async fn tables(db: &TestDb) -> Vec<String> {
    db.tables().await
}

#[tokio::test(flavor = "multi_thread")]
async fn lease_runners_through_pgbouncer_apply_every_migration_exactly_once() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let Some(bouncer) = PgBouncer::start(&db, 20).await else {
        return;
    };
    let m = logged_migrations(30);
    let outputs = run_concurrently(
        &bouncer.url(),
        &m,
        8,
        &[
            "migrate",
            "--locking",
            "lease",
            "--lock-wait",
            "60s",
            "--output",
            "json",
        ],
    );
    let mut applied = Vec::new();
    for output in &outputs {
        assert!(
            output.status.success(),
            "a lease runner failed through PgBouncer: {:?}\nPgBouncer log:\n{}",
            text(output),
            bouncer.log()
        );
        applied.extend(applied_versions(output));
    }
    applied.sort();
    assert_eq!(applied, (1..=30).collect::<Vec<_>>(), "reported as applied");
    let logged = db
        .strings("SELECT version::text AS v FROM applied_log ORDER BY applied_log.version")
        .await;
    let expected: Vec<String> = (1..=30).map(|v| v.to_string()).collect();
    assert_eq!(logged, expected, "each migration's effect exactly once");
    let history = db.history().await;
    assert_eq!(history.len(), 30);
    assert!(history.iter().all(|(_, _, state)| state == "applied"));
    // Released at the end: no lease row left behind.
    assert_eq!(
        db.strings("SELECT count(*)::text FROM dirthara_migrations_lock")
            .await,
        ["0"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn one_session_lock_runner_through_pgbouncer_is_refused_and_changes_nothing() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let Some(bouncer) = PgBouncer::start(&db, 20).await else {
        return;
    };
    let m = logged_migrations(5);
    // A few times in a row: the first run meets a fresh pool, later ones a used one.
    for _ in 0..3 {
        let output = dirthara(&bouncer.url(), m.path(), &["migrate"])
            .output()
            .unwrap();
        assert_refused_as_pooled(&output);
        assert_eq!(tables(&db).await, Vec::<String>::new(), "nothing changed");
    }
    // The fix the message names works through the same bouncer.
    let output = dirthara(&bouncer.url(), m.path(), &["migrate", "--locking", "lease"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{:?}", text(&output));
    assert_eq!(db.history().await.len(), 5);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_session_lock_runners_through_pgbouncer_change_nothing() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = logged_migrations(5);
    // Each round on a fresh bouncer (no marks on its server sessions yet), then once more on
    // the used one.
    for round in 0..3 {
        let Some(bouncer) = PgBouncer::start(&db, 20).await else {
            return;
        };
        for _ in 0..(if round == 2 { 2 } else { 1 }) {
            for output in run_concurrently(&bouncer.url(), &m, 4, &["migrate"]) {
                assert_refused_or_stopped_before_the_first_migration(&output);
            }
            // No migration ran, none is recorded (a runner stopped by the loss may have
            // created dirthara's own empty tables first).
            let tables = tables(&db).await;
            assert!(
                tables.iter().all(|t| t.starts_with("dirthara_migrations")),
                "nothing changed: {tables:?}"
            );
            if !tables.is_empty() {
                assert_eq!(db.history().await.len(), 0, "nothing recorded");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_direct_connection_is_not_mistaken_for_a_pooler() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = logged_migrations(10);
    let outputs = run_concurrently(&db.url, &m, 4, &["migrate", "--output", "json"]);
    let mut applied = Vec::new();
    for output in &outputs {
        let (stdout, stderr) = text(output);
        assert!(output.status.success(), "{stdout}\n{stderr}");
        assert!(!stderr.contains("PgBouncer"), "{stderr}");
        applied.extend(applied_versions(output));
    }
    applied.sort();
    assert_eq!(applied, (1..=10).collect::<Vec<_>>());
    assert_eq!(
        db.strings("SELECT count(*)::text FROM applied_log").await,
        ["10"]
    );
}

/// A connection whose far end cannot be compared with where it was opened (a Unix socket has
/// no address) is not assumed direct: it takes the full pooler check, which a real server
/// session passes.
#[tokio::test(flavor = "multi_thread")]
async fn a_direct_unix_socket_connection_passes_the_full_pooler_check() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let socket_dir = std::env::var("DIRTHARA_TEST_POSTGRES_SOCKET")
        .unwrap_or_else(|_| "/var/run/postgresql".to_string());
    if !std::path::Path::new(&socket_dir)
        .join(format!(".s.PGSQL.{}", db.port()))
        .exists()
    {
        assert!(
            std::env::var("DIRTHARA_REQUIRE_SERVERS").is_err(),
            "no PostgreSQL socket in {socket_dir}; set DIRTHARA_TEST_POSTGRES_SOCKET"
        );
        eprintln!("skipped: no PostgreSQL socket in {socket_dir}");
        return;
    }
    let separator = if db.url.contains('?') { '&' } else { '?' };
    let url = format!("{}{separator}host={socket_dir}", db.url);
    let m = logged_migrations(6);
    let outputs = run_concurrently(&url, &m, 3, &["migrate", "--output", "json"]);
    let mut applied = Vec::new();
    for output in &outputs {
        let (stdout, stderr) = text(output);
        assert!(output.status.success(), "{stdout}\n{stderr}");
        applied.extend(applied_versions(output));
    }
    applied.sort();
    assert_eq!(applied, (1..=6).collect::<Vec<_>>());
}

/// With one server session behind the bouncer, every statement of every command lands in it:
/// a prepared statement left by any of them would still be there.
#[tokio::test(flavor = "multi_thread")]
async fn nothing_dirthara_sends_leaves_a_prepared_statement_behind() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let Some(bouncer) = PgBouncer::start(&db, 1).await else {
        return;
    };
    let m = logged_migrations(3);
    let url = bouncer.url();
    let lease = ["--locking", "lease"];
    let runs: [&[&str]; 6] = [
        &["migrate", lease[0], lease[1]],
        &["status"],
        &["status", lease[0], lease[1]],
        &["unlock"],
        &["unlock", lease[0], lease[1]],
        &["rollback", lease[0], lease[1]],
    ];
    for args in runs {
        let output = dirthara(&url, m.path(), args).output().unwrap();
        // `rollback` fails (these migrations have no down step); what matters is what it
        // left on the server session.
        if args[0] != "rollback" {
            assert!(output.status.success(), "{args:?}: {:?}", text(&output));
        }
    }
    // The session lock is refused here (one server session for everybody), after its checks.
    assert_refused_as_pooled(&dirthara(&url, m.path(), &["migrate"]).output().unwrap());

    let mut c = PgConnection::connect(&url).await.unwrap();
    let row = c
        .fetch_one(
            "SELECT count(*)::text, coalesce(string_agg(name, ', '), '') \
             FROM pg_prepared_statements",
        )
        .await
        .unwrap();
    let (count, names): (String, String) = (row.get(0), row.get(1));
    assert_eq!(count, "0", "prepared statements left behind: {names}");
}
