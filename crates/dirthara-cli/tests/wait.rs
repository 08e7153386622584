//! `dirthara wait` in a rolling deploy, on PostgreSQL and MariaDB: the pods of the previous
//! build start on a database the new build migrated (a note, not an error; `--strict`
//! refuses it), `--until V` waits for V alone, `--timeout` bounds connecting to a dead host
//! and to a host that never answers, and the first progress line comes at once, with no
//! password in it. Timings are asserted loosely: the machine running them is shared.

mod support;

use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::servers::{Server, TestDb};
use support::watch::Watched;
use support::{dirthara, text, wait_with_watchdog, Migrations};

crate::scenario_tests! {
    postgres => Server::Postgres => [
        a_database_newer_than_the_files_is_fine_with_a_note_and_refused_under_strict,
        until_waits_for_its_version_alone,
        the_timeout_bounds_connecting_to_a_dead_host,
        the_timeout_bounds_a_host_that_never_answers,
        the_first_progress_line_comes_at_once_and_then_every_few_seconds,
    ],
    mariadb => Server::Mysql => [
        a_database_newer_than_the_files_is_fine_with_a_note_and_refused_under_strict,
        until_waits_for_its_version_alone,
        the_timeout_bounds_connecting_to_a_dead_host,
        the_timeout_bounds_a_host_that_never_answers,
        the_first_progress_line_comes_at_once_and_then_every_few_seconds,
    ],
}

/// Trivial migrations `versions`, each creating its own table `t<version>`.
fn tables(versions: &[i64]) -> Migrations {
    let m = Migrations::new();
    for &v in versions {
        m.add(
            v,
            &format!("t{v}"),
            &format!("CREATE TABLE t{v} (id INT)"),
            None,
        );
    }
    m
}

fn json(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {:?}", text(out)))
}

/// A URL of `server`'s scheme, with a password, on a port nothing listens on.
fn dead_url(server: Server) -> String {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    url_at(server, port)
}

fn url_at(server: Server, port: u16) -> String {
    match server {
        Server::Postgres => format!("postgres://app:hunter2@127.0.0.1:{port}/app"),
        _ => format!("mysql://app:hunter2@127.0.0.1:{port}/app"),
    }
}

async fn a_database_newer_than_the_files_is_fine_with_a_note_and_refused_under_strict(
    server: Server,
) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    // The new build migrated 1, 2, 3; the previous build's pods have 1 only.
    let new = tables(&[1, 2, 3]);
    let migrated = dirthara(&db.url, new.path(), &["migrate"])
        .output()
        .unwrap();
    assert!(migrated.status.success(), "{:?}", text(&migrated));
    let previous = tables(&[1]);
    let wait = |args: &[&str]| dirthara(&db.url, previous.path(), args).output().unwrap();

    let fine = wait(&["wait", "--timeout", "10s"]);
    let (stdout, stderr) = text(&fine);
    assert!(fine.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "warning [MISSING_MIGRATION]: the database is newer than these files: 2 (t2), \
             3 (t3) applied that they do not have; fine for a rolling deploy (--strict refuses it)"
        ),
        "{stderr}"
    );
    assert!(
        stdout.contains("The database has migration 1 applied"),
        "{stdout}"
    );

    let report = wait(&["wait", "--timeout", "10s", "--output", "json"]);
    assert!(report.status.success(), "{:?}", text(&report));
    let report = json(&report);
    assert_eq!(report["newer"], serde_json::json!([2, 3]), "{report}");
    assert_eq!(
        report["warnings"][0]["code"], "MISSING_MIGRATION",
        "{report}"
    );

    // `--until` on the newer database, too.
    let until = wait(&["wait", "--until", "1", "--timeout", "10s"]);
    assert!(until.status.success(), "{:?}", text(&until));

    for strict in [
        &["--strict", "wait", "--timeout", "10s"][..],
        &["wait", "--until", "1", "--strict", "--timeout", "10s"],
    ] {
        let refused = wait(strict);
        let (_, stderr) = text(&refused);
        assert_eq!(refused.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("Error [MISSING_MIGRATION]: the database has migration 2 (t2)")
                && stderr.contains("newer than this build, which --strict refuses"),
            "{stderr}"
        );
    }
}

async fn until_waits_for_its_version_alone(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    // A build without 2 migrated 1 and 3; this one has 1 to 4, so 2 (older than 3) and 4 are
    // pending.
    let without_2 = tables(&[1, 3]);
    let migrated = dirthara(&db.url, without_2.path(), &["migrate"])
        .output()
        .unwrap();
    assert!(migrated.status.success(), "{:?}", text(&migrated));
    let files = tables(&[1, 2, 3, 4]);
    let wait = |args: &[&str]| dirthara(&db.url, files.path(), args);

    // 3 is applied: that is all `--until 3` asks, whatever is pending before or after it.
    let ready = wait(&[
        "wait",
        "--until",
        "3",
        "--timeout",
        "10s",
        "--output",
        "json",
    ])
    .output()
    .unwrap();
    assert!(ready.status.success(), "{:?}", text(&ready));
    let report = json(&ready);
    assert_eq!(
        (report["until"].as_i64(), report["applied"].as_i64()),
        (Some(3), Some(1))
    );
    let said = wait(&["wait", "--until", "3", "--timeout", "10s"])
        .output()
        .unwrap();
    assert!(
        text(&said)
            .0
            .contains("The database has migration 3 applied"),
        "{:?}",
        text(&said)
    );

    // 2 is not applied, though 3 after it is: it waits, and times out.
    let not_yet = wait(&["wait", "--until", "2", "--timeout", "1s"])
        .output()
        .unwrap();
    let (_, stderr) = text(&not_yet);
    assert_eq!(not_yet.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("Error [WAIT_TIMEOUT]: gave up waiting after")
            && stderr.contains("0 of the 1 migration(s) waited for are applied (1 pending)"),
        "{stderr}"
    );

    // It waits for 2, and returns once a runner applied it.
    let mut waiting = Watched::spawn(wait(&[
        "wait",
        "--until",
        "2",
        "--timeout",
        "60s",
        "--output",
        "ndjson",
    ]));
    waiting.wait_for("history_waiting", None);
    let migrated = dirthara(&db.url, files.path(), &["migrate"])
        .output()
        .unwrap();
    assert!(migrated.status.success(), "{:?}", text(&migrated));
    let ended = waiting.finish(Duration::from_secs(60));
    assert_eq!(ended.code, Some(0), "{ended:?}");
    let result = (ended.events.iter())
        .find(|e| e["event"] == "result")
        .unwrap_or_else(|| panic!("no result: {ended:?}"));
    assert_eq!(result["until"], 2, "{result}");
}

