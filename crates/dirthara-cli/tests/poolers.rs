//! Through poolers other than PgBouncer (whose tests are `pgbouncer.rs`), each started by the
//! test in front of its own database.
//!
//! pgpool-II pools per client session: a client keeps the server session it was given until it
//! disconnects. So a session lock taken through it is a real session lock, and dirthara's pooler
//! check (which refuses the session lock only where consecutive transactions may land in
//! different server sessions) must let it through: runners wait for each other and apply each
//! migration once.
//!
//! Odyssey with `pool "transaction"` hands each transaction whichever server session is free,
//! like PgBouncer's transaction pooling: the session lock is refused before anything changes,
//! and the lease works. With `pool "session"` it keeps each client's server session, and the
//! session lock works through it as through pgpool-II.

mod support;

use std::process::Output;
use std::time::Duration;

use support::odyssey::Odyssey;
use support::pgpool::PgPool;
use support::servers::{Server, TestDb};
use support::Migrations;
use support::{applied_versions, dirthara, spawn, text, wait_until_held, wait_with_watchdog};

/// Nothing here waits for long; a hang is a bug.
fn finish(child: std::process::Child) -> Output {
    wait_with_watchdog(child, Duration::from_secs(120))
}

/// `count` migrations, each recording its own version in `applied_log` (the first creates it)
/// and taking `sleep` seconds, so a migration applied twice shows up as a duplicate row and a
/// run lasts long enough for others to meet its lock.
fn logged_migrations(count: i64, sleep: f64) -> Migrations {
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
            &format!("INSERT INTO applied_log VALUES ({v});\nSELECT pg_sleep({sleep});"),
            None,
        );
    }
    m
}

/// Each migration's effect is there exactly once, and the history says all `count` applied.
async fn assert_applied_once(db: &TestDb, count: i64) {
    let logged = db
        .strings("SELECT version::text AS v FROM applied_log ORDER BY applied_log.version")
        .await;
    let expected: Vec<String> = (1..=count).map(|v| v.to_string()).collect();
    assert_eq!(logged, expected, "each migration's effect exactly once");
    let history = db.history().await;
    assert_eq!(history.len(), count as usize);
    assert!(history.iter().all(|(_, _, state)| state == "applied"));
}

