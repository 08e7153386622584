//! Fleets against the real servers: every tenant schema or database in one command, each under
//! its own lock; the canary, `--max-failures` and `--keep-going`; an unreachable target; two
//! runners sharing one fleet, and a killed one; shards; JSON and ndjson reports, with no
//! password ever printed.

mod support;

use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::{Connection, Executor, PgConnection, Row};
use support::servers::{Server, TestDb};
use support::{dirthara, spawn, text, wait_with_watchdog, Migrations};

/// A PostgreSQL database with schemas `tenant_1` ..= `tenant_n` (and `other`, which no glob
/// of these tests matches), and a table in `public` where every migration counts itself.
async fn tenants(n: usize) -> Option<TestDb> {
    let db = TestDb::create(Server::Postgres).await?;
    let mut conn = PgConnection::connect(&db.url).await.unwrap();
    for i in 1..=n {
        conn.execute(format!("CREATE SCHEMA tenant_{i}").as_str())
            .await
            .unwrap();
    }
    conn.execute(
        "CREATE SCHEMA other; CREATE TABLE public.effects (schema_name text, version int)",
    )
    .await
    .unwrap();
    conn.close().await.unwrap();
    Some(db)
}

/// Migrations that create a table where they run (unqualified, so in the target's schema) and
/// count themselves in `public.effects`, each taking `seconds`.
fn counted(versions: std::ops::RangeInclusive<i64>, seconds: f64) -> Migrations {
    let m = Migrations::new();
    for v in versions {
        let up = format!(
            "CREATE TABLE t{v} (id INT);\n\
             INSERT INTO public.effects VALUES (current_schema(), {v});\n\
             SELECT pg_sleep({seconds});"
        );
        m.add(v, &format!("t{v}"), &up, Some(&format!("DROP TABLE t{v};")));
    }
    m
}

/// How many times each (schema, version) took effect.
async fn effects(db: &TestDb) -> BTreeMap<(String, i32), i64> {
    let mut conn = PgConnection::connect(&db.url).await.unwrap();
    let rows = conn
        .fetch_all("SELECT schema_name, version, count(*) FROM public.effects GROUP BY 1, 2")
        .await
        .unwrap();
    conn.close().await.unwrap();
    rows.iter()
        .map(|r| ((r.get(0), r.get(1)), r.get(2)))
        .collect()
}

fn fleet(db: &TestDb, m: &Migrations, args: &[&str]) -> Command {
    dirthara(&db.url, m.path(), args)
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}): {:?}", text(output)))
}

/// Each target's outcome, by name.
fn outcomes(report: &Value) -> BTreeMap<String, String> {
    (report["targets"].as_array().unwrap().iter())
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn names(prefix: &str, range: std::ops::RangeInclusive<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}")).collect()
}

