//! The lease lock (`--locking lease`) against real databases, with real processes. The
//! scenarios every database shares run on each row of the table below (a row lists those
//! its database runs); after them, what is planted by hand in one database's lease table.
//! One file (one test binary, one link) for every lease scenario on every database.

mod lock_scenarios;
mod support;

use std::process::{Child, Output};
use std::time::{Duration, Instant};

use lock_scenarios::{assert_held, lost_lease_spares_the_new_holder};
use support::scenarios::{Database, Place};
use support::servers::{Server, TestDb};
use support::watch::Watched;
use support::{
    applied_versions, dirthara, dirthara_command, spawn, text, wait_until_held, wait_with_watchdog,
    Migrations,
};

crate::scenario_tests! {
    sqlite => Database::Sqlite => [
        lease_contention,
        a_killed_lease_holder_blocks_only_until_its_lease_lapses,
        a_lease_forced_open_mid_migration_stops_the_holder_before_the_next,
    ],
    postgres => Database::Server(Server::Postgres) => [
        lease_contention,
        a_killed_lease_holder_blocks_only_until_its_lease_lapses,
        a_lease_forced_open_mid_migration_stops_the_holder_before_the_next,
    ],
    mysql => Database::Server(Server::Mysql) => [
        lease_contention,
        a_lease_forced_open_mid_migration_stops_the_holder_before_the_next,
    ],
    // Not `mongodb`: the module would shadow the driver crate of that name.
    mongo => Database::Server(Server::Mongo) => [lease_contention],
}

/// The lease tests never wait long; a hang is a bug.
fn finish(child: Child) -> Output {
    wait_with_watchdog(child, Duration::from_secs(90))
}

fn history_count(url: &str, dir: &std::path::Path) -> (usize, bool) {
    let out = dirthara(
        url,
        dir,
        &["status", "--output", "json", "--locking", "lease"],
    )
    .output()
    .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let migrations = doc["migrations"].as_array().unwrap();
    let applied = migrations
        .iter()
        .filter(|m| m["state"] == "applied")
        .count();
    let one_batch = migrations
        .iter()
        .filter(|m| m["state"] == "applied")
        .all(|m| m["batch"] == 1);
    (applied, one_batch)
}

/// Eight runners at once. With the default wait (none): one winner; the rest fail fast
/// having changed nothing, or start after the winner released and find nothing to do. With
/// a wait, everyone succeeds, and each migration is still applied once.
async fn lease_contention(database: Database) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let m = place.migrations(50);
    let url = place.url();
    let runners: Vec<Child> = (0..8)
        .map(|_| {
            spawn(dirthara(
                &url,
                m.path(),
                &["migrate", "--locking", "lease", "--output", "json"],
            ))
        })
        .collect();
    let mut winners = 0;
    for output in runners.into_iter().map(finish) {
        let (stdout, stderr) = text(&output);
        match output.status.code() {
            Some(0) => match applied_versions(&output).len() {
                50 => winners += 1,
                0 => {}
                n => panic!("a runner applied {n} of 50: {stdout}"),
            },
            Some(1) => {
                assert!(stderr.contains("Error [MIGRATION_LOCK_HELD]"), "{stderr}");
                // A refused runner's one JSON document is the error, never a partial result.
                let doc: serde_json::Value =
                    serde_json::from_str(&stdout).expect("one JSON document");
                assert_eq!(doc["error"]["code"], "MIGRATION_LOCK_HELD", "{stdout}");
                assert!(doc.get("applied").is_none(), "{stdout}");
            }
            other => panic!("exit {other:?}: {stderr}"),
        }
    }
    assert_eq!(winners, 1);
    assert_eq!(history_count(&url, m.path()), (50, true));

    // With a wait, everyone succeeds and each migration is still applied once.
    let Some(place) = Place::new(database).await else {
        return;
    };
    let url = place.url();
    let runners: Vec<Child> = (0..8)
        .map(|_| {
            spawn(dirthara(
                &url,
                m.path(),
                &[
                    "migrate",
                    "--locking",
                    "lease",
                    "--lock-wait",
                    "60s",
                    "--output",
                    "json",
                ],
            ))
        })
        .collect();
    let applied: usize = runners
        .into_iter()
        .map(finish)
        .map(|output| {
            assert!(output.status.success(), "{:?}", text(&output));
            applied_versions(&output).len()
        })
        .sum();
    assert_eq!(applied, 50);
    assert_eq!(history_count(&url, m.path()), (50, true));
}