/// A run that succeeded without any word of a pooler.
fn assert_succeeded_unrefused(output: &Output, pool: &PgPool) {
    let (stdout, stderr) = text(output);
    assert!(
        output.status.success(),
        "a runner failed through pgpool-II:\n{stdout}\n{stderr}\npgpool log:\n{}",
        pool.log()
    );
    for word in ["pooler", "PgBouncer", "--locking lease"] {
        assert!(!stderr.contains(word), "`{word}` on stderr:\n{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn session_lock_runners_through_pgpool_wait_for_each_other_and_apply_each_migration_once() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    // Each runner may use three client connections at once (its own, the pooler check's
    // second one, the release listener): room for all four runners and the `unlock` polls.
    let Some(pool) = PgPool::start(&db, 16).await else {
        return;
    };
    let m = logged_migrations(8, 0.3);
    let url = pool.url();
    let migrate = ["migrate", "--lock-wait", "60s", "--output", "json"];
    let first = spawn(dirthara(&url, m.path(), &migrate));
    // Asked through pgpool too: the holder is seen from another client session.
    wait_until_held(|| dirthara(&url, m.path(), &["unlock", "--output", "json"]));
    let waiters: Vec<_> = (0..3)
        .map(|_| spawn(dirthara(&url, m.path(), &migrate)))
        .collect();
    let first = finish(first);
    assert_succeeded_unrefused(&first, &pool);
    assert_eq!(applied_versions(&first), (1..=8).collect::<Vec<_>>());
    for waiter in waiters.into_iter().map(finish) {
        assert_succeeded_unrefused(&waiter, &pool);
        let (_, stderr) = text(&waiter);
        // It met the first runner's lock, waited, then found nothing left to do.
        assert!(stderr.contains("waiting for lock"), "{stderr}");
        assert!(stderr.contains("acquired lock"), "{stderr}");
        assert_eq!(applied_versions(&waiter), Vec::<i64>::new());
    }
    assert_applied_once(&db, 8).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn session_lock_runners_started_together_through_pgpool_apply_each_migration_once() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let Some(pool) = PgPool::start(&db, 16).await else {
        return;
    };
    let m = logged_migrations(12, 0.05);
    let children: Vec<_> = (0..4)
        .map(|_| {
            spawn(dirthara(
                &pool.url(),
                m.path(),
                &["migrate", "--lock-wait", "60s", "--output", "json"],
            ))
        })
        .collect();
    let mut applied = Vec::new();
    for output in children.into_iter().map(finish) {
        assert_succeeded_unrefused(&output, &pool);
        applied.extend(applied_versions(&output));
    }
    applied.sort();
    assert_eq!(applied, (1..=12).collect::<Vec<_>>(), "reported as applied");
    assert_applied_once(&db, 12).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn lease_runners_through_pgpool_apply_each_migration_once() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let Some(pool) = PgPool::start(&db, 16).await else {
        return;
    };
    let m = logged_migrations(12, 0.05);
    let args = [
        "migrate",
        "--locking",
        "lease",
        "--lock-wait",
        "60s",
        "--output",
        "json",
    ];
    let children: Vec<_> = (0..4)
        .map(|_| spawn(dirthara(&pool.url(), m.path(), &args)))
        .collect();
    let mut applied = Vec::new();
    for output in children.into_iter().map(finish) {
        assert_succeeded_unrefused(&output, &pool);
        applied.extend(applied_versions(&output));
    }
    applied.sort();
    assert_eq!(applied, (1..=12).collect::<Vec<_>>(), "reported as applied");
    assert_applied_once(&db, 12).await;
    // Released at the end: no lease row left behind.
    assert_eq!(
        db.strings("SELECT count(*)::text FROM dirthara_migrations_lock")
            .await,
        ["0"]
    );
}

/// Asserts that a run was refused as a session lock behind a transaction pooler, naming it and
/// the fix.
fn assert_refused_as_pooled(output: &Output, odyssey: &Odyssey) {
    let (stdout, stderr) = text(output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{stdout}\n{stderr}\nOdyssey log:\n{}",
        odyssey.log()
    );
    let line = stderr
        .lines()
        .find(|l| l.starts_with("Error [MIGRATION_LOCK_FAILED]: "))
        .unwrap_or_else(|| panic!("no MIGRATION_LOCK_FAILED error on stderr:\n{stderr}"));
    for needle in [
        "Odyssey",
        "transaction-pooling proxy",
        "--locking lease",
        "Nothing was changed",
    ] {
        assert!(line.contains(needle), "`{needle}` missing from: {line}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn session_lock_runners_through_odyssey_are_refused_and_change_nothing() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let Some(odyssey) = Odyssey::start(&db, "transaction", 4).await else {
        return;
    };
    let m = logged_migrations(5, 0.0);
    // One runner alone on a fresh pool, then three at once on the used one.
    let alone = dirthara(&odyssey.url(), m.path(), &["migrate"])
        .output()
        .unwrap();
    assert_refused_as_pooled(&alone, &odyssey);
    let children: Vec<_> = (0..3)
        .map(|_| spawn(dirthara(&odyssey.url(), m.path(), &["migrate"])))
        .collect();
    for output in children.into_iter().map(finish) {
        assert_refused_as_pooled(&output, &odyssey);
    }
    assert_eq!(db.tables().await, Vec::<String>::new(), "nothing changed");
}

#[tokio::test(flavor = "multi_thread")]
async fn lease_runners_through_odyssey_apply_each_migration_once() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    let Some(odyssey) = Odyssey::start(&db, "transaction", 8).await else {
        return;
    };
    let m = logged_migrations(12, 0.05);
    let args = [
        "migrate",
        "--locking",
        "lease",
        "--lock-wait",
        "60s",
        "--output",
        "json",
    ];
    let children: Vec<_> = (0..4)
        .map(|_| spawn(dirthara(&odyssey.url(), m.path(), &args)))
        .collect();
    let mut applied = Vec::new();
    for output in children.into_iter().map(finish) {
        let (stdout, stderr) = text(&output);
        assert!(
            output.status.success(),
            "a lease runner failed through Odyssey:\n{stdout}\n{stderr}\nOdyssey log:\n{}",
            odyssey.log()
        );
        applied.extend(applied_versions(&output));
    }
    applied.sort();
    assert_eq!(applied, (1..=12).collect::<Vec<_>>(), "reported as applied");
    assert_applied_once(&db, 12).await;
    assert_eq!(
        db.strings("SELECT count(*)::text FROM dirthara_migrations_lock")
            .await,
        ["0"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn session_lock_runners_through_a_session_pooling_odyssey_apply_each_migration_once() {
    let Some(db) = TestDb::create(Server::Postgres).await else {
        return;
    };
    // Room for every connection of four runners at once: a session pool gives each client a
    // server session of its own, and a client beyond the pool size would wait for one.
    let Some(odyssey) = Odyssey::start(&db, "session", 16).await else {
        return;
    };
    let m = logged_migrations(12, 0.05);
    let children: Vec<_> = (0..4)
        .map(|_| {
            spawn(dirthara(
                &odyssey.url(),
                m.path(),
                &["migrate", "--lock-wait", "60s", "--output", "json"],
            ))
        })
        .collect();
    let mut applied = Vec::new();
    for output in children.into_iter().map(finish) {
        let (stdout, stderr) = text(&output);
        assert!(
            output.status.success(),
            "a session-lock runner failed through Odyssey in session mode:\n{stdout}\n{stderr}\n\
             Odyssey log:\n{}",
            odyssey.log()
        );
        assert!(!stderr.contains("pooler"), "{stderr}");
        applied.extend(applied_versions(&output));
    }
    applied.sort();
    assert_eq!(applied, (1..=12).collect::<Vec<_>>(), "reported as applied");
    assert_applied_once(&db, 12).await;
}