#[tokio::test]
async fn every_tenant_schema_is_migrated_in_its_own_schema_once_and_reported() {
    let Some(db) = tenants(6).await else { return };
    let m = counted(1..=3, 0.0);
    let run = fleet(
        &db,
        &m,
        &[
            "--schemas",
            "tenant_*",
            "--jobs",
            "3",
            "migrate",
            "--output",
            "json",
        ],
    )
    .output()
    .unwrap();
    assert!(run.status.success(), "{:?}", text(&run));
    let report = json(&run);
    let expected: BTreeMap<String, String> = names("tenant_", 1..=6)
        .into_iter()
        .map(|n| (n, "applied".to_string()))
        .collect();
    assert_eq!(outcomes(&report), expected, "{report}");
    assert_eq!(report["totals"]["migrations_applied"], 18, "{report}");
    let done = effects(&db).await;
    for tenant in names("tenant_", 1..=6) {
        for v in 1..=3 {
            assert_eq!(
                done.get(&(tenant.clone(), v)),
                Some(&1),
                "{tenant} {v}: {done:?}"
            );
        }
    }
    assert!(!done
        .keys()
        .any(|(schema, _)| schema == "other" || schema == "public"));
    // Each schema has its own history (and the migrations' tables), public none.
    let tables = db
        .strings("SELECT schemaname || '.' || tablename FROM pg_tables WHERE tablename LIKE 't_' OR tablename = 'dirthara_migrations' ORDER BY 1")
        .await;
    assert_eq!(tables.len(), 6 * 4, "{tables:?}");
    assert!(
        tables.iter().all(|t| t.starts_with("tenant_")),
        "{tables:?}"
    );

    // Again: nothing to do anywhere. Then where the fleet stands.
    let again = fleet(
        &db,
        &m,
        &["--schemas", "tenant_*", "migrate", "--output", "json"],
    )
    .output()
    .unwrap();
    assert!(again.status.success(), "{:?}", text(&again));
    assert!(outcomes(&json(&again)).values().all(|o| o == "up_to_date"));
    m.add(4, "t4", "CREATE TABLE t4 (id INT)", None);
    let one = fleet(&db, &m, &["--schemas", "tenant_1", "migrate"])
        .output()
        .unwrap();
    assert!(one.status.success(), "{:?}", text(&one));
    let status = fleet(&db, &m, &["--schemas", "tenant_*", "status"])
        .output()
        .unwrap();
    assert!(status.status.success(), "{:?}", text(&status));
    let (stdout, _) = text(&status);
    assert!(
        stdout.contains("6 target(s): 1 at 4, 5 one behind, 0 dirty, 0 locked"),
        "{stdout}"
    );
    assert!(
        stdout.contains("tenant_2") && stdout.contains("1 pending"),
        "{stdout}"
    );
}

#[tokio::test]
async fn mariadb_every_database_matching_the_pattern_is_a_target() {
    let Some(admin) = TestDb::create(Server::Mysql).await else {
        return;
    };
    let prefix = format!("{}_tenant_", admin.name);
    let mut conn = sqlx::MySqlConnection::connect(&admin.url).await.unwrap();
    for i in 1..=3 {
        conn.execute(format!("CREATE DATABASE {prefix}{i}").as_str())
            .await
            .unwrap();
    }
    let m = Migrations::tables(2);
    let run = dirthara(
        &admin.url,
        m.path(),
        &[
            "--databases",
            &format!("{prefix}*"),
            "migrate",
            "--output",
            "json",
        ],
    )
    .output()
    .unwrap();
    for i in 1..=3 {
        let name = format!("{prefix}{i}");
        let found: Vec<String> = conn
            .fetch_all(
                format!(
                    "SELECT CAST(table_name AS CHAR) FROM information_schema.tables WHERE \
                     table_schema = '{name}' ORDER BY 1"
                )
                .as_str(),
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>(0))
            .collect();
        assert!(
            found.contains(&"dirthara_migrations".to_string()),
            "{name}: {found:?}"
        );
        assert_eq!(
            found.iter().filter(|t| t.starts_with("t")).count(),
            2,
            "{found:?}"
        );
    }
    for i in 1..=3 {
        conn.execute(format!("DROP DATABASE {prefix}{i}").as_str())
            .await
            .unwrap();
    }
    assert!(run.status.success(), "{:?}", text(&run));
    assert_eq!(json(&run)["totals"]["applied"], 3);
}