/// A holder killed inside a migration: the next runner is refused while the dead holder's
/// lease lasts, and proceeds with no operator action once it lapses (never sooner).
async fn a_killed_lease_holder_blocks_only_until_its_lease_lapses(database: Database) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let url = place.url();
    let m = Migrations::new();
    m.add(1, "slow", &place.busy_step(30.0), None);
    let mut victim = spawn(dirthara(
        &url,
        m.path(),
        &["migrate", "--locking", "lease", "--lock-ttl", "5s"],
    ));
    // Wait until the lease is taken.
    wait_until_held(|| {
        dirthara(
            &url,
            m.path(),
            &["unlock", "--locking", "lease", "--output", "json"],
        )
    });
    let killed_at = Instant::now();
    victim.kill().unwrap();
    victim.wait().unwrap();

    let fast = Migrations::new();
    fast.add(1, "slow", "CREATE TABLE after_crash (id INT)", None);
    let out = dirthara(&url, fast.path(), &["migrate", "--locking", "lease"])
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    if killed_at.elapsed() < Duration::from_secs(2) {
        // Still inside the dead holder's lease: refused, at once, naming it.
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("Error [MIGRATION_LOCK_HELD]"), "{stderr}");
        assert!(stderr.contains("dirthara migrate"), "{stderr}");
    }
    // Once the lease lapses, the next runner proceeds with no operator action.
    let out = dirthara(
        &url,
        fast.path(),
        &[
            "migrate",
            "--locking",
            "lease",
            "--lock-wait",
            "10s",
            "--output",
            "json",
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    assert!(
        // The lease lapses one TTL after its last renewal, which came at most TTL/3 before
        // the kill: never sooner than 2 s after it.
        killed_at.elapsed() >= Duration::from_secs(2),
        "took the lease before it lapsed"
    );
}

/// `unlock --force` from another process deletes the lease while its holder is inside a slow
/// migration: the holder finishes that one, finds the lease gone before the next, and stops
/// with `LOCK_LEASE_LOST` (warning `LOCK_LEASE_EXPIRED` as it lets go), as docs/locking.md
/// documents. PostgreSQL's and MongoDB's leases have tests of their own below, with an
/// intruder taking the lease meanwhile.
async fn a_lease_forced_open_mid_migration_stops_the_holder_before_the_next(database: Database) {
    let Some(place) = Place::new(database).await else {
        return;
    };
    let url = place.url();
    let m = Migrations::new();
    // Outside a transaction: a transactional SQLite step holds the file's one write lock for
    // its whole length, and `unlock --force` could not delete the lease until it commits.
    let slow = format!("-- dirthara:no-transaction\n{}", place.busy_step(2.0));
    m.add(1, "slow", &slow, None);
    m.add(2, "next", "CREATE TABLE next_one (id INT)", None);
    let mut holder = Watched::spawn(dirthara(
        &url,
        m.path(),
        &["migrate", "--locking", "lease", "--output", "ndjson"],
    ));
    holder.wait_for("migration_started", Some(1));
    // Past the step's first write (its `running` marker, where it has one).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let out = dirthara(&url, m.path(), &["unlock", "--force", "--locking", "lease"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("deleted the lease held by `dirthara migrate"),
        "{stdout}"
    );

    let ended = holder.finish(Duration::from_secs(60));
    assert_eq!(ended.code, Some(1), "{}", ended.stderr);
    let error = ended.error();
    assert_eq!(error["code"], "LOCK_LEASE_LOST", "{}", ended.stderr);
    assert!(
        ended.stderr.contains("before migration 2 (next)"),
        "{}",
        ended.stderr
    );
    assert!(
        ended.stderr.contains("warning [LOCK_LEASE_EXPIRED]"),
        "{}",
        ended.stderr
    );
    assert_eq!(ended.finished(), vec![1]);
    assert_eq!(error["completed"][0]["version"], 1, "{error}");
    // Migration 2 never ran: it is pending, and a new run applies it.
    let out = dirthara(
        &url,
        m.path(),
        &["migrate", "--locking", "lease", "--output", "json"],
    )
    .output()
    .unwrap();
    assert_eq!(applied_versions(&out), vec![2], "{:?}", text(&out));
}

// `lock_scenarios`, shared with the planted-fault tests.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_lost_lease_stops_the_run_before_its_next_migration_and_spares_the_new_holder() {
    assert_held(lost_lease_spares_the_new_holder(Server::Postgres, "").await);
}