/// Runs `cmd` (a `wait` that must fail), under a watchdog; its stderr and how long it took.
fn timed_failure(cmd: Command) -> (String, Duration) {
    let started = Instant::now();
    let out = wait_with_watchdog(support::spawn(cmd), Duration::from_secs(60));
    let took = started.elapsed();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        !stdout.contains("hunter2") && !stderr.contains("hunter2"),
        "{stdout}{stderr}"
    );
    (stderr, took)
}

async fn the_timeout_bounds_connecting_to_a_dead_host(server: Server) {
    let m = tables(&[1, 2]);
    // Before, the connection's own retries ran to `connect_timeout` (30 s) whatever
    // `--timeout` said.
    let (stderr, took) = timed_failure(dirthara(
        &dead_url(server),
        m.path(),
        &["wait", "--timeout", "2s"],
    ));
    eprintln!("wait --timeout 2s on a dead host took {took:?}");
    assert!(
        took < Duration::from_secs(10),
        "took {took:?}, beyond --timeout 2s: {stderr}"
    );
    assert!(
        took >= Duration::from_millis(1500),
        "gave up early: {took:?}: {stderr}"
    );
    assert!(
        stderr.contains("Error [WAIT_TIMEOUT]: gave up waiting after")
            && stderr.contains("(the database is not reachable: cannot connect to `default`")
            && stderr.contains(":***@127.0.0.1:"),
        "{stderr}"
    );
}

async fn the_timeout_bounds_a_host_that_never_answers(server: Server) {
    // A listening socket nobody accepts on: the kernel completes the handshake, and the
    // server's greeting never comes.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = url_at(server, silent.local_addr().unwrap().port());
    let m = tables(&[1]);
    let (stderr, took) = timed_failure(dirthara(&url, m.path(), &["wait", "--timeout", "2s"]));
    eprintln!("wait --timeout 2s on a silent host took {took:?}");
    assert!(
        took < Duration::from_secs(10),
        "took {took:?}, beyond --timeout 2s: {stderr}"
    );
    assert!(
        stderr.contains("Error [WAIT_TIMEOUT]: gave up waiting after")
            && stderr.contains("no answer from the database"),
        "{stderr}"
    );
    drop(silent);
}

async fn the_first_progress_line_comes_at_once_and_then_every_few_seconds(server: Server) {
    let Some(db) = TestDb::create(server).await else {
        return;
    };
    let m = tables(&[1, 2, 3]);
    let reader = db.user("reader", "r3ad0nly").await;
    if server == Server::Mysql {
        // Its own database (PostgreSQL lets any user connect and find no history).
        db.execute(&format!(
            "GRANT SELECT ON {}.* TO '{}'@'%'",
            db.name, reader.name
        ))
        .await;
    }
    let url = reader.url(&db.url);
    let mut waiting = Watched::spawn(dirthara(&url, m.path(), &["wait", "--timeout", "60s"]));
    let started = Instant::now();
    // At once: what it waits for, then how far the history is (no history yet: all pending).
    while lines_saying(&waiting.stderr(), "waiting: ") == 0
        && started.elapsed() < Duration::from_secs(8)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let first = started.elapsed();
    let stderr = waiting.stderr();
    eprintln!("first progress lines after {first:?}:\n{stderr}");
    // Loosely: before, the first line came after 10 s.
    assert!(first < Duration::from_secs(4), "after {first:?}: {stderr}");
    let mut lines = stderr.lines();
    let announced = lines.next().unwrap_or_default();
    assert!(
        announced.starts_with("waiting for migration 3 (t3) and 2 others on ")
            && announced.contains(":***@127.0.0.1:")
            && announced.ends_with(" (for at most 1 min)"),
        "{stderr}"
    );
    assert!(
        lines
            .next()
            .is_some_and(|l| l.starts_with("waiting: 0 of 3 migration(s) applied (3 pending)")),
        "{stderr}"
    );
    // Then again every few seconds (5 s; asserted loosely).
    while lines_saying(&waiting.stderr(), "waiting: ") < 2
        && started.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    let stderr = waiting.stderr();
    waiting.kill();
    assert!(lines_saying(&stderr, "waiting: ") >= 2, "{stderr}");
    assert!(!stderr.contains("r3ad0nly"), "{stderr}");
}

fn lines_saying(text: &str, start: &str) -> usize {
    text.lines().filter(|l| l.starts_with(start)).count()
}