#[tokio::test]
async fn a_targets_file_and_a_targets_query_name_their_targets_and_no_password_is_printed() {
    let Some(db) = tenants(0).await else { return };
    let mut conn = PgConnection::connect(&db.url).await.unwrap();
    let mut urls = Vec::new();
    for name in ["acme", "globex"] {
        let database = format!("{}_{name}", db.name);
        conn.execute(format!("CREATE DATABASE {database}").as_str())
            .await
            .unwrap();
        // Trust authentication ignores the password; the point is that it is never shown.
        let url = db.url.replacen("postgres@", "postgres:Sw0rdf1sh@", 1);
        urls.push(url.replace(&db.name, &database));
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        file.path(),
        format!(
            "# the tenants\nacme {}\n\n{}  # no name: the URL names it\n",
            urls[0], urls[1]
        ),
    )
    .unwrap();
    let m = Migrations::tables(1);
    let path = file.path().to_str().unwrap();
    let mut printed = String::new();
    for output in ["json", "ndjson", "human"] {
        let run = dirthara(
            &db.url,
            m.path(),
            &["--targets", path, "migrate", "--output", output],
        )
        .output()
        .unwrap();
        assert!(run.status.success(), "{:?}", text(&run));
        let (stdout, stderr) = text(&run);
        printed.push_str(&stdout);
        printed.push_str(&stderr);
    }
    assert!(!printed.contains("Sw0rdf1sh"), "{printed}");
    assert!(printed.contains("\"acme\""), "{printed}");
    assert!(
        printed.contains("postgres://postgres:***@"),
        "the unnamed target is its URL, masked: {printed}"
    );

    // ndjson: every event of a target names it.
    let run = dirthara(
        &db.url,
        m.path(),
        &["--targets", path, "status", "--output", "ndjson"],
    )
    .output()
    .unwrap();
    let events: Vec<Value> = text(&run)
        .0
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let finished: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "target_finished")
        .collect();
    assert_eq!(finished.len(), 2, "{events:?}");
    assert!(finished.iter().any(|e| e["target"] == "acme"), "{events:?}");
    assert_eq!(events.last().unwrap()["event"], "result");

    // The same targets from a query on the default connection.
    conn.execute("CREATE TABLE tenants (name text, url text, active bool)")
        .await
        .unwrap();
    sqlx::query("INSERT INTO tenants VALUES ('acme', $1, true), ('globex', $2, true), ('gone', 'postgres://nowhere/x', false)")
        .bind(&urls[0])
        .bind(&urls[1])
        .execute(&mut conn)
        .await
        .unwrap();
    m.add(2, "t2", "CREATE TABLE t2 (id INT)", None);
    let run = dirthara(
        &db.url,
        m.path(),
        &[
            "--targets-sql",
            "SELECT name, url FROM tenants WHERE active ORDER BY name",
            "migrate",
            "--output",
            "json",
        ],
    )
    .output()
    .unwrap();
    assert!(run.status.success(), "{:?}", text(&run));
    let report = json(&run);
    assert_eq!(
        outcomes(&report),
        BTreeMap::from([
            ("acme".into(), "applied".into()),
            ("globex".into(), "applied".into())
        ])
    );
    assert!(!text(&run).0.contains("Sw0rdf1sh"));
    for name in ["acme", "globex"] {
        conn.execute(format!("DROP DATABASE {}_{name} WITH (FORCE)", db.name).as_str())
            .await
            .unwrap();
    }
}

/// Makes `tenant_{i}` fail its first migration: the table it creates is already there.
async fn break_tenant(db: &TestDb, i: usize) {
    db.execute(&format!("CREATE TABLE tenant_{i}.t1 (id INT)"))
        .await;
}