#[tokio::test(flavor = "multi_thread")]
async fn mariadb_a_lost_lease_stops_the_run_before_its_next_migration_and_spares_the_new_holder() {
    assert_held(lost_lease_spares_the_new_holder(Server::Mysql, "").await);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_malformed_lease_is_held_for_acquire_and_status_until_force_unlocked() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let m = Migrations::tables(1);
    // Create the lease table the way dirthara does (a run with nothing to do takes the
    // lease; `status` only looks and creates nothing), then plant a lease without an expiry.
    // `to 0`: before the first migration, nothing to do.
    let out = dirthara(&db.url, m.path(), &["to", "0", "--locking", "lease"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    db.execute(
        "INSERT INTO dirthara_migrations_lock (id, owner_id, hostname, pid, operation) \
         VALUES ('dirthara:migrations', 'old', 'old-host', 9, 'migrate')",
    )
    .await;
    let out = dirthara(
        &db.url,
        m.path(),
        &["status", "--locking", "lease", "--output", "json"],
    )
    .output()
    .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["lock"]["state"], "held");
    assert_eq!(doc["lock"]["malformed"], true);
    let out = dirthara(&db.url, m.path(), &["migrate", "--locking", "lease"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).1.contains("Error [MIGRATION_LOCK_HELD]"));
    let out = dirthara(
        &db.url,
        m.path(),
        &["unlock", "--force", "--locking", "lease"],
    )
    .output()
    .unwrap();
    assert!(out.status.success());
    let out = dirthara(
        &db.url,
        m.path(),
        &["migrate", "--locking", "lease", "--output", "json"],
    )
    .output()
    .unwrap();
    assert_eq!(applied_versions(&out), vec![1]);
}

/// A MongoDB history whose runner is busy in a slow step: the step runs on a named
/// PostgreSQL connection (`pg_sleep`), since MongoDB has no portable sleep command.
struct MongoWithSlowStep {
    mongo: TestDb,
    _pg: TestDb,
    migrations: Migrations,
    config: std::path::PathBuf,
}

impl MongoWithSlowStep {
    async fn new(sleep_seconds: u32) -> Option<Self> {
        let mongo = TestDb::create(Server::Mongo).await?;
        let pg = TestDb::create(Server::Postgres).await?;
        let migrations = Migrations::new();
        migrations.add_as(
            "sql",
            1,
            "slow",
            &format!("-- dirthara:connection pg\nSELECT pg_sleep({sleep_seconds})"),
            None,
        );
        migrations.add_as("json", 2, "next", r#"[{"create": "next_one"}]"#, None);
        let config = migrations.path().join("dirthara.toml");
        std::fs::write(
            &config,
            format!(
                "[connections]\ndefault = \"{}\"\npg = \"{}\"\n",
                mongo.url, pg.url
            ),
        )
        .unwrap();
        Some(MongoWithSlowStep {
            mongo,
            _pg: pg,
            migrations,
            config,
        })
    }

    fn dirthara(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = dirthara_command();
        cmd.arg("--config")
            .arg(&self.config)
            .arg("--dir")
            .arg(self.migrations.path())
            .args(args);
        cmd
    }

    /// Waits until the runner is inside migration 1 (its `running` record is written).
    async fn wait_until_running(&self) {
        let started = Instant::now();
        while self.mongo.history().await != vec![(1, 1, "running".to_string())] {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "never started the slow step"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn lock_documents(&self) -> Vec<mongodb::bson::Document> {
        use mongodb::bson::{doc, Document};
        let mut cursor = self
            .mongo
            .mongo()
            .await
            .collection::<Document>("dirthara_migrations_lock")
            .find(doc! {})
            .await
            .unwrap();
        let mut docs = Vec::new();
        while cursor.advance().await.unwrap() {
            docs.push(cursor.deserialize_current().unwrap());
        }
        docs
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_mongodb_runner_blocks_the_next_only_until_its_lease_lapses() {
    let Some(setup) = MongoWithSlowStep::new(30).await else {
        return;
    };
    let mut victim = spawn(setup.dirthara(&["migrate", "--lock-ttl", "5s"]));
    wait_until_held(|| setup.dirthara(&["unlock", "--output", "json"]));
    // Kill it inside the slow step: once its `running` record is written.
    setup.wait_until_running().await;
    let killed_at = Instant::now();
    victim.kill().unwrap();
    victim.wait().unwrap();

    let out = setup.dirthara(&["migrate"]).output().unwrap();
    let (_, stderr) = text(&out);
    if killed_at.elapsed() < Duration::from_secs(2) {
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("Error [MIGRATION_LOCK_HELD]"), "{stderr}");
        assert!(
            stderr.contains("dirthara migrate"),
            "names the holder: {stderr}"
        );
        assert!(stderr.contains("lease expires in"), "{stderr}");
    }
    // The lease lapses by itself; the next runner then finds the half-done step recorded as
    // running (it ran on another connection, so it could not share a transaction).
    let out = setup
        .dirthara(&["migrate", "--lock-wait", "10s"])
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert!(
        // The lease lapses one TTL after its last renewal, which came at most TTL/3 before
        // the kill: never sooner than 2 s after it.
        killed_at.elapsed() >= Duration::from_secs(2),
        "took the lease before it lapsed"
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Error [DIRTY_MIGRATION]"), "{stderr}");
    let out = setup
        .dirthara(&["resolve", "1", "--applied"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{:?}", text(&out));
    let out = setup
        .dirthara(&["migrate", "--output", "json"])
        .output()
        .unwrap();
    assert_eq!(applied_versions(&out), vec![2], "{:?}", text(&out));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mongodb_runner_that_lost_its_lease_stops_and_spares_the_new_holder() {
    let Some(setup) = MongoWithSlowStep::new(2).await else {
        return;
    };
    let first = spawn(setup.dirthara(&["migrate"]));
    wait_until_held(|| setup.dirthara(&["unlock", "--output", "json"]));
    // Take the lease away while it is inside migration 1.
    setup.wait_until_running().await;
    let out = setup.dirthara(&["unlock", "--force"]).output().unwrap();
    assert!(
        text(&out).0.contains("deleted the lease held by"),
        "{:?}",
        text(&out)
    );
    {
        use mongodb::bson::{doc, DateTime};
        let expires = DateTime::from_millis(DateTime::now().timestamp_millis() + 600_000);
        setup
            .mongo
            .mongo()
            .await
            .collection("dirthara_migrations_lock")
            .insert_one(
                doc! { "_id": "dirthara:migrations", "ownerId": "intruder", "expiresAt": expires },
            )
            .await
            .unwrap();
    }
    let first = finish(first);
    let (_, stderr) = text(&first);
    assert_eq!(first.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Error [LOCK_LEASE_LOST]"), "{stderr}");
    assert!(stderr.contains("before migration 2 (next)"), "{stderr}");
    assert!(stderr.contains("warning [LOCK_LEASE_EXPIRED]"), "{stderr}");
    assert!(!setup.mongo.tables().await.contains(&"next_one".to_string()));
    let locks = setup.lock_documents().await;
    assert_eq!(locks.len(), 1);
    assert_eq!(locks[0].get_str("ownerId").unwrap(), "intruder");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_mongodb_lease_with_a_missing_or_non_date_expiry_is_held_until_forced() {
    use mongodb::bson::{doc, Bson, Document};
    let Some(db) = TestDb::create(Server::Mongo).await else {
        return;
    };
    let m = Migrations::collections(1);
    for expiry in [
        None,
        Some(Bson::String("2020-01-01T00:00:00Z".into())),
        Some(Bson::Int64(0)),
        Some(Bson::Null),
    ] {
        let mut lease = doc! { "_id": "dirthara:migrations", "ownerId": "old", "hostname": "old-host", "pid": 9_i64, "operation": "migrate" };
        if let Some(expiry) = &expiry {
            lease.insert("expiresAt", expiry.clone());
        }
        db.mongo()
            .await
            .collection::<Document>("dirthara_migrations_lock")
            .insert_one(lease)
            .await
            .unwrap();
        let out = dirthara(&db.url, m.path(), &["status", "--output", "json"])
            .output()
            .unwrap();
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(status["lock"]["state"], "held", "{expiry:?}");
        assert_eq!(status["lock"]["malformed"], true, "{expiry:?}");
        let out = dirthara(&db.url, m.path(), &["migrate"]).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{expiry:?}");
        assert!(
            text(&out).1.contains("Error [MIGRATION_LOCK_HELD]"),
            "{:?}",
            text(&out)
        );
        let out = dirthara(&db.url, m.path(), &["unlock", "--force"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{:?}", text(&out));
    }
    let out = dirthara(&db.url, m.path(), &["migrate", "--output", "json"])
        .output()
        .unwrap();
    assert_eq!(applied_versions(&out), vec![1]);
    // unlock --force on a free lease is a successful no-op.
    let out = dirthara(&db.url, m.path(), &["unlock", "--force"])
        .output()
        .unwrap();
    assert!(out.status.success() && text(&out).0.contains("Nothing to release"));
}