#[tokio::test]
async fn a_failed_canary_starts_nothing_else() {
    let Some(db) = tenants(5).await else { return };
    break_tenant(&db, 2).await;
    let m = counted(1..=1, 0.0);
    let run = fleet(
        &db,
        &m,
        &[
            "--schemas",
            "tenant_*",
            "--canary",
            "2",
            "--keep-going",
            "migrate",
            "--output",
            "json",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(run.status.code(), Some(1), "{:?}", text(&run));
    let found = outcomes(&json(&run));
    assert_eq!(found["tenant_1"], "applied");
    assert_eq!(found["tenant_2"], "failed");
    for i in 3..=5 {
        assert_eq!(found[&format!("tenant_{i}")], "skipped", "{found:?}");
    }
    let (_, stderr) = text(&run);
    assert!(stderr.contains("Error [MIGRATION_FAILED]: 1 of 5 target(s) failed and 3 were not started; the first, `tenant_2`"), "{stderr}");
}

#[tokio::test]
async fn max_failures_stops_the_starting_and_keep_going_never_does() {
    let Some(db) = tenants(5).await else { return };
    break_tenant(&db, 2).await;
    let m = counted(1..=1, 0.0);
    // One at a time, so the order is the list's: 1 applied, 2 fails, the rest never start.
    let run = fleet(
        &db,
        &m,
        &[
            "--schemas",
            "tenant_*",
            "--jobs",
            "1",
            "migrate",
            "--output",
            "json",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(run.status.code(), Some(1));
    let found = outcomes(&json(&run));
    assert_eq!(
        found.values().cloned().collect::<Vec<_>>(),
        ["applied", "failed", "skipped", "skipped", "skipped"],
        "{found:?}"
    );
    break_tenant(&db, 4).await;
    let run = fleet(
        &db,
        &m,
        &[
            "--schemas",
            "tenant_*",
            "--jobs",
            "1",
            "--max-failures",
            "2",
            "migrate",
            "--output",
            "json",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(
        outcomes(&json(&run)).values().cloned().collect::<Vec<_>>(),
        ["up_to_date", "failed", "applied", "failed", "skipped"]
    );
    let run = fleet(
        &db,
        &m,
        &[
            "--schemas",
            "tenant_*",
            "--keep-going",
            "migrate",
            "--output",
            "json",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(
        outcomes(&json(&run)).values().cloned().collect::<Vec<_>>(),
        ["up_to_date", "failed", "up_to_date", "failed", "applied"]
    );
}

#[tokio::test]
async fn an_unreachable_target_fails_with_connection_error_while_the_others_proceed() {
    let Some(db) = tenants(0).await else { return };
    let file = tempfile::NamedTempFile::new().unwrap();
    let closed = "postgres://postgres:Sw0rdf1sh@127.0.0.1:1/nothing";
    std::fs::write(file.path(), format!("here {}\ngone {closed}\n", db.url)).unwrap();
    let m = Migrations::tables(1);
    let run = dirthara(
        &db.url,
        m.path(),
        &[
            "--targets",
            file.path().to_str().unwrap(),
            "--keep-going",
            "--connect-timeout",
            "1s",
            "migrate",
            "--output",
            "json",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(run.status.code(), Some(1), "{:?}", text(&run));
    let report = json(&run);
    assert_eq!(outcomes(&report)["here"], "applied");
    let gone = &report["targets"][1];
    assert_eq!(gone["outcome"], "failed");
    assert_eq!(gone["error"]["code"], "CONNECTION_ERROR", "{gone}");
    let everything = format!("{:?}", text(&run));
    assert!(!everything.contains("Sw0rdf1sh"), "{everything}");
}

#[tokio::test]
async fn two_fleet_runners_share_the_work_and_migrate_every_target_exactly_once() {
    let Some(db) = tenants(12).await else { return };
    let m = counted(1..=2, 0.15);
    let start = |_: usize| {
        spawn(fleet(
            &db,
            &m,
            &[
                "--schemas",
                "tenant_*",
                "--jobs",
                "3",
                "migrate",
                "--output",
                "json",
            ],
        ))
    };
    let runners = [start(0), start(1)];
    let mut applied_by = BTreeMap::new();
    for runner in runners {
        let out = wait_with_watchdog(runner, Duration::from_secs(120));
        assert!(out.status.success(), "{:?}", text(&out));
        for target in json(&out)["targets"].as_array().unwrap() {
            let count = target["applied"].as_array().unwrap().len();
            *applied_by
                .entry(target["name"].as_str().unwrap().to_string())
                .or_insert(0) += count;
        }
    }
    // Between them every target got both migrations, and no migration ran twice anywhere.
    assert_eq!(applied_by.len(), 12);
    assert!(applied_by.values().all(|&n| n == 2), "{applied_by:?}");
    let done = effects(&db).await;
    assert_eq!(done.len(), 24, "{done:?}");
    assert!(done.values().all(|&n| n == 1), "{done:?}");
}

#[tokio::test]
async fn a_fleet_runner_killed_outright_leaves_nothing_that_a_rerun_does_not_finish() {
    let Some(db) = tenants(8).await else { return };
    let m = counted(1..=2, 0.3);
    let mut runner = spawn(fleet(
        &db,
        &m,
        &["--schemas", "tenant_*", "--jobs", "2", "migrate"],
    ));
    let started = Instant::now();
    while effects(&db).await.values().sum::<i64>() < 3 {
        assert!(started.elapsed() < Duration::from_secs(60), "no progress");
        std::thread::sleep(Duration::from_millis(50));
    }
    runner.kill().unwrap();
    let _ = runner.wait();
    let rerun = fleet(
        &db,
        &m,
        &["--schemas", "tenant_*", "migrate", "--output", "json"],
    )
    .output()
    .unwrap();
    assert!(rerun.status.success(), "{:?}", text(&rerun));
    let done = effects(&db).await;
    assert_eq!(done.len(), 16, "every migration in every schema: {done:?}");
    assert!(done.values().all(|&n| n == 1), "none twice: {done:?}");
}

#[tokio::test]
async fn shards_split_a_fleet_between_runners_without_overlap() {
    let Some(db) = tenants(9).await else { return };
    let m = counted(1..=1, 0.0);
    let mut seen = BTreeMap::new();
    for shard in ["1/3", "2/3", "3/3"] {
        let run = fleet(
            &db,
            &m,
            &[
                "--schemas",
                "tenant_*",
                "--shard",
                shard,
                "migrate",
                "--output",
                "json",
            ],
        )
        .output()
        .unwrap();
        assert!(run.status.success(), "{:?}", text(&run));
        for (name, outcome) in outcomes(&json(&run)) {
            assert_eq!(outcome, "applied", "{name} in shard {shard}");
            assert!(seen.insert(name, shard).is_none(), "a target in two shards");
        }
    }
    assert_eq!(seen.len(), 9);
    // The same shard again is the same targets, now up to date.
    let again = fleet(
        &db,
        &m,
        &[
            "--schemas",
            "tenant_*",
            "--shard",
            "2/3",
            "migrate",
            "--output",
            "json",
        ],
    )
    .output()
    .unwrap();
    let found = outcomes(&json(&again));
    assert!(
        found.keys().all(|name| seen[name] == "2/3") && found.values().all(|o| o == "up_to_date")
    );
    let bad = fleet(
        &db,
        &m,
        &["--schemas", "tenant_*", "--shard", "0/3", "migrate"],
    )
    .output()
    .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{:?}", text(&bad));
}

#[tokio::test]
async fn rollback_baseline_preview_and_resolve_run_over_a_fleet_and_fresh_does_not() {
    let Some(db) = tenants(3).await else { return };
    let m = counted(1..=2, 0.0);
    let run = |args: &[&str]| {
        let mut all = vec!["--schemas", "tenant_*"];
        all.extend(args);
        fleet(&db, &m, &all).output().unwrap()
    };
    assert!(run(&["migrate"]).status.success());
    let preview = run(&["preview", "rollback", "--output", "json"]);
    assert!(preview.status.success(), "{:?}", text(&preview));
    assert!(outcomes(&json(&preview)).values().all(|o| o == "pending"));
    let rollback = run(&["down", "--output", "json"]);
    assert!(rollback.status.success(), "{:?}", text(&rollback));
    assert_eq!(json(&rollback)["totals"]["migrations_reverted"], 3);
    let baseline = run(&["baseline", "2", "--output", "json"]);
    assert!(baseline.status.success(), "{:?}", text(&baseline));
    assert!(outcomes(&json(&baseline)).values().all(|o| o == "applied"));
    // An applied file edited on purpose: its new checksum accepted everywhere.
    let edited = m.path().join("2_t2.up.sql");
    let text_now = std::fs::read_to_string(&edited).unwrap();
    std::fs::write(&edited, format!("{text_now}\n-- reviewed")).unwrap();
    assert_eq!(run(&["migrate"]).status.code(), Some(1));
    let resolve = run(&["resolve", "2", "--accept-checksum", "--output", "json"]);
    assert!(resolve.status.success(), "{:?}", text(&resolve));
    assert!(outcomes(&json(&resolve)).values().all(|o| o == "applied"));
    assert!(run(&["migrate"]).status.success());
    for refused in [&["fresh", "--force"][..], &["refresh"], &["unlock"]] {
        let out = run(refused);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            text(&out).1.contains("does not run over a fleet"),
            "{:?}",
            text(&out)
        );
    }
}

#[tokio::test]
async fn wait_returns_once_migrated_and_fails_clearly_on_timeout_dirt_or_a_newer_database() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::new();
    m.add(1, "t1", "CREATE TABLE t1 (id INT)", None);
    m.add(2, "slow", "SELECT pg_sleep(1.5)", None);
    let wait = |args: &[&str]| {
        let mut all = vec!["wait"];
        all.extend(args);
        dirthara(&db.url, m.path(), &all)
    };
    // Nothing applied yet, and no runner: a timeout.
    let timed_out = wait(&["--timeout", "1s"]).output().unwrap();
    assert_eq!(timed_out.status.code(), Some(1), "{:?}", text(&timed_out));
    assert!(
        text(&timed_out)
            .1
            .contains("Error [WAIT_TIMEOUT]: gave up waiting after"),
        "{:?}",
        text(&timed_out)
    );

    // A runner migrates while `wait` waits: it returns once the last migration is in.
    let runner = spawn(dirthara(&db.url, m.path(), &["migrate"]));
    let waited = wait(&["--timeout", "60s", "--output", "json"])
        .output()
        .unwrap();
    assert!(waited.status.success(), "{:?}", text(&waited));
    assert_eq!(json(&waited)["until"], 2);
    let runner = wait_with_watchdog(runner, Duration::from_secs(60));
    assert!(runner.status.success());
    assert!(wait(&["--until", "1"]).output().unwrap().status.success());
    let unknown = wait(&["--until", "7"]).output().unwrap();
    assert!(
        text(&unknown).1.contains("UNKNOWN_VERSION"),
        "{:?}",
        text(&unknown)
    );

    // A dirty migration nobody is working on.
    db.execute("UPDATE dirthara_migrations SET state = 'running' WHERE version = 2")
        .await;
    let dirty = wait(&["--timeout", "30s"]).output().unwrap();
    assert!(
        text(&dirty).1.contains("Error [DIRTY_MIGRATION]"),
        "{:?}",
        text(&dirty)
    );
    db.execute("UPDATE dirthara_migrations SET state = 'applied' WHERE version = 2")
        .await;

    // A database migrated by a newer build than these files.
    let older = Migrations::new();
    older.add(1, "t1", "CREATE TABLE t1 (id INT)", None);
    let newer = dirthara(&db.url, older.path(), &["wait", "--timeout", "30s"])
        .output()
        .unwrap();
    let (_, stderr) = text(&newer);
    assert!(
        stderr.contains("Error [MISSING_MIGRATION]") && stderr.contains("newer than this build"),
        "{stderr}"
    );
}

#[tokio::test]
async fn wait_over_a_fleet_waits_for_every_target() {
    let Some(db) = tenants(3).await else { return };
    let m = counted(1..=1, 0.0);
    let pending = fleet(
        &db,
        &m,
        &["--schemas", "tenant_*", "wait", "--timeout", "1s"],
    )
    .output()
    .unwrap();
    assert_eq!(pending.status.code(), Some(1), "{:?}", text(&pending));
    assert!(
        text(&pending).1.contains("WAIT_TIMEOUT"),
        "{:?}",
        text(&pending)
    );
    assert!(fleet(&db, &m, &["--schemas", "tenant_*", "migrate"])
        .output()
        .unwrap()
        .status
        .success());
    let ready = fleet(
        &db,
        &m,
        &["--schemas", "tenant_*", "wait", "--timeout", "10s"],
    )
    .output()
    .unwrap();
    assert!(ready.status.success(), "{:?}", text(&ready));
}

#[tokio::test]
async fn a_signal_finishes_the_running_targets_and_skips_the_rest() {
    let Some(db) = tenants(6).await else { return };
    let m = counted(1..=2, 0.5);
    let runner = spawn(fleet(
        &db,
        &m,
        &[
            "--schemas",
            "tenant_*",
            "--jobs",
            "2",
            "migrate",
            "--output",
            "json",
        ],
    ));
    let started = Instant::now();
    while effects(&db).await.is_empty() {
        assert!(started.elapsed() < Duration::from_secs(60), "no progress");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = runner.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let out = wait_with_watchdog(runner, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(130), "{:?}", text(&out));
    let report = json(&out);
    let found = outcomes(&report);
    assert!(found.values().any(|o| o == "skipped"), "{found:?}");
    // Every migration that took effect is recorded, and no lock is left behind.
    let done = effects(&db).await;
    let recorded: i64 = (report["targets"].as_array().unwrap().iter())
        .map(|t| t["applied"].as_array().map_or(0, |a| a.len() as i64))
        .sum();
    assert_eq!(done.values().sum::<i64>(), recorded, "{done:?} vs {report}");
    let locks = db
        .strings(
            "SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' AND database = \
             (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
        .await;
    assert_eq!(locks, ["0"]);
}

#[tokio::test]
async fn a_connection_kept_for_the_next_target_carries_nothing_over() {
    let Some(db) = tenants(6).await else { return };
    db.execute("CREATE TABLE public.leaks (target text, setting text, temp_tables bigint)")
        .await;
    let m = Migrations::new();
    // What the previous target's session left is written down first, then this one leaves
    // a setting and a temporary table behind.
    m.add(
        1,
        "leave_things_behind",
        "INSERT INTO public.leaks VALUES (current_schema(), \
         current_setting('dirthara_test.leak', true), \
         (SELECT count(*) FROM pg_class WHERE relname = 'leftover' AND relpersistence = 't'));\n\
         SELECT set_config('dirthara_test.leak', 'from ' || current_schema(), false);\n\
         CREATE TEMP TABLE leftover (x INT);",
        None,
    );
    let sessions = || async {
        db.strings("SELECT sessions::text FROM pg_stat_database WHERE datname = current_database()")
            .await[0]
            .parse::<i64>()
            .unwrap()
    };
    let before = sessions().await;
    let run = fleet(
        &db,
        &m,
        &["--schemas", "tenant_*", "--jobs", "1", "migrate"],
    )
    .output()
    .unwrap();
    assert!(run.status.success(), "{:?}", text(&run));
    // The targets one after the other on one session (and its second, which names a
    // blocker), not two each; one more lists them, and one reads the count.
    let opened = sessions().await - before;
    assert!(opened <= 4, "{opened} sessions for 6 targets");
    let leaks = db
        .strings("SELECT target || ': ' || coalesce(setting, '') || ', ' || temp_tables FROM public.leaks ORDER BY 1")
        .await;
    assert_eq!(
        leaks,
        (1..=6)
            .map(|i| format!("tenant_{i}: , 0"))
            .collect::<Vec<_>>()
    );
}
